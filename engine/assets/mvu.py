"""MVU (MagVarUpdate) initial variables: the ``stat_data`` tree a chat starts from.

An initvar is written as JSON, JSON5 or YAML (MVU tries them in that order). Old-style files make every
leaf a ``[value, "description"]`` pair (the description tells the model when to update the value);
new-style files are plain YAML values checked by a zod schema elsewhere. Objects may carry a ``$meta``
object (``extensible``, ``required``, ``template`` ...). We keep the tree exactly as written and offer
views: :meth:`MvuVariables.values` strips the descriptions, :meth:`MvuVariables.descriptions` lists them.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr

from ..errors import Diagnostic, TemplateError
from .base import AssetModel, type_name
from .paths import join_path
from .frozen import as_plain

__all__ = ["MvuVariables", "parse_mvu", "is_value_with_description", "META_KEYS", "ROOT_META_KEYS"]

#: ``$meta`` keys MVU understands on any object, and the extra ones it reads on the root.
META_KEYS = frozenset({"extensible", "recursiveExtensible", "required", "template"})
ROOT_META_KEYS = frozenset({"strictTemplate", "concatTemplateArray", "strictSet"})


def is_value_with_description(value: Any) -> bool:
    """MVU's ValueWithDescription test: a two-item array whose second item is a string."""
    return isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)


class MvuVariables(AssetModel):
    """MVU variables: ``stat_data`` (the tree), plus any other top-level keys of a full variables dump."""

    stat_data: dict[str, Any] = Field(default_factory=dict)
    _format: str = PrivateAttr(default="json")
    _name: str | None = PrivateAttr(default=None)

    @property
    def name(self) -> str | None:
        """The file stem given at load."""
        return self._name

    @property
    def source_format(self) -> str:
        """Which syntax the file was read as: ``json``, ``json5`` or ``yaml``."""
        return self._format

    @property
    def meta(self) -> dict[str, Any]:
        """The root ``$meta`` object ({} when absent)."""
        meta = self.stat_data.get("$meta")
        return meta if isinstance(meta, dict) else {}

    def values(self) -> Any:
        """The tree with every ``[value, "description"]`` pair replaced by its value and ``$`` keys removed."""
        return _strip(self.stat_data)

    def descriptions(self) -> dict[str, str]:
        """Dotted path -> description, for every ValueWithDescription leaf, in file order."""
        out: dict[str, str] = {}
        _collect(self.stat_data, "", out)
        return out

    def leaf_count(self) -> int:
        """Number of leaves (a ValueWithDescription pair counts as one leaf)."""
        return _count(self.stat_data)


def _strip(value: Any) -> Any:
    if is_value_with_description(value):
        return _strip(value[0])
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("$"))}
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get("$arrayMeta") is True)]
    return value


def _collect(value: Any, prefix: str, out: dict[str, str]) -> None:
    if is_value_with_description(value):
        out[prefix] = value[1]
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and k.startswith("$"):
                continue
            _collect(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _collect(v, f"{prefix}[{i}]", out)


def _count(value: Any) -> int:
    if is_value_with_description(value):
        return 1
    if isinstance(value, dict):
        return sum(_count(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("$")))
    if isinstance(value, list):
        return sum(_count(v) for v in value)
    return 1


def _check_meta(value: Any, path: str, diags: list[Diagnostic], *, root: bool) -> None:
    """Report ``$meta`` objects of the wrong shape (MVU would ignore or misread them)."""
    if isinstance(value, dict):
        for k, v in value.items():
            child = join_path(path, str(k))
            if k == "$meta":
                if not isinstance(v, dict):
                    diags.append(
                        Diagnostic("ASSET_MVU_META", f"$meta must be an object, not {type_name(v)}", severity="warning", path=child)
                    )
                    continue
                allowed = META_KEYS | (ROOT_META_KEYS if root else frozenset())
                for mk, mv in v.items():
                    if mk not in allowed:
                        diags.append(
                            Diagnostic("ASSET_MVU_META", f"unknown $meta key {mk!r}; MVU ignores it", severity="info",
                                       path=join_path(child, mk))
                        )
                    elif mk == "required" and not (isinstance(mv, list) and all(isinstance(x, str) for x in mv)):
                        diags.append(
                            Diagnostic("ASSET_MVU_META", "$meta.required must be an array of key names", severity="warning",
                                       path=join_path(child, mk))
                        )
                    elif mk in {"extensible", "recursiveExtensible", "strictTemplate", "concatTemplateArray",
                                "strictSet"} and not isinstance(mv, bool):
                        diags.append(
                            Diagnostic("ASSET_MVU_META", f"$meta.{mk} must be true or false", severity="warning", path=join_path(child, mk))
                        )
            else:
                _check_meta(v, child, diags, root=False)
    elif isinstance(value, list) and not is_value_with_description(value):
        for i, v in enumerate(value):
            _check_meta(v, join_path(path, i), diags, root=False)


def parse_mvu(
    raw: Any,
    *,
    name: str | None = None,
    source_format: str = "json",
    base_path: str = "$",
    diagnostics: list[Diagnostic] | None = None,
) -> MvuVariables:
    """Read MVU variables: a bare initvar tree, or a full variables object with ``stat_data``."""
    raw = as_plain(raw)  # a cached asset's frozen views (or a dict around them) read as plain data
    diags = diagnostics if diagnostics is not None else []
    if not isinstance(raw, dict):
        raise TemplateError(
            f"MVU variables must be an object (a mapping), not {type_name(raw)}", code="ASSET_INVALID", path=base_path
        )
    if "stat_data" in raw:
        if not isinstance(raw["stat_data"], dict):
            raise TemplateError(
                f"stat_data must be an object, not {type_name(raw['stat_data'])}",
                code="ASSET_INVALID",
                path=join_path(base_path, "stat_data"),
            )
        model = MvuVariables.model_validate(raw)
        tree_path = join_path(base_path, "stat_data")
    else:
        non_str = [k for k in raw if not isinstance(k, str)]
        if non_str:
            raise TemplateError(
                f"variable names must be strings; {non_str[0]!r} is a {type_name(non_str[0])}",
                code="ASSET_INVALID",
                path=join_path(base_path, str(non_str[0])),
            )
        model = MvuVariables(stat_data=raw)
        tree_path = base_path
    _check_meta(model.stat_data, tree_path, diags, root=True)
    model._format = source_format
    model._name = name
    return model

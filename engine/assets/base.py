"""The shared pydantic base for asset models and the translation of validation errors.

Every asset model keeps unknown fields (``extra="allow"``): cards and presets carry extension data
(scripts, regexes, third-party settings) that we must hand back byte-for-byte, never drop. Pydantic's
``ValidationError`` is translated here, at the module boundary, into a ``TemplateError`` whose ``path``
is a JSON path into the file as the user wrote it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import TemplateError
from .paths import join_path

__all__ = ["AssetModel", "validate_model", "type_name"]

M = TypeVar("M", bound=BaseModel)


class AssetModel(BaseModel):
    """Base of every asset model: unknown fields kept and dumped back under their own names."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_assignment=False)


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for messages users read."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _existing_parts(data: Any, loc: tuple[Any, ...]) -> tuple[list[str | int], Any, bool]:
    """Follow ``loc`` through ``data``; return the parts that exist, the value there, and whether all did.

    Pydantic locations also name union members and validator steps (``'int'``, ``'function-after[...]'``);
    only parts that are real keys of the input belong in a user-facing path.
    """
    parts: list[str | int] = []
    current = data
    for part in loc:
        if isinstance(current, dict) and isinstance(part, str) and part in current:
            current = current[part]
            parts.append(part)
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
            parts.append(part)
        elif isinstance(current, dict) and isinstance(part, int) and str(part) in current:
            current = current[str(part)]
            parts.append(str(part))
        else:
            return parts, current, False
    return parts, current, True


def validate_model(cls: type[M], data: Any, base_path: str = "$") -> M:
    """Validate ``data`` as ``cls``; a failure becomes ``ASSET_INVALID``/``ASSET_FIELD_MISSING`` with a path."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(err.get("loc", ()))
        parts, value, complete = _existing_parts(data, loc)
        if err.get("type") == "missing":
            missing = next((p for p in loc[len(parts) :] if isinstance(p, str)), None)
            path = join_path(base_path, *parts, *([missing] if missing else []))
            raise TemplateError(
                f"required field {missing or 'value'!r} is missing", code="ASSET_FIELD_MISSING", path=path
            ) from None
        path = join_path(base_path, *parts)
        shown = type_name(value) if complete or parts else type_name(data)
        raise TemplateError(
            f"{err.get('msg', 'invalid value')} (got {shown})", code="ASSET_INVALID", path=path
        ) from None

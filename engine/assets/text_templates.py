"""SillyTavern's text-completion templates: instruct, context and system-prompt objects, by file or by name.

A template is one JSON object in SillyTavern's own field names (``instruct/ChatML.json``,
``context/ChatML.json``, ``sysprompt/Neutral - Chat.json``); SillyTavern's "master export" holds
all three (``{"instruct": {...}, "context": {...}, "sysprompt": {...}, ...}``). Fields a file
leaves out take the values SillyTavern's settings start with; a field of the wrong type is an
``ASSET_INVALID`` error naming its JSON path; an unknown field is kept (SillyTavern adds fields
between releases) and reported as ``INPUT_UNKNOWN_KEY``.

**Names and the template folder.** SillyTavern's shipped templates are AGPL-3.0 data (SillyTavern's
licence; its ``default/content`` has no other), and tavernbox is MIT and copies no upstream text,
so they are not shipped here. A name (``ChatML``, ``Llama 3 Instruct``) is looked up in a template
folder the user names: a SillyTavern install's ``default/content/presets`` or a user data folder
(``data/default-user``), both of which hold ``instruct/``, ``context/`` and ``sysprompt/``; given
by ``folder=`` or the ``TAVERNBOX_ST_TEMPLATES`` environment variable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, TemplateError

__all__ = [
    "CONTEXT_DEFAULTS",
    "INSTRUCT_DEFAULTS",
    "KINDS",
    "SYSPROMPT_DEFAULTS",
    "TemplateFolder",
    "TextTemplate",
    "load_text_template",
    "read_master_export",
    "template_folder",
]

KINDS = ("instruct", "context", "sysprompt")
ENV_FOLDER = "TAVERNBOX_ST_TEMPLATES"

#: SillyTavern 1.18's starting values (``power_user.instruct``), used for fields a file leaves out.
INSTRUCT_DEFAULTS: dict[str, Any] = {
    "enabled": True, "input_sequence": "### Instruction:", "input_suffix": "", "output_sequence": "### Response:",
    "output_suffix": "", "system_sequence": "", "system_suffix": "", "last_system_sequence": "",
    "first_input_sequence": "", "first_output_sequence": "", "last_input_sequence": "", "last_output_sequence": "",
    "story_string_prefix": "", "story_string_suffix": "", "stop_sequence": "", "wrap": True, "macro": True,
    "names_behavior": "force", "activation_regex": "", "bind_to_context": False, "user_alignment_message": "",
    "system_same_as_user": False, "skip_examples": False, "sequences_as_stop_strings": True, "name": "",
}
#: ``power_user.context``'s starting values (the "Default" story string is SillyTavern's own, so a
#: context template must give its ``story_string``).
CONTEXT_DEFAULTS: dict[str, Any] = {
    "example_separator": "***", "chat_start": "***", "use_stop_strings": True, "names_as_stop_strings": True,
    "story_string_position": 0, "story_string_role": 0, "story_string_depth": 1, "always_force_name2": True,
    "trim_sentences": False, "single_line": False, "name": "",
}
SYSPROMPT_DEFAULTS: dict[str, Any] = {"enabled": True, "name": "", "content": "", "post_history": ""}

_DEFAULTS = {"instruct": INSTRUCT_DEFAULTS, "context": CONTEXT_DEFAULTS, "sysprompt": SYSPROMPT_DEFAULTS}
_REQUIRED = {"instruct": (), "context": ("story_string",), "sysprompt": ("content",)}
_STRINGS_OR_TYPES: dict[str, type | tuple[type, ...]] = {"story_string": str}
_NAMES_BEHAVIORS = ("none", "force", "always")


@dataclass(frozen=True, slots=True)
class TextTemplate:
    """One validated template: ``kind``, its fields (defaults filled in), where it came from."""

    kind: str
    fields: Mapping[str, Any]
    source: str
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    @property
    def name(self) -> str:
        return str(self.fields.get("name") or "")


def _invalid(message: str, path: str) -> TemplateError:
    return TemplateError(message, code="ASSET_INVALID", path=path)


def validate(kind: str, raw: Any, source: str, path: str = "$") -> TextTemplate:
    """Check ``raw`` as a ``kind`` template (field types as SillyTavern writes them)."""
    if kind not in _DEFAULTS:
        raise ValueError(f"unknown template kind {kind!r}")
    if not isinstance(raw, dict):
        raise _invalid(f"a {kind} template must be a JSON object", path)
    defaults = _DEFAULTS[kind]
    fields: dict[str, Any] = dict(defaults)
    diagnostics: list[Diagnostic] = []
    for required in _REQUIRED[kind]:
        if required not in raw:
            raise TemplateError(f"a {kind} template needs {required!r}", code="ASSET_FIELD_MISSING",
                                path=f"{path}.{required}")
    for key, value in raw.items():
        where = f"{path}.{key}"
        expected = defaults.get(key, _STRINGS_OR_TYPES.get(key))
        if expected is None:
            if key not in ("preset", "separator_sequence"):
                diagnostics.append(Diagnostic("INPUT_UNKNOWN_KEY", f"{key!r} is not a {kind} template field; kept",
                                              path=where))
            fields[key] = value
            continue
        want = expected if isinstance(expected, type) else type(expected)
        if want is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, want)
        if not ok:
            raise _invalid(f"{key} must be {want.__name__}, not {type(value).__name__}", where)
        fields[key] = value
    if kind == "instruct" and fields["names_behavior"] not in _NAMES_BEHAVIORS:
        raise _invalid(f"names_behavior must be one of {', '.join(_NAMES_BEHAVIORS)}", f"{path}.names_behavior")
    if kind == "context" and fields["story_string_position"] not in (0, 1):
        raise _invalid("story_string_position must be 0 (in the prompt) or 1 (in the chat)",
                       f"{path}.story_string_position")
    return TextTemplate(kind, fields, source, tuple(diagnostics))


@dataclass(frozen=True, slots=True)
class TemplateFolder:
    """A folder holding ``instruct/``, ``context/`` and ``sysprompt/`` template files."""

    root: Path

    def names(self, kind: str) -> list[str]:
        folder = self.root / kind
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json"))

    def find(self, kind: str, name: str) -> Path | None:
        """The file for ``name``: ``NAME.json``, else a file whose ``name`` field is ``name``."""
        candidate = self.root / kind / f"{name}.json"
        if candidate.is_file():
            return candidate
        for path in sorted((self.root / kind).glob("*.json")) if (self.root / kind).is_dir() else []:
            try:
                if json.loads(path.read_text(encoding="utf-8-sig")).get("name") == name:
                    return path
            except (OSError, ValueError, AttributeError):
                continue
        return None


def template_folder(folder: str | os.PathLike[str] | None = None) -> TemplateFolder | None:
    """The template folder given, or the one ``TAVERNBOX_ST_TEMPLATES`` names (``None``: neither)."""
    chosen = folder if folder is not None else os.environ.get(ENV_FOLDER) or None
    if chosen is None:
        return None
    root = Path(chosen)
    if not root.is_dir():
        raise TemplateError(f"the template folder {root} does not exist", code="INPUT_INVALID")
    return TemplateFolder(root)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise TemplateError(f"cannot read {path}: {exc.strerror}", code="INPUT_INVALID", path=str(path)) from None
    except ValueError as exc:
        raise TemplateError(f"{path} is not JSON: {exc}", code="ASSET_JSON", path=str(path)) from None


def load_text_template(kind: str, ref: str | Mapping[str, Any], folder: TemplateFolder | None = None) -> TextTemplate:
    """A ``kind`` template from an object, a file path, or a name looked up in ``folder``.

    A file or object that is a master export gives its ``kind`` part.
    """
    if isinstance(ref, Mapping):
        raw: Any = dict(ref)
        source = "inline"
    else:
        path = Path(ref)
        if path.suffix.lower() == ".json" and path.is_file():
            raw, source = _read_json(path), str(path)
        else:
            found = folder.find(kind, str(ref)) if folder is not None else None
            if found is None:
                raise _unknown_name(kind, str(ref), folder)
            raw, source = _read_json(found), str(found)
    if isinstance(raw, dict) and isinstance(raw.get(kind), dict) and _looks_like_master_export(raw):
        return validate(kind, raw[kind], source, f"$.{kind}")
    return validate(kind, raw, source)


def _looks_like_master_export(raw: dict[str, Any]) -> bool:
    return sum(isinstance(raw.get(k), dict) for k in KINDS) >= 2


def read_master_export(raw: Mapping[str, Any], source: str = "inline") -> dict[str, TextTemplate]:
    """The templates a SillyTavern master export holds (``instruct``, ``context``, ``sysprompt``)."""
    out = {kind: validate(kind, raw[kind], source, f"$.{kind}") for kind in KINDS if isinstance(raw.get(kind), dict)}
    if not out:
        raise _invalid("a master export holds instruct, context and sysprompt objects", "$")
    return out


def _unknown_name(kind: str, name: str, folder: TemplateFolder | None) -> TemplateError:
    if folder is None:
        return TemplateError(
            f"no {kind} template file {name!r}, and no template folder to look the name up in: SillyTavern's "
            f"templates are not shipped with tavernbox (AGPL-3.0); point {ENV_FOLDER} (or the request's "
            "text_completion.templates, or --st-templates) at a SillyTavern install's default/content/presets or "
            "its data/default-user folder",
            code="INPUT_INVALID")
    names = folder.names(kind)
    close = [n for n in names if n.lower().startswith(name.lower()[:3])][:8] or names[:8]
    return TemplateError(f"no {kind} template named {name!r} in {folder.root}; some there: {', '.join(close)}",
                         code="INPUT_INVALID")

"""The request's ``extensions`` object: which of SillyTavern's template extensions run, with their settings.

Kept apart from the extensions' machinery (:mod:`tavernbox.ejs.st_extensions`) so that reading the settings of a
request costs nothing: a request whose templates never run never imports the EJS compiler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TemplateError

__all__ = ["PROMPT_TEMPLATE_SETTINGS", "SHOWN_MESSAGES", "ExtensionSettings", "load_steps", "parse_extensions"]

#: tavernbox's own budgets accepted beside them in ``extensions.prompt_template`` (CPU seconds: default, maximum)
PROMPT_TEMPLATE_BUDGETS: dict[str, tuple[float, float]] = {"time_limit": (2.0, 60.0), "template_time_limit": (1.0, 60.0)}

#: ST-Prompt-Template's settings (``extension_settings.EjsTemplate``) and their defaults
PROMPT_TEMPLATE_SETTINGS: dict[str, Any] = {
    "enabled": True, "generate_enabled": True, "generate_loader_enabled": True, "render_enabled": True,
    "render_loader_enabled": True, "with_context_disabled": False, "debug_enabled": False,
    "autosave_enabled": False, "preload_worldinfo_enabled": True, "code_blocks_enabled": False,
    "raw_message_evaluation_enabled": True, "filter_message_enabled": True, "cache_enabled": 0, "cache_size": 64,
    "cache_hasher": "h32ToString", "inject_loader_enabled": False, "invert_enabled": True, "depth_limit": -1,
    "compile_workers": False, "sandbox": False, "code_editor": False,
}


@dataclass(frozen=True)
class ExtensionSettings:
    """Which extensions run, with ST-Prompt-Template's settings."""

    prompt_template: Mapping[str, Any] = field(default_factory=lambda: dict(PROMPT_TEMPLATE_SETTINGS))
    tavern_helper: bool = True
    #: tavernbox's budgets beside the extension's settings (``extensions.prompt_template.time_limit`` /
    #: ``template_time_limit``): CPU seconds for all of a request's templates, and for each one
    time_limit: float = 2.0
    template_time_limit: float = 1.0

    @property
    def templates_on(self) -> bool:
        pt = self.prompt_template
        return bool(pt.get("enabled")) and bool(pt.get("generate_enabled"))


def _flag(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise TemplateError(f"{path} must be true or false", code="REQUEST_INVALID", path=path)
    return value


def parse_extensions(raw: Any, *, path: str = "$.extensions") -> ExtensionSettings:
    """The request's ``extensions`` object (``REQUEST_INVALID`` with the JSON path of a wrong field)."""
    if raw is None:
        return ExtensionSettings()
    if not isinstance(raw, Mapping):
        raise TemplateError(f"{path} must be an object", code="REQUEST_INVALID", path=path)
    for key in raw:
        if key not in ("prompt_template", "tavern_helper"):
            raise TemplateError(f"unknown field {key!r} at {path}.{key} (prompt_template, tavern_helper)",
                                code="REQUEST_INVALID", path=f"{path}.{key}")
    pt = dict(PROMPT_TEMPLATE_SETTINGS)
    given = raw.get("prompt_template")
    budgets = {name: default for name, (default, _) in PROMPT_TEMPLATE_BUDGETS.items()}
    if isinstance(given, bool):
        pt["enabled"] = given
    elif given is not None:
        if not isinstance(given, Mapping):
            raise TemplateError(f"{path}.prompt_template must be an object or true/false", code="REQUEST_INVALID",
                                path=f"{path}.prompt_template")
        for key, value in given.items():
            where = f"{path}.prompt_template.{key}"
            if key in PROMPT_TEMPLATE_BUDGETS:
                budgets[key] = _seconds(value, PROMPT_TEMPLATE_BUDGETS[key][1], where)
                continue
            if key not in PROMPT_TEMPLATE_SETTINGS:
                raise TemplateError(f"unknown field {key!r} at {where} (ST-Prompt-Template's setting names, "
                                    "time_limit, template_time_limit)",
                                    code="REQUEST_INVALID", path=where)
            default = PROMPT_TEMPLATE_SETTINGS[key]
            if isinstance(default, bool):
                value = _flag(value, where)
            elif type(value) is not type(default):
                raise TemplateError(f"{where} must be a {type(default).__name__}", code="REQUEST_INVALID", path=where)
            pt[key] = value
    th = raw.get("tavern_helper")
    if isinstance(th, Mapping):
        for key in th:
            if key != "enabled":
                raise TemplateError(f"unknown field {key!r} at {path}.tavern_helper.{key}", code="REQUEST_INVALID",
                                    path=f"{path}.tavern_helper.{key}")
        th_on = _flag(th.get("enabled", True), f"{path}.tavern_helper.enabled")
    elif th is None:
        th_on = True
    else:
        th_on = _flag(th, f"{path}.tavern_helper")
    return ExtensionSettings(pt, th_on, **budgets)


def _seconds(value: Any, maximum: float, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= maximum:
        raise TemplateError(f"{where} must be a number of seconds above 0 and at most {maximum:g}",
                            code="REQUEST_INVALID", path=where)
    return float(value)


#: the messages SillyTavern shows when a chat opens (its ``chat_truncation`` default): the extension evaluates those
SHOWN_MESSAGES = 100


def load_steps(contents: Sequence[str], settings: ExtensionSettings) -> list[int]:
    """The messages ST-Prompt-Template evaluates when the chat opens, in order: none unless it is on with its
    world-info preload and message rendering (it renders from the preload, on a chat of more than one message);
    then the shown messages within ``depth_limit`` of the end, except empty ones and SillyTavern's ``...``
    placeholder."""
    pt = settings.prompt_template
    if not (pt.get("enabled") and pt.get("preload_worldinfo_enabled") and pt.get("render_enabled")) \
            or len(contents) <= 1:
        return []
    n = len(contents)
    limit = pt.get("depth_limit", -1)
    first = max(0, n - SHOWN_MESSAGES)
    return [i for i in range(first, n) if (limit < 0 or n - i - 1 <= limit) and contents[i] not in ("", "...")]

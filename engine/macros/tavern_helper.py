"""Tavern Helper's variable macros, as it expands them in the messages SillyTavern is about to send.

Tavern Helper (``N0VI028/JS-Slash-Runner``) does not register these with SillyTavern's macro engine: it rewrites
every final message's text with two regular expressions when SillyTavern has built the prompt
(``GENERATE_AFTER_DATA``), after SillyTavern's macros and before ST-Prompt-Template. So a value is never
re-expanded by SillyTavern, and a ``{{get_...}}`` built by a template at render time stays as written. What it does:

- ``{{get_<scope>_variable::path}}`` (case-insensitive): the value at ``path`` (lodash ``_.get`` with HTML
  entities unescaped; ``$``-prefixed keys removed at every depth); a string as it is, anything else as
  ``JSON.stringify`` writes it (``null`` when absent);
- ``{{format_<scope>_variable::path}}``: the value as YAML (``YAML.stringify(value, {blockQuote: 'literal'})``,
  trailing whitespace trimmed), every line after the first indented by as many spaces as the text before the macro
  on its line (UTF-16 units), so a block nests under its label. Several on one line are expanded left to right.

Scopes: ``message`` (the latest message with variables), ``chat``, ``global``, ``character``, ``preset``; a scope
name in another case (``MESSAGE``) is matched by the expression but reads nothing, so it prints ``null``, as in
Tavern Helper. :data:`MACRO_NAMES` lists the names SillyTavern's engine must leave as written (no
``MACRO_UNKNOWN``) when Tavern Helper is on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .js_yaml import js_ordered, yaml_stringify
from .st_variables import StVariables
from .variables import js_json

if TYPE_CHECKING:
    from .evaluator import MacroCall
    from .registry import MacroRegistry

__all__ = ["MACRO_NAMES", "MacroUse", "expand_variable_macros", "lodash_get", "register_as_written"]

SCOPES = ("message", "chat", "character", "preset", "global")
MACRO_NAMES = tuple(f"{kind}_{scope}_variable" for kind in ("get", "format") for scope in SCOPES)

_LINE_BREAKS = "\n\r\u2028\u2029"
_ANY = f"[^{_LINE_BREAKS}]"
_LINE_START = f"(?:^|(?<=[{_LINE_BREAKS}]))"
_GET = re.compile(r"\{\{get_(message|chat|character|preset|global)_variable::(" + _ANY + r"*?)\}\}", re.I)
_FORMAT = re.compile(_LINE_START + "(" + _ANY + r"*)\{\{format_(message|chat|character|preset|global)_variable::("
                     + _ANY + r"*?)\}\}", re.I)
_FORMAT_IN_PREFIX = re.compile("^(" + _ANY + r"*)\{\{format_(message|chat|character|preset|global)_variable::("
                               + _ANY + r"*?)\}\}", re.I)
_PROP = re.compile(r"""[^.\[\]]+|\[(?:(-?\d+(?:\.\d+)?)|(["'])((?:(?!\2)[^\\]|\\.)*?)\2)\]|(?=(?:\.|\[\])(?:\.|\[\]|$))""")
_DEEP = re.compile(r"""\.|\[(?:[^\[\]]*|(["'])(?:(?!\1)[^\\]|\\.)*?\1)\]""")
_MISSING = object()


@dataclass
class MacroUse:
    """One expanded macro, for the dependency report: its name, the scope and the path it read."""

    name: str
    scope: str
    path: str


@dataclass
class _Expansion:
    variables: StVariables
    uses: list[MacroUse] = field(default_factory=list)


def _to_path(path: str) -> list[str]:
    """lodash's ``stringToPath``: ``a.b[0]["c.d"]`` -> ``['a', 'b', '0', 'c.d']``."""
    keys: list[str] = [""] if path.startswith(".") else []
    for m in _PROP.finditer(path):
        number, quote, inner = m.group(1), m.group(2), m.group(3)
        if quote:
            keys.append(re.sub(r"\\(\\)?", r"\1", inner))
        else:
            keys.append(number if number is not None else m.group(0))
    return keys


def _step(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key, _MISSING)
    if isinstance(value, (list, str)):
        if key == "length":
            return len(value) if isinstance(value, list) else len(value.encode("utf-16-le")) // 2
        if re.fullmatch(r"0|[1-9][0-9]*", key) and int(key) < len(value):
            return value[int(key)]
    return _MISSING


def lodash_get(root: Any, path: str) -> Any:
    """lodash ``_.get(root, path, null)`` over JSON values (``None`` when absent): the whole path is a key first
    when the object has it, or when it has no ``.``/``[...]``."""
    if root is None:
        return None
    if re.fullmatch(r"\w*", path) or not _DEEP.search(path) or (isinstance(root, dict) and path in root):
        value = _step(root, path)
        return None if value is _MISSING else value
    value = root
    for key in _to_path(path):
        if value is None or value is _MISSING:
            return None
        value = _step(value, key)
    return None if value is _MISSING else value


def _without_dollar_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_dollar_keys(v) for k, v in value.items() if not str(k).startswith("$")}
    if isinstance(value, list):
        return [_without_dollar_keys(v) for v in value]
    return value


def _value(variables: StVariables, scope: str, path: str) -> Any:
    root = variables.scope(scope)
    return _without_dollar_keys(lodash_get(root, _unescape(path)))


_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'"}


def _unescape(text: str) -> str:
    """lodash ``_.unescape``: the five entities its ``escape`` writes, nothing else."""
    return re.sub(r"&(?:amp|lt|gt|quot|#39);", lambda m: _ENTITIES[m.group(0)], text) if "&" in text else text


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _get(ex: _Expansion, m: re.Match[str]) -> str:
    value = _value(ex.variables, m.group(1), m.group(2))
    return value if isinstance(value, str) else js_json(js_ordered(value))


def _format(ex: _Expansion, prefix: str, scope: str, path: str) -> str:
    inner = _FORMAT_IN_PREFIX.search(prefix)
    if inner:
        prefix = _format(ex, inner.group(1), inner.group(2), inner.group(3)) + prefix[inner.end():]
    value = _value(ex.variables, scope, path)
    text = value if isinstance(value, str) else yaml_stringify(value).rstrip()
    return prefix + text.replace("\n", "\n" + " " * _utf16_len(prefix))


def expand_variable_macros(text: str, variables: StVariables, uses: list[MacroUse] | None = None) -> str:
    """One message's text with Tavern Helper's variable macros expanded (the ``get`` forms first, then the
    ``format`` forms, as Tavern Helper runs its two expressions). ``uses`` collects what was expanded."""
    if "{{" not in text:
        return text
    ex = _Expansion(variables)

    def get(m: re.Match[str]) -> str:
        out = _get(ex, m)
        ex.uses.append(MacroUse(f"get_{m.group(1)}_variable", m.group(1), m.group(2)))
        return out

    def fmt(m: re.Match[str]) -> str:
        out = _format(ex, m.group(1), m.group(2), m.group(3))
        ex.uses.append(MacroUse(f"format_{m.group(2)}_variable", m.group(2), m.group(3)))
        return out

    text = _GET.sub(get, text)
    text = _FORMAT.sub(fmt, text)
    if uses is not None:
        uses.extend(ex.uses)
    return text



def _as_written(call: MacroCall) -> str:
    """The call as written, its arguments' own macros evaluated (what SillyTavern leaves of a name it does not
    know), so Tavern Helper's pass finds it in the final message."""
    src, node = call.state.source, call.node
    parts = ["{{"]
    cursor = node.inner_start
    for span, value in zip(call.spans, call.args, strict=False):
        if span is None:
            continue
        if span[0] > cursor:
            parts.append(src[cursor : span[0]])
        parts.append(value)
        cursor = span[1]
    parts.append(src[cursor : node.inner_end])
    parts.append("}}")
    return "".join(parts)


def register_as_written(registry: MacroRegistry) -> None:
    """Make SillyTavern's engine know Tavern Helper's names (no ``MACRO_UNKNOWN``) and leave each call as written
    for :func:`expand_variable_macros`, which runs over the final messages as Tavern Helper does."""
    for name in MACRO_NAMES:
        registry.register(name, _as_written, max_args=None, strict=False,
                          description="Tavern Helper: left for its pass over the final messages")

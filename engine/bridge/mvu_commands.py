"""MVU update commands read from a model's reply: ``_.set(...)`` calls and ``<JSONPatch>`` blocks.

The reading half of :func:`~.mvu_update.apply_mvu_reply` (which applies the commands to a state):
find every command in text order, split its arguments and read each one as data only -- JSON,
JSON5, a small numeric-expression grammar (``+ - * /`` and parentheses), YAML flow collections,
else the text with its quotes trimmed. Nothing is ever executed. Text that cannot be read as
commands, and every size limit, raise :class:`TemplateError` with a stable code and the line:col
in the reply. The limits of the whole update (dsh-assembler 11.2) are defined here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import json5
import yaml

from ..errors import TemplateError
from ..spans import Span

__all__ = [
    "MAX_COMMANDS",
    "MAX_LOOSE_VALUE_CHARS",
    "MAX_PATH_CHARS",
    "MAX_PATH_PARTS",
    "MAX_REPLY_BYTES",
    "MAX_STATE_BYTES",
    "MAX_STATE_DEPTH",
    "MAX_STATE_NODES",
    "Command",
    "limit_error",
    "norm_number",
    "normalise",
    "read_commands",
]

#: dsh-tavern's limits (dsh-assembler 11.2); each has its own stable error code.
MAX_REPLY_BYTES = 1024 * 1024  # MVU_REPLY_LIMIT (UTF-8 bytes)
MAX_COMMANDS = 1000  # MVU_COMMAND_LIMIT (a JSON Patch operation counts as one command)
MAX_PATH_CHARS = 2000  # MVU_PATH_LIMIT
MAX_PATH_PARTS = 64  # MVU_PATH_LIMIT
MAX_STATE_BYTES = 2 * 1024 * 1024  # MVU_STATE_LIMIT (compact JSON, UTF-8)
MAX_STATE_NODES = 100_000  # MVU_STATE_LIMIT (every object, array and scalar counts one)
MAX_STATE_DEPTH = 64  # MVU_STATE_LIMIT (the root object is depth 1)
#: Characters of values that are not strict JSON but look structured (start with { [ ' ") that one
#: reply may hand to the JSON5 and YAML readers. Both are pure Python and read ~50-100 KB/s, so
#: without this a 1 MiB reply could cost many CPU seconds. MVU_VALUE_LIMIT.
MAX_LOOSE_VALUE_CHARS = 64 * 1024

_SAFE_INT = 2**53


def norm_number(value: float | int) -> float | int:
    """JavaScript has one number type: an integral float is shown and stored as an int."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _SAFE_INT:
        return int(value)
    return value


def normalise(value: Any) -> Any:
    if isinstance(value, float):
        return norm_number(value)
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# scanning the reply into commands


@dataclass(frozen=True)
class Command:
    name: str  # set, add, insert, delete, move
    args: tuple[Any, ...]  # already-read values; paths are tuples (or a str error) -- see _Runner
    start: int
    end: int
    reason: str
    path_texts: tuple[str, ...] = ()


_CALL = re.compile(r"(?<![\w$.])_\s*\.\s*(set|add|insert|assign|remove|unset|delete)\s*\(")
_PATCH = re.compile(r"<(jsonpatch|json_patch)\s*>", re.I)
_FENCE = re.compile(r"^```[\w-]*[ \t]*\n?(.*?)\n?```$", re.S)
_ALIASES = {"assign": "insert", "unset": "delete", "remove": "delete"}
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_QUOTES = "'\"`"


def _string_end(text: str, start: int, n: int) -> int:
    """Index of the quote that closes the string opening at ``start`` (backslash escapes skipped), or
    ``n`` or more when it never closes."""
    quote = text[start]
    j = start + 1
    while j < n and text[j] != quote:
        j += 2 if text[j] == "\\" else 1
    return j


def _syntax(message: str, source: str, start: int, end: int | None = None) -> TemplateError:
    return TemplateError(message, code="MVU_COMMAND_SYNTAX", span=Span(start, max(start, end or start + 1)), source=source)


def limit_error(code: str, message: str, source: str, start: int, end: int) -> TemplateError:
    return TemplateError(message, code=code, span=Span(start, max(start, end)), source=source)


def read_commands(text: str) -> list[Command]:
    """Every command and JSON Patch operation, in text order (patch blocks are not scanned for calls)."""
    found: list[Command] = []
    blocks: list[tuple[int, int]] = []
    budget = [MAX_LOOSE_VALUE_CHARS]
    for m in _PATCH.finditer(text):
        if blocks and m.start() < blocks[-1][1]:
            continue
        close = re.compile(rf"</\s*{m.group(1)}\s*>", re.I).search(text, m.end())
        if close is None:
            raise _syntax(f"<{m.group(1)}> is never closed", text, m.start(), m.end())
        blocks.append((m.start(), close.end()))
        found.extend(_patch_ops(text, m.end(), close.start(), len(found), budget))
    pos = 0
    block_i = 0
    while True:
        call = _CALL.search(text, pos)
        if call is None:
            break
        while block_i < len(blocks) and blocks[block_i][1] <= call.start():
            block_i += 1
        if block_i < len(blocks) and blocks[block_i][0] <= call.start():
            pos = blocks[block_i][1]
            continue
        cmd, pos = _read_call(text, call, budget)
        found.append(cmd)
        if len(found) > MAX_COMMANDS:
            raise limit_error("MVU_COMMAND_LIMIT", f"the reply holds more than {MAX_COMMANDS} commands", text, call.start(), pos)
    found.sort(key=lambda c: c.start)
    return found


def _scan_args(text: str, open_at: int) -> tuple[list[tuple[int, int]], int]:
    """Top-level argument ranges of the call whose ``(`` is at ``open_at``, and the offset of its ``)``."""
    stack: list[str] = []
    args: list[tuple[int, int]] = []
    arg_start = open_at + 1
    i = open_at + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in _QUOTES:
            j = _string_end(text, i, n)
            if j >= n:
                raise _syntax("a string in this command is never closed", text, i, n)
            i = j + 1
            continue
        if ch in _CLOSE:
            stack.append(_CLOSE[ch])
            if len(stack) > MAX_STATE_DEPTH:
                raise limit_error("MVU_STATE_LIMIT", f"a value is nested deeper than {MAX_STATE_DEPTH}", text, i, i + 1)
        elif ch in ")]}":
            if not stack:
                if ch != ")":
                    raise _syntax(f"unbalanced {ch!r} in this command", text, i, i + 1)
                args.append((arg_start, i))
                return args, i
            if stack.pop() != ch:
                raise _syntax(f"unbalanced {ch!r} in this command", text, i, i + 1)
        elif ch == "," and not stack:
            args.append((arg_start, i))
            arg_start = i + 1
        i += 1
    raise _syntax("this command's parenthesis is never closed", text, open_at, n)


def _read_call(text: str, m: re.Match[str], budget: list[int]) -> tuple[Command, int]:
    arg_ranges, close = _scan_args(text, m.end() - 1)
    j = close + 1
    while j < len(text) and text[j] in " \t\r\n":
        j += 1
    if j >= len(text) or text[j] != ";":
        raise _syntax("a command must end with ');'", text, m.start(), close + 1)
    end = j + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    rest = text[end:line_end].strip()
    if "</" in rest:  # a closing tag on the same line (``;//reason</UpdateVariable>``) ends the reason
        rest = rest[: rest.index("</")]
    reason = rest[2:].strip() if rest.startswith("//") else ""
    raw = [text[a:b].strip() for a, b in arg_ranges]
    if raw == [""]:
        raw = []
    name = _ALIASES.get(m.group(1), m.group(1))
    path_text = _unquote(raw[0]) if raw else ""
    values = tuple(_read_value(r, text, a, budget) for r, (a, _) in zip(raw[1:], arg_ranges[1:]))
    return Command(name, values, m.start(), end, reason, (path_text,)), end


def _unquote(raw: str) -> str:
    """A path argument: a quoted string (JSON/JSON5 escapes honoured) or the text as written."""
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in _QUOTES:
        if raw[0] != "`" and len(raw) <= MAX_PATH_CHARS + 2:  # longer paths fail their limit anyway
            try:
                value = json5.loads(raw)
            except Exception:  # noqa: BLE001 - json5 raises several types; the fallback is the text
                value = None
            if isinstance(value, str):
                return value
        return raw[1:-1]
    return raw


def _patch_ops(text: str, start: int, end: int, already: int, budget: list[int]) -> list[Command]:
    body = text[start:end].strip()
    fence = _FENCE.match(body)
    if fence:
        body = fence.group(1).strip()
    depth = _nesting(body)
    if depth > MAX_STATE_DEPTH + 2:
        raise limit_error("MVU_STATE_LIMIT", f"a JSON Patch value is nested deeper than {MAX_STATE_DEPTH}", text, start, end)
    try:
        ops = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        _charge(budget, body, text, start, end)
        try:
            ops = json5.loads(body)
        except Exception as exc:  # noqa: BLE001 - json5 raises several types
            raise _syntax(f"the JSON Patch block is not JSON: {exc}", text, start, end) from None
    if isinstance(ops, dict):
        ops = [ops]
    if not isinstance(ops, list):
        raise _syntax("a JSON Patch block must hold an array of operations", text, start, end)
    if already + len(ops) > MAX_COMMANDS:
        raise limit_error("MVU_COMMAND_LIMIT", f"the reply holds more than {MAX_COMMANDS} commands", text, start, end)
    out: list[Command] = []
    for i, op in enumerate(ops):
        # every op of one block shares the block's span; the tie-break keeps their order
        where = op.get("path") if isinstance(op, dict) and isinstance(op.get("path"), str) else None
        try:
            op = _checked(op)
        except ValueError:
            op = None  # NaN/Infinity or too many nodes: the operation is skipped as invalid
        out.append(Command("patch", (op,), start, end, "", (where,) if where is not None else ()))
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _nesting(body: str) -> int:
    """Bracket depth outside strings (a cheap guard before a recursive parser sees the text)."""
    depth = best = 0
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch in _QUOTES:
            i = _string_end(body, i, n) + 1
            continue
        if ch in "[{(":
            depth += 1
            best = max(best, depth)
        elif ch in "]})":
            depth = max(0, depth - 1)
        i += 1
    return best


# ---------------------------------------------------------------------------------------------
# reading one argument value (never executed)


class _CoreLoader(yaml.SafeLoader):
    """YAML 1.2 core scalars: no yes/no booleans, timestamps or sexagesimal numbers."""


_CoreLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag.rsplit(":", 1)[-1] not in {"bool", "int", "float", "timestamp"}]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_CoreLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_CoreLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_CoreLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


def _charge(budget: list[int], raw: str, source: str, start: int, end: int) -> None:
    budget[0] -= len(raw)
    if budget[0] < 0:
        raise limit_error(
            "MVU_VALUE_LIMIT",
            f"the reply's non-JSON structured values pass {MAX_LOOSE_VALUE_CHARS} characters (write large values as JSON)",
            source,
            start,
            end,
        )


def _read_value(raw: str, source: str, offset: int, budget: list[int]) -> Any:
    """JSON, then JSON5, then arithmetic, then a YAML flow collection, else the quote-trimmed text."""
    if _nesting(raw) > MAX_STATE_DEPTH:
        raise limit_error("MVU_STATE_LIMIT", f"a value is nested deeper than {MAX_STATE_DEPTH}", source, offset, offset + len(raw))
    try:
        return _checked(json.loads(raw, parse_constant=_reject_constant))
    except (ValueError, RecursionError):
        pass
    if raw[:1] in ("{", "[", "'", '"'):
        _charge(budget, raw, source, offset, offset + len(raw))
    if raw[:1] not in ("`",):
        try:
            return _checked(json5.loads(raw))
        except Exception:  # noqa: BLE001 - json5 raises several types; try the next reading
            pass
    number = _arithmetic(raw)
    if number is not None:
        return number
    if raw[:1] in ("[", "{"):
        try:
            return _checked(yaml.load(raw, Loader=_CoreLoader))  # noqa: S506 - a SafeLoader subclass
        except (yaml.YAMLError, ValueError, RecursionError):
            pass
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in _QUOTES:
        return raw[1:-1]
    return raw


def _checked(value: Any) -> Any:
    """Only JSON data (finite numbers, string keys) is accepted from a reading.

    The node count is capped because YAML aliases can share one subtree many times over (a
    "billion laughs" value is small as text but huge once walked).
    """
    stack = [value]
    nodes = 0
    while stack:
        v = stack.pop()
        nodes += 1
        if nodes > MAX_STATE_NODES:
            raise ValueError("too many nodes")
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise ValueError("non-string key")
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError("non-finite number")
        elif not (v is None or isinstance(v, (str, int, bool))):
            raise ValueError("not JSON")
    return normalise(value)


_ARITH_TOKEN = re.compile(r"\s*(?:((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)|([-+*/()]))")


def _arithmetic(raw: str) -> int | float | None:
    """``+ - * /`` and parentheses on decimal numbers; ``None`` when the text is anything else."""
    tokens: list[str | float] = []
    pos = 0
    raw = raw.strip()
    if len(raw) > MAX_LOOSE_VALUE_CHARS:
        return None
    while pos < len(raw):
        m = _ARITH_TOKEN.match(raw, pos)
        if m is None or m.end() == pos:
            return None
        tokens.append(float(m.group(1)) if m.group(1) is not None else m.group(2))
        pos = m.end()
    if not tokens or not any(isinstance(t, str) for t in tokens):
        return None
    try:
        value, at = _expr(tokens, 0, 0)
    except (_NotArithmetic, ZeroDivisionError, OverflowError):
        return None
    if at != len(tokens) or not math.isfinite(value):
        return None
    return norm_number(value)


class _NotArithmetic(Exception):
    pass


def _expr(tokens: list[str | float], i: int, depth: int) -> tuple[float, int]:
    value, i = _term(tokens, i, depth)
    while i < len(tokens) and tokens[i] in ("+", "-"):
        op = tokens[i]
        rhs, i = _term(tokens, i + 1, depth)
        value = value + rhs if op == "+" else value - rhs
    return value, i


def _term(tokens: list[str | float], i: int, depth: int) -> tuple[float, int]:
    value, i = _unary(tokens, i, depth)
    while i < len(tokens) and tokens[i] in ("*", "/"):
        op = tokens[i]
        rhs, i = _unary(tokens, i + 1, depth)
        value = value * rhs if op == "*" else value / rhs
    return value, i


def _unary(tokens: list[str | float], i: int, depth: int) -> tuple[float, int]:
    if depth > MAX_STATE_DEPTH or i >= len(tokens):
        raise _NotArithmetic
    tok = tokens[i]
    if tok in ("+", "-"):
        value, i = _unary(tokens, i + 1, depth + 1)
        return (-value if tok == "-" else value), i
    if tok == "(":
        value, i = _expr(tokens, i + 1, depth + 1)
        if i >= len(tokens) or tokens[i] != ")":
            raise _NotArithmetic
        return value, i + 1
    if isinstance(tok, float):
        return tok, i + 1
    raise _NotArithmetic

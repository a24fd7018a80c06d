"""MVU (MagVarUpdate) reply updates: apply the update commands a model wrote to a ``stat_data`` tree.

A card that uses MVU asks the model to end each reply with commands such as
``_.set('理.好感度', 66, 74);//reason`` or a ``<JSONPatch>[...]</JSONPatch>`` block (dsh-assembler
11.2). :func:`apply_mvu_reply` finds them anywhere in the reply, runs them in text order on a deep
copy of the state, and reports what changed the way MVU's ``display_data``/``delta_data`` show it
(``"<old>-><new> (<reason>)"``).

Two jobs, two modules: :mod:`.mvu_commands` reads the reply into commands (as data only: the
reply is model output, so nothing is ever executed) and holds the limits; this module applies
them with MVU's semantics (paths, ``$meta``, display strings).

Failure model: a command that does not fit the state (missing path, refused by ``$meta``, wrong
argument count or type) is skipped with a per-command :class:`Diagnostic`; text that cannot be read as
commands at all, and every size limit, raise :class:`TemplateError` with a stable code and the
line:col in the reply. The caller's ``stat_data`` is never modified, whatever happens.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..assets.mvu import is_value_with_description
from ..errors import Diagnostic, TemplateError
from ..spans import Span
from .mvu_commands import (
    MAX_PATH_CHARS,
    MAX_PATH_PARTS,
    MAX_REPLY_BYTES,
    MAX_STATE_BYTES,
    MAX_STATE_DEPTH,
    MAX_STATE_NODES,
    Command,
    limit_error,
    norm_number,
    normalise,
    read_commands,
)

__all__ = ["MvuUpdate", "apply_mvu_reply"]

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class MvuUpdate:
    """The outcome of one reply: the new state, MVU's two display forms, and what was skipped.

    ``display_data`` mirrors ``stat_data`` with every changed path replaced by its
    ``"<old>-><new> (<reason>)"`` string; ``delta_data`` holds only those strings (array indices
    become string keys). ``commands`` counts the commands that were applied; ``changes`` lists the
    changed paths (as key/index tuples) with their strings, in the order they first changed.
    """

    stat_data: dict[str, Any]
    display_data: dict[str, Any]
    delta_data: dict[str, Any]
    diagnostics: tuple[Diagnostic, ...] = ()
    commands: int = 0
    changes: tuple[tuple[Path, str], ...] = field(default=(), repr=False)


# ---------------------------------------------------------------------------------------------
# public entry point


def apply_mvu_reply(stat_data: Mapping[str, Any], reply_text: str) -> MvuUpdate:
    """Apply every MVU update command in ``reply_text`` to a copy of ``stat_data``.

    Raises :class:`TemplateError` (``MVU_REPLY_LIMIT``, ``MVU_COMMAND_LIMIT``, ``MVU_PATH_LIMIT``,
    ``MVU_STATE_LIMIT``, ``MVU_COMMAND_SYNTAX``, ``INPUT_INVALID``) for input it will not read;
    commands that do not fit the state are skipped and reported in ``diagnostics``.
    """
    if not isinstance(reply_text, str):
        raise TemplateError("the reply must be a string", code="INPUT_INVALID")
    if not isinstance(stat_data, Mapping):
        raise TemplateError("stat_data must be an object", code="INPUT_INVALID")
    if len(reply_text) > MAX_REPLY_BYTES or len(reply_text.encode("utf-8", "surrogatepass")) > MAX_REPLY_BYTES:
        raise TemplateError(f"the reply is larger than {MAX_REPLY_BYTES} bytes", code="MVU_REPLY_LIMIT")
    _check_state(stat_data, "the input state")
    state: dict[str, Any] = json.loads(_dumps(stat_data))
    commands = read_commands(reply_text)
    run = _Runner(state, reply_text)
    for cmd in commands:
        run.apply(cmd)
    _check_state(state, "the updated state")
    display, delta = run.render()
    return MvuUpdate(state, display, delta, tuple(run.diagnostics), run.applied, tuple(run.display_strings()))


# ---------------------------------------------------------------------------------------------
# state checks and JSON helpers


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _check_state(root: Any, what: str) -> None:
    """Walk iteratively (no recursion, so cycles and deep trees stop at the depth limit)."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_STATE_NODES:
            raise TemplateError(f"{what} has more than {MAX_STATE_NODES} nodes", code="MVU_STATE_LIMIT")
        if isinstance(value, Mapping):
            if depth > MAX_STATE_DEPTH:
                raise TemplateError(f"{what} is nested deeper than {MAX_STATE_DEPTH}", code="MVU_STATE_LIMIT")
            for k, v in value.items():
                if not isinstance(k, str):
                    raise TemplateError(f"{what} has a non-string key {k!r}", code="INPUT_INVALID")
                stack.append((v, depth + 1))
        elif isinstance(value, (list, tuple)):
            if depth > MAX_STATE_DEPTH:
                raise TemplateError(f"{what} is nested deeper than {MAX_STATE_DEPTH}", code="MVU_STATE_LIMIT")
            stack.extend((v, depth + 1) for v in value)
        elif value is None or isinstance(value, (str, bool, int)):
            continue
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise TemplateError(f"{what} holds a non-finite number", code="INPUT_INVALID")
        else:
            raise TemplateError(f"{what} holds a {type(value).__name__}, which is not JSON", code="INPUT_INVALID")
    size = len(_dumps(root).encode("utf-8", "surrogatepass"))
    if size > MAX_STATE_BYTES:
        raise TemplateError(f"{what} is {size} bytes serialised, over {MAX_STATE_BYTES}", code="MVU_STATE_LIMIT")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any) -> str:
    """``JSON.stringify`` with the outer quotes of a string stripped (MVU's display form)."""
    if value is _ABSENT:
        return "undefined"
    text = _dumps(normalise(value))
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1]
    return text


def _same(a: Any, b: Any) -> bool:
    """Deep equality without Python's ``True == 1`` (JSON keeps booleans and numbers apart)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()


# ---------------------------------------------------------------------------------------------
# paths

_PATH_TOKEN = re.compile(r"""\[\s*(\d+)\s*\]|\[\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\]|([^.\[\]]+)""")


def _check_path_size(text: str, parts: int, cmd: Command, source: str) -> None:
    if len(text) > MAX_PATH_CHARS or parts > MAX_PATH_PARTS:
        raise limit_error(
            "MVU_PATH_LIMIT",
            f"a path is limited to {MAX_PATH_CHARS} characters and {MAX_PATH_PARTS} parts",
            source,
            cmd.start,
            cmd.end,
        )


def _lodash_path(text: str, root: Mapping[str, Any]) -> Path | None:
    """``a.b[0]['c.d']`` as parts; the whole text wins when it is itself a root key (as lodash does)."""
    if text in root:
        return (text,)
    parts: list[str | int] = []
    pos = 0
    for m in _PATH_TOKEN.finditer(text):
        gap = text[pos:m.start()]
        if gap not in ("", ".") or (gap == "." and not parts):
            return None
        pos = m.end()
        index, single, double, name = m.groups()
        if index is not None:
            parts.append(int(index))
        elif single is not None or double is not None:
            parts.append(re.sub(r"\\(.)", r"\1", single if single is not None else double))
        else:
            parts.append(name)
    if pos != len(text) or not parts:
        return None
    return tuple(parts)


def _pointer(text: str) -> Path | None:
    """An RFC 6901 JSON pointer (``/a/0/b~1c``); a missing leading slash is tolerated."""
    if not isinstance(text, str) or text in ("", "/"):
        return None if text != "/" else ("",)
    body = text[1:] if text.startswith("/") else text
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in body.split("/"))


def _path_text(path: Path) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.fullmatch(r"[^.\[\]'\"]+", p):
            out += ("." if out else "") + p
        else:
            out += "[" + json.dumps(p, ensure_ascii=False) + "]"
    return out


# ---------------------------------------------------------------------------------------------
# applying


class _Skip(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _index(container: list[Any], key: str | int, *, allow_end: bool = False) -> int | None:
    if isinstance(key, int):
        i = key
    elif isinstance(key, str) and key.isdigit() and key.isascii():
        i = int(key)
    else:
        return None
    limit = len(container) + (1 if allow_end else 0)
    return i if 0 <= i < limit else None


def _child(container: Any, key: str | int) -> Any:
    if isinstance(container, list):
        i = _index(container, key)
        return _ABSENT if i is None else container[i]
    if isinstance(container, dict):
        return container.get(str(key), _ABSENT)
    return _ABSENT


def _get(root: Any, path: Path) -> Any:
    cur = root
    for part in path:
        cur = _child(cur, part)
        if cur is _ABSENT:
            return _ABSENT
    return cur


def _resolved(root: Any, path: Path) -> Path:
    """The path with list indices as ints and object keys as strings (how changes are recorded)."""
    out: list[str | int] = []
    cur = root
    for part in path:
        if isinstance(cur, list):
            i = _index(cur, part, allow_end=True)
            out.append(i if i is not None else str(part))
        else:
            out.append(str(part))
        cur = _child(cur, part)
    return tuple(out)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("$meta")
    return meta if isinstance(meta, dict) else {}


def _array_locked(arr: list[Any]) -> bool:
    """An array holding ``{$arrayMeta: true, $meta: {extensible: false}}`` takes no new or removed items."""
    for item in arr:
        if isinstance(item, dict) and item.get("$arrayMeta") is True:
            meta = item.get("$meta")
            return isinstance(meta, dict) and meta.get("extensible") is False
    return False


def _may_add_key(obj: dict[str, Any], key: str) -> None:
    if key not in obj and _meta(obj).get("extensible") is False:
        raise _Skip("MVU_SCHEMA", f"the object does not accept new keys ($meta.extensible is false): {key!r}")


def _may_remove_key(obj: dict[str, Any], key: str) -> None:
    required = _meta(obj).get("required")
    if isinstance(required, list) and key in required:
        raise _Skip("MVU_SCHEMA", f"{key!r} is required by $meta.required and cannot be removed")


def _copy(value: Any) -> Any:
    return json.loads(_dumps(value))


class _Runner:
    """Applies commands to the working copy and remembers the first old and the last new value per path."""

    def __init__(self, state: dict[str, Any], source: str) -> None:
        self.state = state
        self.source = source
        self.strict_set = _meta(state).get("strictSet") is True
        self.diagnostics: list[Diagnostic] = []
        self.applied = 0
        self.changes: dict[Path, list[Any]] = {}  # path -> [first old value, latest reason]
        self.locks: dict[int, tuple[list[Any], bool]] = {}

    # -- bookkeeping ---------------------------------------------------------------------------
    def may_change_items(self, arr: list[Any]) -> None:
        """Refuse to add or remove items of a locked array; the scan is cached per array.

        Without the cache 1,000 appends to a 100,000-item array would scan it 1,000 times. A cached
        answer is dropped when a write could have added an ``$arrayMeta`` item (see ``written``).
        """
        cached = self.locks.get(id(arr))
        if cached is None or cached[0] is not arr:
            cached = self.locks[id(arr)] = (arr, _array_locked(arr))
        if cached[1]:
            raise _Skip("MVU_SCHEMA", "the array is not extensible ($arrayMeta): items cannot be added or removed")

    def written(self, value: Any) -> Any:
        """Note a value about to be stored; returns it."""
        if isinstance(value, dict) and "$arrayMeta" in value:
            self.locks.clear()
        return value

    def record(self, path: Path, old: Any, reason: str, *, pair: bool = False) -> None:
        """Keep the first old value of a path (copied: the tree changes later) and the latest reason.

        Called before the change is made. ``pair`` marks a change to a ValueWithDescription's value,
        shown as that value rather than as the two-item array.
        """
        entry = self.changes.get(path)
        if entry is None:
            self.changes[path] = [old if old is _ABSENT else _copy(old), reason, pair]
        elif reason:
            entry[1] = reason

    def display_strings(self) -> list[tuple[Path, str]]:
        """``"<first old>-><final value> (<latest reason>)"`` for every changed path."""
        out = []
        for path, (old, reason, pair) in self.changes.items():
            new = _get(self.state, path)
            if pair and is_value_with_description(new):
                new = new[0]
            text = f"{_show(old)}->{_show(new)}"
            out.append((path, f"{text} ({reason})" if reason else text))
        return out

    def render(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Shallow changes are written first and win: a string cannot hold a deeper change."""
        display: dict[str, Any] = _copy(self.state)
        delta: dict[str, Any] = {}
        for path, text in sorted(self.display_strings(), key=lambda item: len(item[0])):
            _place(display, path, text, mirror=True)
            _place(delta, path, text, mirror=False)
        return display, delta

    # -- dispatch ------------------------------------------------------------------------------
    def apply(self, cmd: Command) -> None:
        try:
            if cmd.name == "patch":
                self.patch(cmd)
            else:
                path = self.path_of(cmd)
                getattr(self, "do_" + cmd.name)(path, list(cmd.args), cmd.reason)
        except _Skip as skip:
            self.diagnostics.append(
                Diagnostic(
                    skip.code,
                    skip.message,
                    span=Span(cmd.start, cmd.end),
                    severity="warning",
                    path=cmd.path_texts[0] if cmd.path_texts else None,
                    data={"command": cmd.name},
                )
            )
            return
        self.applied += 1

    def path_of(self, cmd: Command) -> Path:
        text = cmd.path_texts[0]
        if len(text) > MAX_PATH_CHARS:
            _check_path_size(text, 0, cmd, self.source)
        path = _lodash_path(text, self.state)
        if path is None:
            raise _Skip("MVU_PATH_MISSING", f"cannot read the path {text!r}")
        _check_path_size(text, len(path), cmd, self.source)
        return path

    # -- commands ------------------------------------------------------------------------------
    def do_set(self, path: Path, args: list[Any], reason: str) -> None:
        if len(args) not in (1, 2):
            raise _Skip("MVU_COMMAND_INVALID", f"_.set takes a path and 1 or 2 values, got {len(args)}")
        self.set(path, args[-1], reason)

    def set(self, path: Path, new: Any, reason: str) -> None:
        old = _get(self.state, path)
        if old is _ABSENT or not path:
            raise _Skip("MVU_PATH_MISSING", f"_.set needs an existing path; {_path_text(path)!r} does not exist")
        parent = _get(self.state, path[:-1])
        if not isinstance(parent, (dict, list)):
            raise _Skip("MVU_PATH_MISSING", f"{_path_text(path)!r} has no parent object")
        where = _resolved(self.state, path)
        if is_value_with_description(old) and not self.strict_set and not is_value_with_description(new):
            self.record(where, old[0], reason, pair=True)
            self.locks.clear()
            old[0] = _coerce(old[0], new)
        else:
            self.record(where, old, reason)
            self.locks.clear()
            _put(parent, path[-1], _coerce(old, new))

    def do_add(self, path: Path, args: list[Any], reason: str) -> None:
        if len(args) != 1:
            raise _Skip("MVU_COMMAND_INVALID", f"_.add takes exactly a path and a delta, got {len(args) + 1} arguments")
        self.add(path, args[0], reason)

    def add(self, path: Path, delta: Any, reason: str) -> None:
        old = _get(self.state, path)
        if old is _ABSENT or not path:
            raise _Skip("MVU_PATH_MISSING", f"_.add needs an existing path; {_path_text(path)!r} does not exist")
        pair = is_value_with_description(old)
        current = old[0] if pair else old
        delta = _coerce(0, delta)
        if not _is_number(current) or not _is_number(delta):
            raise _Skip("MVU_SCHEMA", f"_.add needs a number at the path and a numeric delta, got {_show(current)!r} and {_show(delta)!r}")
        total = float(current) + float(delta)
        if not math.isfinite(total):
            raise _Skip("MVU_SCHEMA", "_.add would leave a non-finite number")
        new = norm_number(float(f"{total:.12g}"))
        self.record(_resolved(self.state, path), current, reason, pair=pair)
        if pair:
            old[0] = new
        else:
            _put(_get(self.state, path[:-1]), path[-1], new)

    def do_insert(self, path: Path, args: list[Any], reason: str) -> None:
        if len(args) == 1:
            self.merge(path, args[0], reason)
        elif len(args) == 2:
            self.insert_at(path, args[0], args[1], reason, create=True)
        else:
            raise _Skip("MVU_COMMAND_INVALID", f"_.insert/_.assign take a path and 1 or 2 values, got {len(args)}")

    def merge(self, path: Path, value: Any, reason: str) -> None:
        target = _get(self.state, path)
        if target is _ABSENT:
            parent = _get(self.state, path[:-1]) if path else _ABSENT
            if not isinstance(parent, (dict, list)):
                raise _Skip("MVU_PATH_MISSING", f"neither {_path_text(path)!r} nor its parent exists")
            self.insert_at(path[:-1], path[-1], value, reason, create=False)
            return
        if isinstance(target, list):
            self.may_change_items(target)
            self.record(_resolved(self.state, path), target, reason)
            target.append(self.written(_copy(value)))
        elif isinstance(target, dict) and isinstance(value, dict):
            merged = _copy(target)
            _deep_merge(merged, value)
            self.record(_resolved(self.state, path), target, reason)
            self.locks.clear()
            _put(_get(self.state, path[:-1]), path[-1], merged)
        else:
            raise _Skip("MVU_SCHEMA", f"cannot insert {_show(value)!r} into {_show(target)!r}: not an array, or not object into object")

    def insert_at(self, path: Path, key: Any, value: Any, reason: str, *, create: bool) -> None:
        target = _get(self.state, path) if path else self.state
        if target is _ABSENT:
            parent = _get(self.state, path[:-1]) if path else _ABSENT
            if not create or not isinstance(parent, (dict, list)):
                raise _Skip("MVU_PATH_MISSING", f"{_path_text(path)!r} does not exist")
            if isinstance(parent, dict):
                _may_add_key(parent, str(path[-1]))
            if isinstance(key, (dict, list)) or key is None or isinstance(key, bool):
                raise _Skip("MVU_COMMAND_INVALID", "the key of a 3-argument insert must be a string or an index")
            new_obj = {str(key): _copy(value)}
            if isinstance(parent, list):
                raise _Skip("MVU_PATH_MISSING", f"{_path_text(path)!r} does not exist")
            self.record(_resolved(self.state, path), _ABSENT, reason)
            self.locks.clear()
            parent[str(path[-1])] = new_obj
            return
        if isinstance(target, list):
            self.may_change_items(target)
            if key == "-":
                index = len(target)
            else:
                index_opt = None if isinstance(key, (bool, float)) else _index(target, key, allow_end=True)
                if index_opt is None:
                    raise _Skip("MVU_SCHEMA", f"cannot insert at {_show(key)!r}: not an index within 0..{len(target)}")
                index = index_opt
            self.record(_resolved(self.state, path), target, reason)
            target.insert(index, self.written(_copy(value)))
        elif isinstance(target, dict):
            if isinstance(key, (dict, list)) or key is None or isinstance(key, bool):
                raise _Skip("MVU_COMMAND_INVALID", "the key of a 3-argument insert must be a string or an index")
            skey = _show(key) if not isinstance(key, str) else key
            _may_add_key(target, skey)
            self.record(_resolved(self.state, path) + (skey,), target.get(skey, _ABSENT), reason)
            self.locks.clear()
            target[skey] = _copy(value)
        else:
            raise _Skip("MVU_SCHEMA", f"cannot insert into {_show(target)!r}: not an array or an object")

    def do_delete(self, path: Path, args: list[Any], reason: str) -> None:
        if len(args) == 0:
            self.delete(path, reason)
        elif len(args) == 1:
            self.delete_in(path, args[0], reason)
        else:
            raise _Skip("MVU_COMMAND_INVALID", f"_.remove takes a path and at most one key, got {len(args)}")

    def delete(self, path: Path, reason: str) -> None:
        if not path or _get(self.state, path) is _ABSENT:
            raise _Skip("MVU_PATH_MISSING", f"{_path_text(path)!r} does not exist")
        parent_path = path[:-1]
        parent = _get(self.state, parent_path) if parent_path else self.state
        if isinstance(parent, list):
            self.delete_in(parent_path, _index(parent, path[-1]), reason, by_index_only=True)
        else:
            self.delete_in(parent_path, str(path[-1]), reason)

    def delete_in(self, path: Path, key: Any, reason: str, *, by_index_only: bool = False) -> None:
        target = _get(self.state, path) if path else self.state
        if isinstance(target, list):
            self.may_change_items(target)
            index = _index(target, key) if (isinstance(key, int) and not isinstance(key, bool)) or (
                isinstance(key, str) and by_index_only) else None
            if index is None and not by_index_only:
                index = next((i for i, item in enumerate(target) if _same(item, key)), None)
            if index is None:
                raise _Skip("MVU_PATH_MISSING", f"{_show(key)!r} is neither an index nor an item of {_path_text(path)!r}")
            self.record(_resolved(self.state, path), target, reason)
            del target[index]
        elif isinstance(target, dict):
            if not isinstance(key, str) or key not in target:
                raise _Skip("MVU_PATH_MISSING", f"{_path_text(path + (str(_show(key)),))!r} does not exist")
            _may_remove_key(target, key)
            self.record(_resolved(self.state, path) + (key,), target[key], reason)
            self.locks.clear()
            del target[key]
        else:
            raise _Skip("MVU_PATH_MISSING", f"{_path_text(path)!r} is not an array or an object")

    # -- JSON Patch ----------------------------------------------------------------------------
    def patch(self, cmd: Command) -> None:
        op = cmd.args[0]
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise _Skip("MVU_COMMAND_INVALID", "a JSON Patch operation must be JSON data: an object with an 'op'")
        kind = op["op"].lower()
        raw_path = op.get("path", op.get("to") if kind == "move" else None)
        if not isinstance(raw_path, str):
            raise _Skip("MVU_COMMAND_INVALID", f"the {kind!r} operation has no string 'path'")
        path = self.pointer(raw_path, cmd)
        if kind not in ("remove", "move") and "value" not in op:
            raise _Skip("MVU_COMMAND_INVALID", f"the {kind!r} operation has no JSON 'value'")
        if kind == "replace":
            self.set(path, op["value"], "")
        elif kind == "delta":
            self.add(path, op["value"], "")
        elif kind in ("add", "insert"):
            if not path:
                raise _Skip("MVU_COMMAND_INVALID", "cannot add at the root")
            self.insert_at(path[:-1], path[-1], op["value"], "", create=False)
        elif kind == "remove":
            self.delete(path, "")
        elif kind == "move":
            source = op.get("from")
            if not isinstance(source, str):
                raise _Skip("MVU_COMMAND_INVALID", "a 'move' operation needs a string 'from'")
            self.move(self.pointer(source, cmd), path)
        else:
            raise _Skip("MVU_COMMAND_INVALID", f"unsupported JSON Patch operation {kind!r}")

    def pointer(self, text: str, cmd: Command) -> Path:
        if len(text) > MAX_PATH_CHARS:
            _check_path_size(text, 0, cmd, self.source)
        path = _pointer(text)
        if path is None:
            raise _Skip("MVU_PATH_MISSING", "a JSON Patch path must name a value below the root")
        _check_path_size(text, len(path), cmd, self.source)
        return path

    def move(self, source: Path, dest: Path) -> None:
        value = _get(self.state, source)
        if value is _ABSENT or not source:
            raise _Skip("MVU_PATH_MISSING", f"the move source {_path_text(source)!r} does not exist")
        if not dest or dest[: len(source)] == source:
            raise _Skip("MVU_COMMAND_INVALID", "cannot move a value into itself or to the root")
        dest_parent = _get(self.state, dest[:-1]) if len(dest) > 1 else self.state
        if not isinstance(dest_parent, (dict, list)):
            raise _Skip("MVU_PATH_MISSING", f"the move destination's parent {_path_text(dest[:-1])!r} does not exist")
        # check both ends before touching anything, so a refused move changes nothing
        source_parent = _get(self.state, source[:-1])
        if isinstance(source_parent, list):
            self.may_change_items(source_parent)
        elif isinstance(source_parent, dict):
            _may_remove_key(source_parent, str(source[-1]))
        key = dest[-1]
        if isinstance(dest_parent, dict):
            if not (dest_parent is source_parent and str(key) == str(source[-1])):
                _may_add_key(dest_parent, str(key))
        else:
            self.may_change_items(dest_parent)
            size = len(dest_parent) - (1 if dest_parent is source_parent else 0)
            if key != "-" and _index(dest_parent, key, allow_end=True) is None or (key != "-" and int(key) > size):
                raise _Skip("MVU_SCHEMA", f"cannot move to index {key!r}: not within 0..{size}")
        self.delete(source, "")
        self.insert_at(dest[:-1], key, value, "", create=False)


def _coerce(old: Any, new: Any) -> Any:
    """A numeric old value turns a numeric string into a number (MVU's set/add coercion)."""
    if _is_number(old) and isinstance(new, str):
        text = new.strip()
        if re.fullmatch(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?", text):
            number = float(text)
            if math.isfinite(number):
                return norm_number(number)
    return new


def _put(parent: Any, key: str | int, value: Any) -> None:
    if isinstance(parent, list):
        i = _index(parent, key)
        if i is None:
            raise _Skip("MVU_PATH_MISSING", f"index {key!r} is outside the array")
        parent[i] = value
    elif isinstance(parent, dict):
        parent[str(key)] = value
    else:
        raise _Skip("MVU_PATH_MISSING", "the parent is not an array or an object")


def _deep_merge(target: dict[str, Any], value: dict[str, Any]) -> None:
    for key, item in value.items():
        if isinstance(target.get(key), dict) and isinstance(item, dict):
            _deep_merge(target[key], item)
        else:
            _may_add_key(target, key)
            target[key] = _copy(item)


def _place(root: dict[str, Any], path: Path, text: str, *, mirror: bool) -> None:
    """Write ``text`` at ``path``: in the display mirror only where the parent still exists."""
    cur: Any = root
    for part in path[:-1]:
        if mirror:
            cur = _child(cur, part)
            if not isinstance(cur, (dict, list)):
                return
        else:
            nxt = cur.get(str(part))
            if nxt is None:
                nxt = cur[str(part)] = {}
            elif not isinstance(nxt, dict):
                return
            cur = nxt
    if not path:
        return
    last = path[-1]
    if isinstance(cur, list):
        i = _index(cur, last)
        if i is not None:
            cur[i] = text
    else:
        cur[str(last)] = text

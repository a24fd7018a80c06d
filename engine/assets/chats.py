"""Chats as users have them: SillyTavern's ``.jsonl`` export and tavernbox's documented JSON form.

The one chat reader of every command (``assemble``, ``activate``, ``cache-report``, ``lint``) and of
the service: :func:`read_chat_file` reads a file's bytes by the assets' encoding rule
(:func:`~tavernbox.assets.decoding.decode_bytes`: UTF-8, UTF-16 with its byte-order mark, the
Windows-1252 fallback with its ``ASSET_ENCODING`` warning, anything else a coded error), then
:func:`parse_chat_text` reads either form.

Both read into the same list of chat messages, oldest first::

    {"role": "user" | "assistant" | "system", "content": str, "name"?: str, "force_avatar"?: bool}

* **JSON form**: ``{"messages": [...]}`` or a bare list of such messages. ``role`` ``system`` is
  SillyTavern's narrator message (sent with the system role). ``name`` is the speaker (default:
  the user's name for user messages, the character's for assistant ones); ``force_avatar`` marks
  a message sent as another character (SillyTavern's ``/sendas``), which the default
  ``names_behavior`` prefixes with its speaker's name. ``id`` is optional: ids are assigned in
  order when missing. Unknown keys are refused, so a typo never silently drops a field. A list of
  SillyTavern's stored messages (``mes``, ``is_user``, ...; e.g. an export's lines saved as one
  JSON array, its metadata object first) is read as the export is.
* **SillyTavern export** (``.jsonl``): the first line is the chat's metadata (``user_name``,
  ``character_name``, ``chat_metadata``), every later line one message with ``name``,
  ``is_user``, ``is_system``, ``mes``, ``extra`` and ``swipes``. As SillyTavern builds a prompt,
  ``is_system`` messages (hidden from the prompt) are left out and ``extra.type == "narrator"``
  messages are sent as system; the shown swipe is ``mes`` itself.

Why a separate stage: the chat is the one input users export from SillyTavern rather than write by
hand, so reading it faithfully (hidden messages, narrators, forced avatars) is what makes the
assembled request match.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

from pathlib import Path

from ..collector import bulk_allocation
from ..errors import Diagnostic, TemplateError
from ..strict_json import loads
from .decoding import decode_bytes

__all__ = ["ChatMessage", "StChat", "parse_chat", "parse_chat_jsonl", "parse_chat_text", "read_chat_bytes",
           "read_chat_file", "scan_messages"]

_ROLES = ("user", "assistant", "system")
_MESSAGE_KEYS = {"id", "role", "content", "name", "force_avatar", "reasoning", "variables"}


class ChatMessage(NamedTuple):
    """One chat message as the prompt sees it (``role`` system is a narrator message).

    A named tuple (immutable, like the frozen dataclass it was) because a chat of thousands of
    messages is read into thousands of them: a tuple is built in C (:func:`parse_chat`'s fast
    path), a frozen dataclass pays a Python ``__init__`` per message.
    """

    role: str
    content: str
    name: str | None = None
    force_avatar: bool = False
    id: str | None = None
    #: the message's reasoning (SillyTavern's ``extra.reasoning``), added to the prompt as
    #: ``options.reasoning`` says
    reasoning: str = ""
    #: the message's variables (the current swipe's object: ``variables[swipe_id]`` of a stored message),
    #: where MVU keeps ``stat_data``; ``None`` when it has none
    variables: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.force_avatar:
            out["force_avatar"] = True
        if self.id is not None:
            out["id"] = self.id
        if self.reasoning:
            out["reasoning"] = self.reasoning
        if self.variables is not None:
            out["variables"] = self.variables
        return out


@dataclass(frozen=True, slots=True)
class StChat:
    """A chat: its messages plus what SillyTavern's export says about it."""

    messages: tuple[ChatMessage, ...]
    #: the chat lorebook's name (``chat_metadata.world_info`` in an export)
    lorebook: str | None = None
    #: names recorded by an export's metadata line (informational)
    user_name: str | None = None
    character_name: str | None = None
    hidden: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the chat's scenario and example-message overrides (``chat_metadata.scenario`` /
    #: ``mes_example``, the "scenario override" of a chat or group), which win over the card's
    scenario: str = ""
    mes_example: str = ""
    #: what reading the file went through (a Windows-1252 fallback, a byte-order mark), path ``$``
    diagnostics: tuple[Diagnostic, ...] = ()
    #: the trailing messages the user has just sent (the seeds' ``input_ids``), by id
    input_ids: tuple[str, ...] = ()
    #: the chat's variables (``chat_metadata.variables``): ``{{getvar}}``'s and the templates' local scope
    variables: dict[str, Any] | None = None
    #: per message, what ST-Prompt-Template's flags of an export say of its current swipe: ``(shown,
    #: initialized)`` (``is_ejs_processed``: its templates ran when it was shown; ``variables_initialized``: it
    #: took its copy of the variables before it); empty when no message has either
    template_flags: tuple[tuple[bool, bool], ...] = ()


def _bad(message: str, path: str) -> TemplateError:
    return TemplateError(message, code="REQUEST_INVALID", path=path)


def _message(raw: Any, path: str) -> ChatMessage:
    if not isinstance(raw, Mapping):
        raise _bad("a chat message must be an object {\"role\", \"content\"}", path)
    unknown = sorted(set(raw) - _MESSAGE_KEYS)
    if unknown:
        raise _bad(f"unknown chat message field {unknown[0]!r} (known: {', '.join(sorted(_MESSAGE_KEYS))})",
                   f"{path}.{unknown[0]}")
    role = raw.get("role")
    if role not in _ROLES:
        raise _bad(f"role must be one of {', '.join(_ROLES)}", f"{path}.role")
    content = raw.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise _bad("content must be a string", f"{path}.content")
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        raise _bad("name must be a string", f"{path}.name")
    force = raw.get("force_avatar", False)
    if not isinstance(force, bool):
        raise _bad("force_avatar must be true or false", f"{path}.force_avatar")
    mid = raw.get("id")
    if mid is not None and (not isinstance(mid, str) or not mid):
        raise _bad("id must be a non-empty string", f"{path}.id")
    reasoning = raw.get("reasoning", "")
    if reasoning is None:
        reasoning = ""
    if not isinstance(reasoning, str):
        raise _bad("reasoning must be a string", f"{path}.reasoning")
    variables = raw.get("variables")
    if variables is not None and not isinstance(variables, Mapping):
        raise _bad("variables must be an object (the message's variables, its current swipe's)", f"{path}.variables")
    return ChatMessage(role, content, name, force, mid, reasoning, variables)


_ROLE_SET = frozenset(_ROLES)
_NEW_MESSAGE = partial(tuple.__new__, ChatMessage)
_STR_OR_NONE = {str, type(None)}


def _checked_in_bulk(messages: list[Any]) -> tuple[ChatMessage, ...] | None:
    """The messages read field by field over the whole list at C speed, or ``None`` when any is
    not plainly valid (then :func:`_message` reads each in turn and names the first problem).

    Accepts exactly what :func:`_message` accepts for plain ``dict`` messages with ``str`` texts
    (anything else, a ``str`` subclass or another mapping included, takes the per-message path),
    and gives the same messages. A field no message has is not looked up at all.
    """
    n = len(messages)
    if not n:
        return ()
    if set(map(type, messages)) != {dict}:
        return None
    keys = set().union(*messages)
    if not _MESSAGE_KEYS.issuperset(keys) or "role" not in keys:
        return None

    def column(key: str, default: Any) -> Iterable[Any]:
        if key not in keys:
            return repeat(default, n)
        try:
            return list(map(itemgetter(key), messages))
        except KeyError:  # some messages leave it out
            return list(map(dict.get, messages, repeat(key, n), repeat(default, n)))

    roles = column("role", None)
    try:
        if not _ROLE_SET.issuperset(roles):
            return None
    except TypeError:  # an unhashable role
        return None
    contents, names, forces, ids = (column("content", ""), column("name", None), column("force_avatar", False),
                                    column("id", None))
    variables = column("variables", None)
    if "variables" in keys and not set(map(type, variables)) <= {dict, type(None)}:
        return None
    if "content" in keys:
        kinds = set(map(type, contents))
        if kinds != {str}:
            if not kinds <= _STR_OR_NONE:
                return None
            contents = ["" if c is None else c for c in contents]
    if "name" in keys and not set(map(type, names)) <= _STR_OR_NONE:
        return None
    if "force_avatar" in keys and set(map(type, forces)) != {bool}:
        return None
    if "id" in keys:
        id_kinds = set(map(type, ids))
        if not id_kinds <= _STR_OR_NONE or (str in id_kinds and "" in ids):
            return None
    reasonings = column("reasoning", "")
    if "reasoning" in keys and set(map(type, reasonings)) != {str}:
        return None  # None or another type: the per-message reader decides
    return tuple(map(_NEW_MESSAGE, zip(roles, contents, names, forces, ids, reasonings, variables)))


_CHAT_KEYS = ("messages", "lorebook", "scenario", "mes_example", "user_name", "character_name", "input_ids",
              "variables")


def parse_chat(data: Any, *, path: str = "$") -> StChat:
    """The JSON form: ``{"messages": [...], "lorebook"?: str, "scenario"?: str, "mes_example"?: str,
    "user_name"?: str, "character_name"?: str, "input_ids"?: [str]}`` or a bare list of messages.

    ``user_name`` and ``character_name`` are the names an export's metadata carries (used when the
    request gives none); ``input_ids`` (the seeds' chat form) name the trailing messages the user has
    just sent."""
    lorebook = None
    overrides = {"scenario": "", "mes_example": ""}
    names: dict[str, str | None] = {"user_name": None, "character_name": None}
    input_ids: Any = ()
    root = path
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - set(_CHAT_KEYS))
        if unknown:
            raise _bad(f"unknown chat field {unknown[0]!r} (known: {', '.join(_CHAT_KEYS)})", f"{path}.{unknown[0]}")
        lorebook = data.get("lorebook")
        if lorebook is not None and not isinstance(lorebook, str):
            raise _bad("lorebook must be a book name", f"{path}.lorebook")
        for key in overrides:
            value = data.get(key, "")
            if not isinstance(value, str):
                raise _bad(f"{key} must be a string", f"{path}.{key}")
            overrides[key] = value
        for key in names:
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise _bad(f"{key} must be a string", f"{path}.{key}")
            names[key] = value
        input_ids = data.get("input_ids", ())
        chat_variables = data.get("variables")
        if chat_variables is not None and not isinstance(chat_variables, Mapping):
            raise _bad("variables must be an object (the chat's variables)", f"{path}.variables")
        messages = data.get("messages")
        path = f"{path}.messages"
    else:
        messages = data
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise _bad("a chat is {\"messages\": [...]} or a list of messages", path)
    if _is_st_shaped(messages):
        chat = _parse_st_shaped(messages, path, lorebook, overrides)
    else:
        with bulk_allocation():  # one tuple per message, all kept: no collection walking them meanwhile
            read = _checked_in_bulk(messages) if type(messages) is list else None
            if read is None:
                read = tuple(_message(m, f"{path}[{i}]") for i, m in enumerate(messages))
        chat = StChat(read, lorebook=lorebook, **overrides)
    given = {k: v for k, v in names.items() if v is not None}
    if given or input_ids:
        chat = replace(chat, **given, input_ids=_trailing_input(chat.messages, input_ids, f"{root}.input_ids"))
    if isinstance(data, Mapping) and data.get("variables") is not None:
        chat = replace(chat, variables=dict(data["variables"]))
    return chat


def _trailing_input(messages: Sequence[ChatMessage], ids: Any, path: str) -> tuple[str, ...]:
    """The seeds' ``input_ids``, checked: each names one of the trailing user messages, which together
    are the last ``len(ids)`` messages (a message without an ``id`` is ``chat-N``, N its index)."""
    if not isinstance(ids, Sequence) or isinstance(ids, (str, bytes)):
        raise _bad("input_ids must be a list of message ids", path)
    n = len(messages)
    trailing = {(m.id if m.id is not None else f"chat-{i}"): i for i, m in enumerate(messages)
                if i >= n - len(ids)}
    seen: set[str] = set()
    for k, mid in enumerate(ids):
        if not isinstance(mid, str):
            raise _bad("a message id must be a string", f"{path}[{k}]")
        if mid not in trailing or mid in seen:
            what = "named twice" if mid in seen else "not one of the trailing messages the user has just sent " \
                f"(the last {len(ids)} of the chat)"
            raise _bad(f"input id {mid!r} is {what}", f"{path}[{k}]")
        if messages[trailing[mid]].role != "user":
            raise _bad(f"input id {mid!r} names a {messages[trailing[mid]].role} message; the input is what the user "
                       "has just sent", f"{path}[{k}]")
        seen.add(mid)
    return tuple(ids)


def parse_chat_jsonl(text: str) -> StChat:
    """SillyTavern's chat export: a metadata line, then one message per line."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise TemplateError("the chat export is empty", code="REQUEST_INVALID", line=1, column=1)
    rows = _lines_in_bulk(text, lines)
    if rows is None:
        rows = [(n, _strict_line(n, line)) for n, line in lines]
    head_line, head = rows[0]
    meta: dict[str, Any] = {}
    if isinstance(head, Mapping) and "mes" not in head and "role" not in head:
        meta = dict(head)
        rows = rows[1:]
    chat_meta = meta.get("chat_metadata") if isinstance(meta.get("chat_metadata"), Mapping) else {}
    lorebook = chat_meta.get("world_info") if isinstance(chat_meta.get("world_info"), str) else None
    if rows and _documented_lines(rows):
        # one documented message (``role``, ``content``) a line: read as ``{"messages": [...]}`` is
        read = [_documented_line(row, n) for n, row in rows]
    else:
        read = [_st_message(row, f"$[line {n}]", f"chat export line {n}", n) for n, row in rows]
    return _stored_chat(read, meta, lorebook,
                        {key: chat_meta[key] if isinstance(chat_meta.get(key), str) else ""
                         for key in ("scenario", "mes_example")}, [row for _n, row in rows])


def _documented_lines(rows: Sequence[tuple[int, Any]]) -> bool:
    """Whether the lines hold documented messages (``role``/``content``) rather than SillyTavern's stored ones
    (``mes``/``is_user``); a file that mixes the two is refused, naming the first line of the other form."""
    documented = [isinstance(row, Mapping) and "role" in row and "mes" not in row for _n, row in rows]
    if not any(documented):
        return False
    for (n, _row), is_documented in zip(rows, documented):
        if not is_documented:
            raise TemplateError(f"chat line {n} is not a message like the others ({{\"role\", \"content\"}}): a "
                                "chat file holds SillyTavern's stored messages or documented ones, not both",
                                code="REQUEST_INVALID", path=f"$[line {n}]", line=n, column=1)
    return True


def _documented_line(row: Any, line: int) -> ChatMessage:
    """One documented message of a ``.jsonl`` chat, its errors pointing at its line."""
    try:
        return _message(row, f"$[line {line}]")
    except TemplateError as exc:
        raise TemplateError(exc.message, code=exc.code, path=exc.path, line=line, column=1) from None


def _template_flags(read: Sequence[ChatMessage | None], rows: Sequence[Any]) -> tuple[tuple[bool, bool], ...]:
    """ST-Prompt-Template's ``is_ejs_processed`` and ``variables_initialized`` of each kept message's current
    swipe (:attr:`StChat.template_flags`); empty when no row has either."""
    if not any(isinstance(r, Mapping) and ("is_ejs_processed" in r or "variables_initialized" in r) for r in rows):
        return ()

    def flag(row: Mapping[str, Any], key: str) -> bool:
        value = row.get(key)
        swipe = row.get("swipe_id")
        index = swipe if isinstance(swipe, int) and not isinstance(swipe, bool) else 0
        if isinstance(value, Mapping):  # the extension's older form, keyed by swipe
            value = [value.get(str(index))] if str(index) in value else []
            index = 0
        return isinstance(value, list) and 0 <= index < len(value) and bool(value[index])

    return tuple((flag(r, "is_ejs_processed"), flag(r, "variables_initialized"))
                 for m, r in zip(read, rows, strict=True) if m is not None and isinstance(r, Mapping))


def _stored_chat(read: list[ChatMessage | None], meta: dict[str, Any], lorebook: str | None,
                 overrides: dict[str, str], rows: Sequence[Any] = ()) -> StChat:
    """The chat of SillyTavern's stored messages (``None``: a hidden one) and the export's metadata."""
    out = tuple(m for m in read if m is not None)
    chat_meta = meta.get("chat_metadata") if isinstance(meta.get("chat_metadata"), Mapping) else {}
    variables = chat_meta.get("variables")
    return StChat(out, lorebook=lorebook,
                  user_name=meta.get("user_name") if isinstance(meta.get("user_name"), str) else None,
                  character_name=meta.get("character_name") if isinstance(meta.get("character_name"), str) else None,
                  hidden=len(read) - len(out), metadata=meta, **overrides,
                  variables=dict(variables) if isinstance(variables, Mapping) else None,
                  template_flags=_template_flags(read, rows) if len(rows) == len(read) else ())


def _st_message(row: Any, where: str, what: str, line: int | None = None) -> ChatMessage | None:
    """One message as SillyTavern stores it (``name``, ``is_user``, ``is_system``, ``mes``, ``extra``),
    or ``None`` for a hidden one (``is_system``: SillyTavern's context never includes it). A
    narrator message (``extra.type == "narrator"``) is sent with the system role."""
    at = {"line": line, "column": 1} if line is not None else {}
    if not isinstance(row, Mapping):
        raise TemplateError(f"{what} is not a message object", code="REQUEST_INVALID", path=where, **at)
    mes = row.get("mes", "")
    if not isinstance(mes, str):
        raise TemplateError(f"{what}: mes must be a string", code="REQUEST_INVALID", path=f"{where}.mes", **at)
    if row.get("is_system") is True:
        return None
    extra = row.get("extra") if isinstance(row.get("extra"), Mapping) else {}
    if extra.get("type") == "narrator":
        role = "system"
    elif row.get("is_user") is True:
        role = "user"
    else:
        role = "assistant"
    name = row.get("name") if isinstance(row.get("name"), str) else None
    reasoning = extra.get("reasoning")
    return ChatMessage(role, mes, name, bool(row.get("force_avatar")), None,
                       reasoning if isinstance(reasoning, str) else "", _swipe_variables(row))


def _swipe_variables(row: Mapping[str, Any]) -> Any:
    """A stored message's variables: ``variables[swipe_id]`` (swipe 0 without an id), or ``None``."""
    variables = row.get("variables")
    if not isinstance(variables, list):
        return variables if isinstance(variables, Mapping) else None
    swipe = row.get("swipe_id")
    index = swipe if isinstance(swipe, int) and not isinstance(swipe, bool) else 0
    return variables[index] if 0 <= index < len(variables) else None


def _is_st_shaped(messages: Sequence[Any]) -> bool:
    """Whether a JSON chat holds SillyTavern's stored messages (``mes``, ``is_user``) rather than
    the documented ``role``/``content`` form: a user who saved SillyTavern's chat array as JSON (or
    turned an export's lines into one array) gets it read as the export is, not refused."""
    # the first two suffice (an export's metadata object may come first): a later stored message
    # among documented ones is refused by the documented reader as an unknown field, and a long
    # documented chat is not walked an extra time
    return any(isinstance(m, Mapping) and "role" not in m and ("mes" in m or "is_user" in m) for m in messages[:2])


def _parse_st_shaped(messages: Sequence[Any], path: str, lorebook: str | None,
                     overrides: dict[str, str]) -> StChat:
    """SillyTavern's stored messages in a JSON array; a leading object without ``mes`` is the
    export's metadata line (``user_name``, ``character_name``, ``chat_metadata``)."""
    rows = list(enumerate(messages))
    meta: dict[str, Any] = {}
    if rows and isinstance(rows[0][1], Mapping) and "mes" not in rows[0][1] and "is_user" not in rows[0][1]:
        meta = dict(rows[0][1])
        rows = rows[1:]
    chat_meta = meta.get("chat_metadata") if isinstance(meta.get("chat_metadata"), Mapping) else {}
    if lorebook is None and isinstance(chat_meta.get("world_info"), str):
        lorebook = chat_meta["world_info"]
    for key in overrides:
        if not overrides[key] and isinstance(chat_meta.get(key), str):
            overrides[key] = chat_meta[key]
    read: list[ChatMessage | None] = []
    for i, row in rows:
        if isinstance(row, Mapping) and ("role" in row or "content" in row):
            raise _bad("this chat mixes SillyTavern's stored messages (mes, is_user) with role/content ones; "
                       "use one form", f"{path}[{i}].{'role' if 'role' in row else 'content'}")
        read.append(_st_message(row, f"{path}[{i}]", f"chat message {i}"))
    return _stored_chat(read, meta, lorebook, overrides, [row for _i, row in rows])


class _NotPlain(ValueError):
    """A line the fast reader leaves to :func:`~tavernbox.strict_json.loads` (which words the refusal)."""


def _refuse_constant(token: str) -> Any:
    raise _NotPlain(token)


def _finite_float(token: str) -> float:
    value = float(token)
    if value in (float("inf"), float("-inf")):
        raise _NotPlain(token)
    return value


#: an escape that may spell a lone surrogate: such an export is read by the strict reader
_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")


def _strict_line(n: int, line: str) -> Any:
    """Line ``n`` read by the strict reader; a refusal names the line and column."""
    try:
        return loads(line, what=f"chat export line {n}", code="REQUEST_INVALID", base_path=f"$[line {n}]")
    except json.JSONDecodeError as exc:
        raise TemplateError(f"chat export line {n} is not JSON: {exc.msg}", code="REQUEST_INVALID",
                            line=n, column=exc.colno) from None
    except RecursionError:
        raise TemplateError(f"chat export line {n} is nested too deeply", code="REQUEST_INVALID",
                            line=n, column=1) from None


def _lines_in_bulk(text: str, lines: list[tuple[int, str]]) -> list[tuple[int, Any]] | None:
    """Each line's value as :func:`~tavernbox.strict_json.loads` gives it, through one reused
    decoder; ``None`` when any line is not plain JSON (a syntax error, ``NaN``, a number beyond a
    double, an escape that may be a lone surrogate, nesting too deep): the strict reader then reads
    every line and words the first refusal with its line and column."""
    if _SURROGATE_ESCAPE.search(text):
        return None
    # one decoder for the whole export (``json.loads`` with hooks builds one per call, most of the
    # cost of a 5,000-line export); what it leaves to the strict reader raises
    decode = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float).decode
    try:
        return [(n, decode(line)) for n, line in lines]
    except (ValueError, RecursionError):  # JSONDecodeError and _NotPlain are ValueErrors
        return None


def parse_chat_text(text: str, *, hint: str = "") -> StChat:
    """A chat file's text in either format: ``.jsonl`` by name, else by content.

    The cyclic garbage collector is paused meanwhile (:func:`bulk_allocation`): a chat of 100,000
    messages is as many dicts, all kept, which repeated collections would walk again and again."""
    with bulk_allocation():
        return _parse_chat_text(text, hint)


def _parse_chat_text(text: str, hint: str) -> StChat:
    stripped = text.lstrip()
    if hint.endswith(".jsonl") or (stripped.startswith("{") and "\n" in stripped.strip() and _looks_jsonl(stripped)):
        return parse_chat_jsonl(text)
    try:
        data = loads(text, what="the chat", code="REQUEST_INVALID")
    except json.JSONDecodeError as exc:
        raise TemplateError(f"the chat is not JSON: {exc.msg}", code="REQUEST_INVALID", line=exc.lineno,
                            column=exc.colno) from None
    except RecursionError:
        raise TemplateError("the chat is nested too deeply", code="REQUEST_INVALID") from None
    return parse_chat(data)


def _looks_jsonl(text: str) -> bool:
    first = text.split("\n", 1)[0].strip()
    try:
        json.loads(first)
    except json.JSONDecodeError:
        return False
    return True


def read_chat_bytes(data: bytes, *, hint: str = "") -> StChat:
    """A chat file's bytes in either form, decoded by the assets' rule (``hint``: the file's name)."""
    decoded = decode_bytes(data)
    chat = parse_chat_text(decoded.text, hint=hint)
    return replace(chat, diagnostics=decoded.diagnostics) if decoded.diagnostics else chat


def read_chat_file(path: str | Path, *, code: str = "REQUEST_INVALID", where: str | None = None) -> StChat:
    """The chat file at ``path`` (either form, any encoding :func:`read_chat_bytes` reads).

    A file that cannot be read is ``code`` (with the JSON path ``where`` when given); the reader's own
    errors keep their codes, their message naming the file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        at = f"{where}: " if where else ""
        raise TemplateError(f"{at}cannot read {str(path)!r}: {exc.strerror or exc}", code=code,
                            path=where) from None
    try:
        return read_chat_bytes(data, hint=path.name)
    except TemplateError as exc:  # the reader's path and position are in the file: the message names it
        exc.message = f"the chat {str(path)!r}: {exc.message}"
        if exc.code == "ASSET_ENCODING":
            exc.path = where
        raise


def scan_messages(chat: StChat, *, char: str | None = None) -> list[dict[str, Any]]:
    """The chat as world info scans it: each message named by its speaker (the export's ``user_name``
    and ``character_name``, or ``char``, when it has no name of its own), a narrator's as "System"
    (SillyTavern scans narrator messages; only hidden ones are left out)."""
    speakers = {"user": chat.user_name or "User", "assistant": char or chat.character_name or "Assistant",
                "system": "System"}
    return [{"role": "assistant" if m.role == "system" else m.role, "name": m.name or speakers[m.role],
             "content": m.content} for m in chat.messages]


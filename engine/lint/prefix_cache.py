"""The prompt-cache stability report: how much of a request stays byte-identical from one turn to the next.

Prompt caching (Anthropic cache breakpoints, OpenAI's automatic prefix caching) pays only for the
longest prefix two requests share byte for byte. The report assembles the request of the current
turn and of the next one (the same request with one more exchange in the chat, the same seed, the
clock moved on) with :func:`tavernbox.assemble_request`, and compares the two ``messages`` arrays
as they are serialised (compact JSON, UTF-8).

* **prefix** -- the longest common prefix in bytes (and an estimated token count), capped at the
  **ideal prefix**: everything before the first message the next turn adds.
* **breakers** -- the spans of the current request that keep the prefix short, found through the
  assembler's provenance (every span knows its rule, block, field and the macro or variable that made
  it): spans whose text changes, appears or disappears between the turns (a ``{{time}}``, world info
  activated by the new message, an Author's Note at an interval), in-chat insertions above the new
  messages (world info or prompts at a depth: they move down the chat every turn), and
  ``{{random}}``/``{{roll}}`` (SillyTavern draws them again every generation; here the pinned seed
  hides that). Each one costs the bytes from its position to the ideal prefix; they are ordered by
  that cost, with a suggestion. A difference no span explains is reported as ``unattributed``.

Tokens are counted with the request's tokenizer (``budget.tokenizer``: ``o200k`` by default, as
SillyTavern counts its default OpenAI models; ``cl100k``, ``estimate`` or a registered one) with
SillyTavern's per-message rule (:class:`tavernbox.tokenizers.MessageCounter`): whole messages inside
the prefix, plus the tokens of the part of the message where the prefix ends. A provider's own chat
template adds a few tokens per message; the figure is for comparing prefixes, not for billing.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..errors import TemplateError

__all__ = ["Breaker", "CacheReport", "TurnReport", "cache_report"]

#: the default time between two turns: a day, an hour and a minute, so every clock macro
#: ({{time}}, {{date}}, {{weekday}}, {{isotime}}...) shows a different value on the next turn
DEFAULT_GAP = timedelta(days=1, hours=1, minutes=1)
NEXT_REPLY = "(the model's reply to this turn)"
NEXT_USER = "(the user's next message)"
#: recorded-chat reports look at this many turns at most
MAX_TURNS = 100

_CLOCK = {"time", "date", "weekday", "isotime", "isodate", "datetimeformat", "timediff", "idle_duration",
          "idleduration"}
_RANDOM = {"random", "roll"}
_SUGGEST = {
    "clock": "move it below the cache breakpoint (an in-chat prompt at depth 0, after the chat), or drop it",
    "random": "pin the seed (options.seed), use {{pick}} (stable per chat), or move it below the breakpoint",
    "variable": "show the variable below the breakpoint (an in-chat prompt at depth 0) instead of above the chat",
    "world_info_depth": "use a sticky (or constant) entry placed before the chat (before/after the character) "
                        "instead of at a depth, or accept the miss",
    "world_info": "make the entry sticky (it stays in place between turns) or constant",
    "author_note": "use interval 1 (present every turn) and position before/after the main prompt (at a depth it "
                   "moves down the chat every turn)",
    "in_chat": "inject it at depth 0 (after the chat), or place it above the chat history",
    "other": "keep content above the breakpoint identical between turns",
}


@dataclass(frozen=True)
class Breaker:
    """One span that breaks the prefix, where it is and what it costs."""

    kind: str
    label: str
    change: str  # changed | appears | disappears | moves | redrawn | unattributed
    message_index: int
    byte_offset: int
    cost_bytes: int
    text: str
    suggestion: str
    source: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "change": self.change, "message_index": self.message_index,
                "byte_offset": self.byte_offset, "cost_bytes": self.cost_bytes, "text": self.text,
                "suggestion": self.suggestion, "source": self.source}


@dataclass
class TurnReport:
    """One pair of consecutive requests."""

    turn: int
    prefix_bytes: int
    prefix_tokens: int
    total_bytes: int
    total_tokens: int
    ideal_prefix_bytes: int
    seeded_prefix_bytes: int
    breakers: list[Breaker]
    #: the current request's bytes up to the end of its chat: what it can leave in the cache
    current_cacheable_bytes: int = 0
    tokenizer: str = "estimate"

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "prefix_bytes": self.prefix_bytes, "prefix_tokens": self.prefix_tokens,
                "total_bytes": self.total_bytes, "total_tokens": self.total_tokens,
                "ideal_prefix_bytes": self.ideal_prefix_bytes, "seeded_prefix_bytes": self.seeded_prefix_bytes,
                "current_cacheable_bytes": self.current_cacheable_bytes, "tokenizer": self.tokenizer,
                "breakers": [b.to_dict() for b in self.breakers]}


@dataclass
class CacheReport:
    """The turns compared, and the breakers over all of them (cost summed by span identity)."""

    turns: list[TurnReport]

    def summary(self) -> dict[str, Any]:
        total = sum(t.total_bytes for t in self.turns)
        cached = sum(t.prefix_bytes for t in self.turns)
        ideal = sum(t.ideal_prefix_bytes for t in self.turns)
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for t in self.turns:
            for b in t.breakers:
                row = merged.setdefault((b.kind, b.label), {"kind": b.kind, "label": b.label, "turns": 0,
                                                             "cost_bytes": 0, "suggestion": b.suggestion})
                row["turns"] += 1
                row["cost_bytes"] += b.cost_bytes
        return {"turns": len(self.turns), "total_bytes": total, "prefix_bytes": cached, "ideal_prefix_bytes": ideal,
                "cached_share": round(cached / total, 4) if total else 0.0,
                "breakers": sorted(merged.values(), key=lambda r: (-r["cost_bytes"], r["label"]))}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "turns": [t.to_dict() for t in self.turns]}


# ---- serialisation ------------------------------------------------------------------------------

def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class _Serialised:
    """``messages`` as compact JSON, with the byte offset of each message and of its content."""

    data: bytes
    starts: list[int]
    content_starts: list[int | None]
    messages: list[dict[str, Any]]
    _cumulative: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]]) -> _Serialised:
        parts = [b"["]
        size = 1
        starts: list[int] = []
        contents: list[int | None] = []
        for i, m in enumerate(messages):
            if i:
                parts.append(b",")
                size += 1
            text = _dumps(dict(m))
            starts.append(size)
            if isinstance(m.get("content"), str):
                head = text[: text.index('"content":') + len('"content":"')]
                contents.append(size + len(head.encode("utf-8", "surrogatepass")))
            else:
                contents.append(None)
            encoded = text.encode("utf-8", "surrogatepass")  # a lone surrogate from a chat file stays countable
            parts.append(encoded)
            size += len(encoded)
        parts.append(b"]")
        return cls(b"".join(parts), starts, contents, [dict(m) for m in messages])

    def offset(self, index: int, char: int) -> int:
        """The byte offset of character ``char`` of message ``index``'s content."""
        base = self.content_starts[index]
        if base is None:
            return self.starts[index]
        cumulative = self._cumulative.get(index)
        if cumulative is None:
            # bytes each character takes once escaped, added up once per message (a preset can
            # have thousands of spans in one message)
            sizes = [_escaped_size(ch) for ch in self.messages[index]["content"]]
            cumulative = self._cumulative[index] = [0, *itertools.accumulate(sizes)]
        return base + cumulative[min(char, len(cumulative) - 1)]


_ASCII_SIZES = [len(json.dumps(chr(i))) - 2 for i in range(128)]


def _escaped_size(ch: str) -> int:
    """Bytes one character takes in compact, non-ASCII-preserving JSON (UTF-8)."""
    code = ord(ch)
    if code < 128:
        return _ASCII_SIZES[code]
    if code < 0x800:
        return 2
    return 3 if code < 0x10000 else 4


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on equal prefixes: C-speed slice compares
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _tokens(ser: _Serialised, upto: int, counter: Any) -> int:
    """Tokens of the first ``upto`` bytes: whole messages by SillyTavern's rule, then the part of
    the content of the message where the bytes end (the estimate counts the JSON text instead)."""
    from ..tokenizers import _Estimate

    if isinstance(counter.tokenizer, _Estimate):
        return counter.text(ser.data[:upto].decode("utf-8", errors="ignore"))
    total = 0
    n = len(ser.messages)
    for i, m in enumerate(ser.messages):
        end = ser.starts[i + 1] - 1 if i + 1 < n else len(ser.data) - 1  # after the message's "}"
        if end <= upto:
            total += counter.message(m)
            continue
        base = ser.content_starts[i]
        if base is not None and upto > base:
            ser.offset(i, 0)  # builds the message's escape table
            cumulative = ser._cumulative[i]
            k = bisect.bisect_right(cumulative, upto - base) - 1
            total += counter.text(m["content"][:k])
        break
    return total


# ---- spans --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Span:
    key: tuple[Any, ...]
    message: int  # index in the final messages
    start: int  # character offsets in that message's content
    end: int
    text: str
    meta: Mapping[str, Any]
    depth: int | None
    block_name: str = ""


def _spans(assembly: Any) -> list[_Span]:
    """Every provenance span of an assembly, placed in its sent messages.

    The assembly's own provenance of the sent messages (``provenance_source``: text and character
    ranges per message) is used as it is; where it describes the messages before post-processing
    (``provenance_of``), each logical message is found in the sent ones by an in-order search.
    """
    result = assembly.result
    nodes: dict[str, Mapping[str, Any]] = {}
    for n in result.to_dict().get("nodes") or []:
        nodes.setdefault(str(n.get("block_id")), n)
    source = list(getattr(assembly, "provenance_source", None) or [])
    final = assembly.messages
    placed: dict[int, tuple[int, int]] = {}
    if getattr(assembly, "provenance_of", "messages") == "messages" and len(source) == len(final):
        placed = {i: (i, 0) for i in range(len(source))}
    else:
        fi, off = 0, 0
        for li, (_, text, _) in enumerate(source):
            if not text:
                continue
            j, o = fi, off
            while j < len(final):
                target = final[j].get("content")
                at = target.find(text, o) if isinstance(target, str) else -1
                if at >= 0:
                    placed[li] = (j, at)
                    fi, off = j, at + len(text)
                    break
                j, o = j + 1, 0
    out: list[_Span] = []
    counts: dict[tuple[Any, ...], int] = {}
    for li, (_, text, spans) in enumerate(source):
        if li not in placed:
            continue
        fj, foff = placed[li]
        for start, end, meta in spans:
            ident = tuple(meta.get(k) for k in _IDENTITY)
            counts[ident] = counts.get(ident, 0) + 1
            node = nodes.get(str(meta.get("block_id"))) or {}
            depth = node.get("depth") if isinstance(node.get("depth"), int) else None
            out.append(_Span((*ident, counts[ident]), fj, foff + start, foff + end, text[start:end], dict(meta), depth,
                             str(node.get("name") or "")))
    return out


#: what tells two spans apart: the rule, block and field that placed the text, the macro or variable
#: that printed it, the world-info entry it came from, the chat message it is
_IDENTITY = ("rule_id", "source_id", "block_id", "resource_id", "field", "kind", "macro", "name", "book", "uid",
             "native_message_id")


def _classify(span: _Span, change: str) -> tuple[str, str]:
    meta = span.meta
    macro = str(meta.get("macro") or "")
    fld = str(meta.get("field") or "")
    source = str(meta.get("source_id") or "")
    where = fld or str(meta.get("block_id") or source)
    if change == "moves":
        macro = ""  # the whole block moves: what a macro inside it printed does not matter
    elif meta.get("kind") == "macro_output" and macro.lower() in _CLOCK:
        return "clock", f"{{{{{macro}}}}} in {where}"
    if macro and meta.get("kind") == "macro_output" and macro.lower() in _RANDOM:
        return "random", f"{{{{{macro}}}}} in {where}"
    if macro and (meta.get("kind") == "variable_read" or meta.get("reads")):
        name = meta.get("name") or ",".join(str(r) for r in meta.get("reads") or ())
        return "variable", f"variable {name} shown in {where}"
    lowered = f"{source} {fld} {meta.get('block_id')}".lower()
    if "author" in lowered:
        return "author_note", f"Author's Note ({where})"
    if meta.get("kind") == "world_info":
        entry = f"{meta.get('comment')!r}" if meta.get("comment") else f"#{meta.get('uid')}"
        book = f" of {meta.get('book')}" if meta.get("book") else ""
        if span.depth is not None or "depth" in lowered:
            at = f" at depth {span.depth}" if span.depth is not None else " at depth"
            return "world_info_depth", f"world info {entry}{book}{at}"
        return "world_info", f"world info {entry}{book} ({where})"
    if "worldinfo" in lowered.replace("_", "") or "world_info" in lowered or "world-info" in lowered:
        if span.depth is not None or "depth" in lowered:
            return "world_info_depth", f"world info at depth {span.depth if span.depth is not None else ''} ({where})".replace(" ()", "")
        return "world_info", f"world info ({where})"
    if span.depth is not None:
        name = span.block_name.removeprefix("In-chat: ") or where
        return "in_chat", f"in-chat prompt {name!r} at depth {span.depth}"
    return "other", f"{where}"


#: spans compared one by one: macro output, variable reads and world-info entries (each names its
#: book and uid); any other text is compared block by block
_MACRO_KINDS = ("macro_output", "variable_read", "world_info")


def _content_by_block(spans: list[_Span]) -> dict[Any, tuple[str, list[_Span]]]:
    """block id -> (its non-macro text joined in order, those spans)."""
    texts: dict[Any, list[str]] = {}
    members: dict[Any, list[_Span]] = {}
    for s in spans:
        if s.meta.get("native_message_id") is not None or s.meta.get("kind") in _MACRO_KINDS:
            continue
        block = s.meta.get("block_id")
        texts.setdefault(block, []).append(s.text)
        members.setdefault(block, []).append(s)
    return {block: ("".join(texts[block]), members[block]) for block in texts}


def _first_difference(mine: tuple[str, list[_Span]], theirs: str) -> _Span:
    """The span of a changed block where its text first differs from the other request's."""
    text, spans = mine
    k = 0
    while k < min(len(text), len(theirs)) and text[k] == theirs[k]:
        k += 1
    seen = 0
    for s in spans:
        seen += len(s.text)
        if k < seen:
            return s
    return spans[-1]


def _breakers(cur: _Serialised, nxt: _Serialised, cur_spans: list[_Span], nxt_spans: list[_Span],
              boundary_cur: int, ideal: int, lcp: int) -> list[Breaker]:
    found: dict[tuple[Any, ...], Breaker] = {}
    nxt_by_key = {s.key: s for s in nxt_spans}
    cur_keys = {s.key for s in cur_spans}

    def add(span: _Span, ser: _Serialised, change: str) -> None:
        # a span that opens its message owns the message's JSON head ({"role":...) as well
        offset = ser.starts[span.message] if span.start == 0 else ser.offset(span.message, span.start)
        # the cacheable region ends where the new messages start: in the next request's bytes for a
        # span that appears there, in the current request's (its old chat's end) for the others
        limit = ideal if change == "appears" else boundary_cur
        if offset >= limit:
            return
        kind, label = _classify(span, change)
        if change == "moves" and kind == "other":
            return
        cost = max(0, limit - offset)
        # a macro or variable is its own breaker; any other text counts once per block and change
        # (a block split by the macros inside it is one insertion that moved, appeared or went)
        group = span.key if kind in ("clock", "random", "variable") else (span.meta.get("block_id"), change, kind)
        previous = found.get(group)
        if previous is None or previous.cost_bytes < cost:
            source = {k: v for k, v in span.meta.items() if v is not None}
            found[group] = Breaker(kind, label, change, span.message, offset, cost, span.text[:200],
                                   _SUGGEST[kind], source)

    # macro output and variable reads are compared one by one (each stands at a fixed place in its
    # template); everything else is compared block by block: a block's own text is split into
    # spans around its macros, so only the block's whole content says whether it changed
    cur_blocks = _content_by_block(cur_spans)
    nxt_blocks = _content_by_block(nxt_spans)
    for s in cur_spans:
        if s.meta.get("native_message_id") is not None:
            continue  # chat messages: they only ever move because something above them did
        if s.meta.get("kind") in _MACRO_KINDS:
            other = nxt_by_key.get(s.key)
            if other is None:
                add(s, cur, "disappears")
            elif other.text != s.text:
                add(s, cur, "changed")
            elif str(s.meta.get("macro") or "").lower() in _RANDOM and s.meta.get("kind") == "macro_output":
                add(s, cur, "redrawn")
            elif s.depth is not None and s.depth > 0:
                add(s, cur, "moves")
            continue
        block = s.meta.get("block_id")
        mine, theirs = cur_blocks[block], nxt_blocks.get(block)
        if theirs is None:
            add(s, cur, "disappears")
        elif mine[0] != theirs[0]:
            if s is _first_difference(mine, theirs[0]):
                add(s, cur, "changed")
        elif s.depth is not None and s.depth > 0:
            add(s, cur, "moves")
    for s in nxt_spans:
        if s.meta.get("native_message_id") is not None:
            continue
        if s.meta.get("kind") in _MACRO_KINDS:
            if s.key not in cur_keys:
                add(s, nxt, "appears")
        elif s.meta.get("block_id") not in cur_blocks:
            add(s, nxt, "appears")
    out = sorted(found.values(), key=lambda b: (-b.cost_bytes, b.byte_offset, b.label))
    if lcp < ideal and not any(b.byte_offset <= lcp for b in out):
        # a difference no provenance span explains: show the bytes where the prefix ends
        excerpt = cur.data[lcp : lcp + 80].decode("utf-8", errors="replace")
        index = max((i for i, s in enumerate(cur.starts) if s <= lcp), default=0)
        out.insert(0, Breaker("other", "unattributed difference", "unattributed", index, lcp, ideal - lcp, excerpt,
                              _SUGGEST["other"]))
    return out


# ---- turns --------------------------------------------------------------------------------------

def _clock(request: Mapping[str, Any]) -> datetime:
    options = request.get("options") if isinstance(request.get("options"), Mapping) else {}
    now = options.get("now") if isinstance(options, Mapping) else None
    if isinstance(now, str):
        try:
            parsed = datetime.fromisoformat(now.replace("Z", "+00:00"))
        except ValueError:
            raise TemplateError(f"options.now is not an ISO 8601 time: {now!r}", code="REQUEST_INVALID",
                                path="$.options.now") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    return datetime.now(timezone.utc).replace(microsecond=0)


def _with(request: Mapping[str, Any], chat: dict[str, Any], now: datetime) -> dict[str, Any]:
    out = dict(request)
    out["chat"] = chat
    options = dict(request.get("options") or {})
    options["now"] = now.isoformat().replace("+00:00", "Z")
    out["options"] = options
    return out


def _pair(request: Mapping[str, Any], base: Path | None, before: list[dict[str, Any]], added: list[dict[str, Any]],
          lorebook: str | None, now: datetime, gap: timedelta, turn: int, counter: Any,
          memo: dict[tuple[int, datetime], Any] | None = None) -> TurnReport:
    from ..sillytavern.assemble import assemble_request

    memo = {} if memo is None else memo

    def assemble(messages: list[dict[str, Any]], when: datetime) -> Any:
        # consecutive turns share a request (this turn's next is the next turn's current)
        key = (len(messages), when)
        if key not in memo:
            chat: dict[str, Any] = {"messages": messages}
            if lorebook is not None:
                chat["lorebook"] = lorebook
            memo[key] = assemble_request(_with(request, chat, when), base_dir=base)
        return memo[key]

    current = assemble(before, now)
    following = assemble([*before, *added], now + gap)
    cur = _Serialised.of(current.messages)
    nxt = _Serialised.of(following.messages)
    # the ideal prefix: everything before the first added message (found from the end: the added
    # messages are the chat's last ones, and a depth-0 insertion may follow them)
    first_added = added[0]["content"]
    index = None
    for i in range(len(nxt.messages) - 1, -1, -1):
        content = nxt.messages[i].get("content")
        if isinstance(content, str) and first_added and first_added in content:
            index = i
            break
    ideal = nxt.starts[index] if index is not None else len(nxt.data) - 1
    # the same place in the current request: just after its last chat message
    boundary_cur = min(ideal, len(cur.data) - 1)
    last = before[-1]["content"] if before else ""
    for i in range(len(cur.messages) - 1, -1, -1):
        content = cur.messages[i].get("content")
        if last and isinstance(content, str) and last in content:
            boundary_cur = cur.starts[i + 1] if i + 1 < len(cur.messages) else len(cur.data) - 1
            break
    lcp = min(_common_prefix(cur.data, nxt.data), ideal)
    breakers = _breakers(cur, nxt, _spans(current), _spans(following), boundary_cur, ideal, lcp)
    redrawn = [b.byte_offset for b in breakers if b.change == "redrawn"]
    prefix = min([lcp, *redrawn])
    return TurnReport(turn, prefix, _tokens(nxt, prefix, counter), len(nxt.data), _tokens(nxt, len(nxt.data), counter),
                      ideal, lcp, breakers, boundary_cur, counter.tokenizer.name)


def cache_report(request: Mapping[str, Any], *, base_dir: str | Path | None = None, turns: int | None = None,
                 gap: timedelta = DEFAULT_GAP, next_user: str = NEXT_USER, reply: str = NEXT_REPLY,
                 tokenizer: str | None = None) -> CacheReport:
    """The cache-stability report of a request-file object (see :mod:`tavernbox.sillytavern.request`).

    Without ``turns``: the current turn against the next one, where the chat gains the model's reply
    and the user's next message (``reply``/``next_user``; a chat that ends with the assistant gains
    a user message and a reply instead). With ``turns=N``: the chat is a recorded one and its last
    ``N`` turns are replayed from its own messages, each turn compared with the one after it.
    The clock moves on by ``gap`` per turn; the seed stays the same. Tokens are counted with
    ``tokenizer`` (a name, see :mod:`tavernbox.tokenizers`), else the request's ``budget.tokenizer``.
    Raises ``TemplateError`` (``REQUEST_INVALID``) for a bad request, or a chat too short for ``turns``.
    """
    from ..sillytavern.loading import load_inputs
    from ..sillytavern.request import parse_request

    if not isinstance(request, Mapping):
        raise TemplateError("the request must be a JSON object", code="REQUEST_INVALID", path="$")
    from ..tokenizers import MessageCounter, get_tokenizer

    base = Path(base_dir) if base_dir is not None else None
    parsed = parse_request(request)
    counter = MessageCounter(get_tokenizer(tokenizer or parsed.budget.tokenizer))
    inputs = load_inputs(parsed, base)
    messages = [m.to_dict() for m in inputs.chat.messages]
    for m in messages:
        m.pop("id", None)
    lorebook = inputs.chat.lorebook
    now = _clock(request)
    if turns is None:
        if messages and messages[-1]["role"] == "user":
            added = [{"role": "assistant", "content": reply}, {"role": "user", "content": next_user}]
        else:
            added = [{"role": "user", "content": next_user}, {"role": "assistant", "content": reply}]
        return CacheReport([_pair(request, base, messages, added, lorebook, now, gap, 1, counter)])
    if not 1 <= turns <= MAX_TURNS:
        raise TemplateError(f"--turns must be 1..{MAX_TURNS}", code="INPUT_INVALID")
    ends = [i + 1 for i, m in enumerate(messages) if m["role"] == "user"]
    if len(ends) < turns + 1:
        raise TemplateError(f"the chat has {len(ends)} user message(s); {turns} turn(s) need {turns + 1}",
                            code="REQUEST_INVALID", path="$.chat")
    reports = []
    memo: dict[tuple[int, datetime], Any] = {}
    pairs = list(zip(ends[-turns - 1 : -1], ends[-turns:]))
    for t, (a, b) in enumerate(pairs, 1):
        reports.append(_pair(request, base, messages[:a], messages[a:b], lorebook, now + gap * (t - 1), gap, t,
                             counter, memo))
    return CacheReport(reports)

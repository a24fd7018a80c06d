"""Placement: turn resolved blocks into ordered nodes, in list (rule) order.

List order is the primary order. Each enabled rule's non-reference-only blocks are its *roots*;
a reference block pulls its targets to the referencing row (exactly once: claims are settled
first, :mod:`.claims`); ``target_source_id`` routes a text block to another enabled module's row;
a node with a depth is deferred to :mod:`.depth`. The plan is the concatenation of the enabled
rules' rows in preset order.

In ``modules`` placement a *listed* source owns its row and depth: references and source macros
cannot pull it elsewhere or revive it when disabled (its macro expands to nothing), and a listed
rule's own depth overrides the depths its blocks carry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ..errors import Diagnostic, TemplateError
from .blocks import Block
from .claims import settle_claims
from .identity import messages_hash, text_identity
from .native import NATIVE_PLACEMENTS, arrange_native
from .node import Node, SpanInfo
from .registry import ResolvedEntry
from .render import IDENTITY, FrozenInfo, RenderOutput, compose_text, find_source_macros
from .rules import Preset, Rule

__all__ = ["Planner"]

#: ``find_source_macros`` results by (text, macro names): the scan depends on nothing else, and
#: an unchanged prompt is scanned again by every request (bounded, emptied when full; the lists
#: are never modified by their readers)
_MACRO_USES: dict[tuple[str, frozenset[str]], list[tuple[int, int, str]]] = {}
_MACRO_USES_MAX = 16384
_MACRO_USES_MAX_TEXT = 4096

#: span kinds that describe part of the block's own text (so they carry the block's identity)
_MERGED_KINDS = frozenset({"literal_macro", "macro_output", "variable_read"})

#: ``(id(spans), identity fields) -> (spans, merged)``: a static prompt's partition is the same
#: object every request (see ``render._PARTITIONS``), so its merge with the block's identity is
#: kept too (checked by identity; the entry holds ``spans`` alive). Emptied when full.
_MERGES: dict[tuple[Any, ...], tuple[Any, tuple[tuple[int, int, SpanInfo], ...]]] = {}
_MERGES_MAX = 8192


def _merged_spans(
    rendered_spans: tuple[tuple[int, int, SpanInfo], ...], rule_id: str, source_id: str, block_id: str, resource_id: Any,
    field: Any,
) -> list[tuple[int, int, SpanInfo]]:
    """The block's spans: its own text attributed to its identity fields, macro and literal ranges
    merged with that identity (one merged dict per distinct info, without null fields)."""
    key = (id(rendered_spans), rule_id, source_id, block_id, resource_id, field)
    seen = _MERGES.get(key)
    if seen is not None and seen[0] is rendered_spans:
        return list(seen[1])
    own: SpanInfo = {
        "rule_id": rule_id, "source_id": source_id, "block_id": block_id, "resource_id": resource_id, "field": field,
    }
    merged: dict[int, SpanInfo] = {}
    spans = []
    own = FrozenInfo(own)  # kept with the cache entry, so shared from now on: read-only
    for s, e, info in rendered_spans:
        if info.get("kind") in _MERGED_KINDS:
            both = merged.get(id(info))
            if both is None:
                both = merged[id(info)] = FrozenInfo({k: v for k, v in {**own, **info}.items() if v is not None})
            spans.append((s, e, both))
        else:
            spans.append((s, e, info or own))
    if len(_MERGES) >= _MERGES_MAX:
        _MERGES.clear()
    _MERGES[key] = (rendered_spans, tuple(spans))
    return spans


#: interned block-identity infos (the same values give the same read-only dict request after
#: request, so provenance describes each once for all; see ``assemble.build_provenance``)
_OWN: dict[tuple[Any, ...], FrozenInfo] = {}
_OWN_MAX = 16384


def _own_info(rule_id: str, source_id: str, block_id: str, resource_id: Any, field: Any) -> FrozenInfo:
    """The shared span info of a block's own text (its identity fields)."""
    key = (rule_id, source_id, block_id, resource_id, field)
    info = _OWN.get(key)
    if info is None:
        if len(_OWN) >= _OWN_MAX:
            _OWN.clear()
        info = _OWN[key] = FrozenInfo(
            rule_id=rule_id, source_id=source_id, block_id=block_id, resource_id=resource_id, field=field
        )
    return info


def _native_info(rule_id: str, source_id: str, block_id: str, message_id: str) -> FrozenInfo:
    """The shared span info of a native message's text."""
    key = (rule_id, source_id, block_id, None, message_id, "native")
    info = _OWN.get(key)
    if info is None:
        if len(_OWN) >= _OWN_MAX:
            _OWN.clear()
        info = _OWN[key] = FrozenInfo(
            rule_id=rule_id, source_id=source_id, block_id=block_id, native_message_id=message_id
        )
    return info


class Planner:
    """Holds one request's resolved entries and places their blocks."""

    def __init__(
        self,
        preset: Preset,
        entries: list[ResolvedEntry],
        native_messages: list[dict[str, Any]],
        render_call: Callable[[str, str, Any], RenderOutput],
    ) -> None:
        self.preset = preset
        self.entries = entries
        self.list_placement = preset.placement == "modules"
        self.by_source: dict[str, ResolvedEntry] = {}
        for e in entries:
            self.by_source.setdefault(e.descriptor.id, e)
        self.enabled_kinds = {r.kind for r in preset.rules if r.enabled}
        self.listed_ids = {r.id for r in preset.rules}
        self.native_by_id = {m["id"]: m for m in native_messages}
        self.render_call = render_call
        self.diagnostics: list[Diagnostic] = []
        self._reported_missing: set[str] = set()
        self.macro_table: dict[str, tuple[ResolvedEntry, Block]] = {}
        for e in entries:
            for name, block_id in e.output.macros.items():
                lname = name.lower()
                block = e.output.block(block_id)
                if lname in self.macro_table or block is None or block.type != "text":
                    raise TemplateError(
                        f"invalid or duplicate source macro {name!r} from {e.descriptor.id!r}",
                        code="ASSEMBLY_MACRO_INVALID",
                    )
                self.macro_table[lname] = (e, block)
        self._macro_uses: dict[int, list[tuple[int, int, str]]] = {}
        self._macro_names = frozenset(self.macro_table)
        self.claimed: dict[str, str] = {}
        self.emitted: set[str] = set()
        self.rows: dict[str, list[Node]] = {r.id: [] for r in preset.rules if r.enabled}
        self.deferred: list[Node] = []
        self.required: list[str] = []

    # -- queries used by claims and emission ---------------------------------------------------

    @staticmethod
    def key(entry: ResolvedEntry, block: Block) -> str:
        """A block's identity within the request: ``<rule id>:<block id>``."""
        return f"{entry.rule.id}:{block.id}"

    def roots(self) -> Iterator[tuple[ResolvedEntry, Block]]:
        """Blocks of enabled listed rules, in preset order, reference-only blocks excluded."""
        ordered = sorted(
            (e for e in self.entries if e.rule.enabled and not e.rule.synthetic), key=lambda e: e.rule_index or 0
        )
        for e in ordered:
            for b in e.output.blocks:
                if not b.reference_only:
                    yield e, b

    def find_block(self, source_id: str, block_id: str) -> tuple[ResolvedEntry, Block] | None:
        """The resolved block ``block_id`` of source ``source_id``."""
        entry = self.by_source.get(source_id)
        block = entry.output.block(block_id) if entry else None
        return (entry, block) if entry and block else None

    def macro_uses(self, block: Block) -> list[tuple[int, int, str]]:
        """The source macros in a text block (scanned once per request: claims and emission both ask)."""
        uses = self._macro_uses.get(id(block))
        if uses is None:
            key = (block.text, self._macro_names)
            uses = _MACRO_USES.get(key)
            if uses is None:
                uses = find_source_macros(block.text, self.macro_table)
                if len(block.text) <= _MACRO_USES_MAX_TEXT:
                    if len(_MACRO_USES) >= _MACRO_USES_MAX:
                        _MACRO_USES.clear()
                    _MACRO_USES[key] = uses
            self._macro_uses[id(block)] = uses
        return uses

    def usable(self, entry: ResolvedEntry, block: Block) -> bool:
        """Whether a source macro may inline this block (a listed module owns its content)."""
        return not (self.list_placement and not entry.rule.synthetic and not block.reference_only)

    def targets(self, entry: ResolvedEntry, ref: Block) -> list[tuple[ResolvedEntry, Block]]:
        """The blocks a reference pulls in (see the module docstring for list ownership)."""
        assert ref.source_id is not None
        target = self.by_source.get(ref.source_id)
        if target is None:
            if ref.source_id not in self._reported_missing:
                self._reported_missing.add(ref.source_id)
                self.diagnostics.append(
                    Diagnostic(
                        "ASSEMBLY_REFERENCE_UNAVAILABLE",
                        f"reference to source {ref.source_id!r}, which has no resolved content",
                        data={"source_id": ref.source_id, "from": entry.descriptor.id},
                    )
                )
            return []
        listed = not target.rule.synthetic
        blocks = target.output.blocks
        if self.list_placement and listed and not ref.use_owner_rule:
            wanted = set(ref.block_ids or ())
            return [(target, b) for b in blocks if b.reference_only and b.id in wanted]
        if ref.honor_enabled and listed and ref.source_id not in self.enabled_kinds:
            return []
        out = []
        for b in blocks:
            if ref.block_ids is not None and b.id not in ref.block_ids:
                continue
            if ref.block_ids is None and b.reference_only:
                continue
            if ref.group is not None and b.group != ref.group:
                continue
            out.append((target, b))
        return out

    def _enabled_rule(self, kind: str) -> Rule | None:
        for r in self.preset.rules:
            if r.kind == kind and r.enabled:
                return r
        return None

    # -- emission -------------------------------------------------------------------------------

    def place(self) -> list[Node]:
        """Settle claims, emit every root in list order, return the rows concatenated."""
        self.claimed = settle_claims(self)
        for entry, block in self.roots():
            self._emit(entry, block, entry.rule, entry.rule, None, True, None)
        out: list[Node] = []
        for r in self.preset.rules:
            if r.enabled:
                out.extend(self.rows[r.id])
        if self.preset.placement in NATIVE_PLACEMENTS:
            out, self.deferred, notes = arrange_native(self.preset, out, self.deferred)
            self.diagnostics.extend(notes)
        return out

    def _emit(
        self,
        entry: ResolvedEntry,
        block: Block,
        rule: Rule,
        placement_rule: Rule,
        ref_owner: str | None,
        lock: bool,
        lock_reason: str | None,
    ) -> None:
        k = self.key(entry, block)
        claimer = self.claimed.get(k)
        if (claimer is not None and claimer != ref_owner) or k in self.emitted:
            return
        self.emitted.add(k)
        locked = ref_owner is not None and lock
        if block.type == "reference":
            targets = self.targets(entry, block)
            if targets and all(self.key(*t) in self.emitted for t in targets):
                self.diagnostics.append(
                    Diagnostic(
                        "ASSEMBLY_DUPLICATE_SLOT",
                        f"every target of reference {k!r} was already placed (a slot used twice?)",
                        data={"reference": k, "source_id": block.source_id},
                    )
                )
            for t_entry, t_block in targets:
                self._emit(
                    t_entry,
                    t_block,
                    rule if block.use_owner_rule else t_entry.rule,
                    placement_rule,
                    k,
                    block.lock,
                    f"reference:{k}",
                )
            return
        if block.type == "text" and block.target_source_id:
            routed = self._enabled_rule(block.target_source_id)
            if routed is not None:
                rule = placement_rule = routed
        node = self._native(entry, block, rule, k) if block.type == "native" else self._text(entry, block, rule, k)
        if node is None:
            return
        if locked:
            node.locked, node.lock_reason = True, lock_reason
        listed_rule = rule.id in self.listed_ids
        if block.type == "native":
            node.depth = block.depth if block.depth is not None else rule.depth
        elif self.list_placement and listed_rule:
            node.depth = rule.depth
        else:
            node.depth = block.depth if block.depth is not None else rule.depth
        if node.depth is not None:
            self.deferred.append(node)
        else:
            self.rows[placement_rule.id].append(node)

    def _base(self, entry: ResolvedEntry, block: Block, rule: Rule, key: str) -> dict[str, Any]:
        return {
            "key": key,
            "rule_id": rule.id,
            "source_id": entry.descriptor.id,
            "plugin_id": entry.descriptor.plugin_id,
            "block_id": block.id,
            "name": block.name or block.id,
            "depth": None,
            "order": block.order,
            "lifetime": rule.lifetime,
            "stability": block.stability or entry.descriptor.stability,
        }

    def _native(self, entry: ResolvedEntry, block: Block, rule: Rule, key: str) -> Node | None:
        messages = []
        for mid in block.message_ids:
            msg = self.native_by_id.get(mid)
            if msg is None:
                raise TemplateError(
                    f"source {entry.descriptor.id!r} names unknown native message {mid!r}", code="ASSEMBLY_NATIVE_UNKNOWN"
                )
            messages.append(msg)
        if not messages:
            return None
        self.required.extend(block.message_ids)
        spans = []
        for m in messages:
            content = m.get("content")
            info = _native_info(rule.id, entry.descriptor.id, block.id, m["id"])
            spans.append([(0, len(content), info)] if isinstance(content, str) and content else [])
        return Node(
            role="preserve",
            native=True,
            messages=messages,
            spans=spans,
            hash=messages_hash(messages),
            **self._base(entry, block, rule, key),
        )

    def _text(self, entry: ResolvedEntry, block: Block, rule: Rule, key: str) -> Node | None:
        literal_names = {n.lower() for n, _ in block.literal_macros} if block.literal_macros else ()
        macros = []
        children = []
        for start, end, name in self.macro_uses(block):
            if name in literal_names:
                continue
            t_entry, t_block = self.macro_table[name]
            if t_entry.descriptor.id != entry.descriptor.id and t_entry.descriptor.id not in entry.descriptor.dependencies:
                raise TemplateError(
                    f"undeclared macro dependency from {entry.descriptor.id!r} to {t_entry.descriptor.id!r} "
                    f"({{{{{name}}}}})",
                    code="ASSEMBLY_DEPENDENCY_UNDECLARED",
                )
            if not self.usable(t_entry, t_block):
                macros.append((start, end, name, None, {}))
                continue
            info = {
                "kind": "macro",
                "macro": name,
                "rule_id": t_entry.rule.id,
                "source_id": t_entry.descriptor.id,
                "block_id": t_block.id,
                "resource_id": t_block.resource_id,
                "field": t_block.field,
            }
            macros.append((start, end, name, t_block.text, info))
            children.append({**info, "locked": True, "lock_reason": f"macro:{name}"})
        renderer = entry.descriptor.renderer or IDENTITY
        rendered = compose_text(
            block.text,
            macros,
            block.literal_macros,
            lambda text: self.render_call(key, text, renderer),
            # SillyTavern's own placement sends a prompt's text as it renders (``preparePrompt``
            # trims nothing), leading and trailing whitespace included; what it splices into the
            # chat at a depth it trims (``populationInjectionPrompts``)
            bool(getattr(renderer, "trim", False)) and (self.preset.placement != "st" or block.depth is not None),
        )
        self.diagnostics.extend(_in_block(d, block) for d in rendered.diagnostics)
        if not rendered.text:
            return None
        role = (block.role or "system") if rule.role == "preserve" else rule.role
        digest, message_id = text_identity(key, role, rendered.text)
        message = {"id": message_id, "role": role, "content": rendered.text}
        if block.speaker:
            message["name"] = block.speaker
        descriptor = entry.descriptor
        if len(rendered.spans) == 1 and not rendered.spans[0][2]:  # the common case: all the block's own text
            own = _own_info(rule.id, descriptor.id, block.id, block.resource_id, block.field)
            spans = [(rendered.spans[0][0], rendered.spans[0][1], own)]
        else:
            spans = _merged_spans(rendered.spans, rule.id, descriptor.id, block.id, block.resource_id, block.field)
        # the fields of _base, spelled out: this runs once per placed text block
        return Node(
            key,
            rule.id,
            descriptor.id,
            descriptor.plugin_id,
            block.id,
            block.name or block.id,
            role,
            False,
            [message],
            [spans],
            digest,
            None,
            block.order,
            rule.lifetime,
            block.stability or descriptor.stability,
            block.resource_id,
            block.field,
            children=children,
        )


def _in_block(d: Diagnostic, block: Block) -> Diagnostic:
    """A render's diagnostic tagged with the block it was raised in and the text it concerns (at most 200
    characters), so that a reader of the request's warnings learns which prompt or entry held it."""
    where: dict[str, Any] = {"block_id": block.id, "resource_id": block.resource_id, "field": block.field}
    if d.span is not None and 0 <= d.span.start <= d.span.end <= len(block.text):
        where["text"] = block.text[d.span.start:min(d.span.end, d.span.start + 200)]
    return replace(d, data={**d.data, **where})

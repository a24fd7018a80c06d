"""The source registry (protocol 1): registration, job building and resolution.

A *source* turns the request's assets and native messages into blocks. Sources are host code
registered by id; a preset rule names a source by its ``kind``. Per request the registry is
captured once (an unregister during a request affects only the next one), the rules are turned
into a dependency-ordered job list, and each job's resolver is called with a deep-frozen context
and a cancellation token. Resolvers may be sync or async; their output is validated at once, and
any error fails the whole request so no partial prompt is ever sent.

A source whose output depends on something that can change during the request (a template that
read MVU state, a permission a manager granted) hands its leases back under the output key
``leases`` (see :func:`take_leases`). They are checked once more after *every* source resolved and
before placement (:func:`check_held_leases`): a later source that changed or revoked what an
earlier one read fails the whole request with the lease's code (``SOURCE_POLICY_CHANGED`` /
``SOURCE_CONTENT_CHANGED``), never a partial result and never a fallback to a fresh read.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..assets.frozen import FrozenDict, FrozenList, fingerprint, json_text
from ..errors import Diagnostic, TemplateError
from .blocks import SourceOutput, validate_output
from .rules import LIFETIMES, ROLES, SOURCE_ID, Preset, Rule

__all__ = [
    "CancellationToken",
    "Job",
    "ResolvedEntry",
    "SourceDescriptor",
    "SourceRegistry",
    "build_jobs",
    "check_held_leases",
    "take_leases",
    "ASSET_CACHE",
    "FrozenMap",
    "MAX_ASSET_NESTING",
    "check_nesting",
    "freeze",
    "freeze_assets",
    "memoized",
    "resolve_jobs",
    "resolve_jobs_async",
]

STABILITIES = ("asset", "conversation", "evaluation", "assembly", "snapshot")


class FrozenMap(Mapping[str, Any]):
    """A read-only view of a dict whose nested containers are frozen on first access.

    Resolvers read a small part of a large context (a 500 KiB preset, an 800-message chat), so
    copying all of it for every request cost more than the sources' own work. A view freezes a
    value only when it is read, and keeps that frozen value, so every read of one key returns the
    same object. Writes fail with ``TypeError`` exactly as on ``MappingProxyType``. The wrapped
    dict must not change while the view is in use: the assembler only wraps data it owns (JSON
    copies of the assets, its own preset and rule dicts, the request's native messages).
    """

    __slots__ = ("__weakref__", "_data", "_frozen", "_memo")

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self._frozen: dict[Any, Any] = {}
        self._memo: dict[str, Any] | None = None

    def __getitem__(self, key: Any) -> Any:
        value = self._data[key]
        kind = type(value)
        if kind is str or kind is int or kind is float or kind is bool or value is None:
            return value  # scalars (most reads: a message's id, role, content) need no freezing
        frozen = self._frozen.get(key, _MISSING)
        if frozen is _MISSING:
            frozen = self._frozen[key] = freeze(value)
        return frozen

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self._data else default

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def copy(self) -> dict[str, Any]:
        """A shallow mutable copy (as ``MappingProxyType.copy``), its values still frozen."""
        return dict(self.items())

    def memo(self, key: str, factory: Callable[[], Any]) -> Any:
        """``factory()`` computed once per view and key: derived data (a parsed preset) for a
        value that cannot change. The view of an unchanged asset is shared between requests
        (see :func:`freeze_assets`), so this also caches across requests."""
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        if key not in memo:
            memo[key] = factory()
        return memo[key]


def memoized(value: Any, key: str, factory: Callable[[], Any]) -> Any:
    """``factory()``, cached on ``value`` when it is a :class:`FrozenMap` (else computed each time)."""
    if isinstance(value, FrozenMap):
        return value.memo(key, factory)
    return factory()


def freeze(value: Any) -> Any:
    """A read-only form: dicts become :class:`FrozenMap` views (frozen lazily; a dict of scalars
    only, such as most chat messages, a ``MappingProxyType``), lists and tuples tuples, sets
    frozensets.

    Resolvers must be read-only; handing them frozen data makes a write an immediate error
    instead of a silent change to what the next source or the record sees. Plain dicts are
    wrapped, not copied (see :class:`FrozenMap`); other mappings are copied once at their level.
    """
    kind = type(value)
    if kind is dict:
        for item in value.values():
            k = type(item)
            if not (k is str or k is int or k is float or k is bool or item is None):
                return FrozenMap(value)  # something to freeze below: lazily, on first read
        return MappingProxyType(value)  # flat (a chat message): the C view reads fastest
    if kind is FrozenMap or kind is str or kind is int or value is None:
        return value
    if kind is list or kind is tuple:
        return tuple([freeze(v) for v in value])
    if isinstance(value, Mapping):
        return FrozenMap(dict(value))
    if isinstance(value, (list, tuple)):
        return tuple([freeze(v) for v in value])
    if isinstance(value, (set, frozenset)):
        return frozenset(freeze(v) for v in value)
    return value


#: deepest nesting accepted in the assets (a deeper value is ``ASSEMBLY_REQUEST_INVALID``);
#: far beyond any real card, book or preset, and shallow enough for every recursive stage
MAX_ASSET_NESTING = 256


def check_nesting(value: Any, limit: int = MAX_ASSET_NESTING) -> bool:
    """True when ``value`` (JSON data) nests at most ``limit`` containers deep (iterative walk)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
    return True


class _AssetCache:
    """Frozen asset values by their JSON text, shared between requests (bounded, LRU).

    A preset, a card or a book is usually the same from turn to turn; keying by its JSON text
    (which the request needs anyway, to check the assets are JSON data and to detach them from
    the caller) lets an unchanged asset skip parsing and keep the same frozen view, and with it
    whatever sources derived from it (:func:`memoized`). At most 32 values and 16 Mi characters
    of JSON are kept; a value over a quarter of that is never kept.
    """

    def __init__(self, max_entries: int = 32, max_chars: int = 16 * 1024 * 1024) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> Any:
        with self._lock:
            hit = self._items.get(text, _MISSING)
            if hit is not _MISSING:
                self._items.move_to_end(text)
            return hit

    def put(self, text: str, value: Any) -> None:
        if len(text) > self.max_chars // 4:
            return
        with self._lock:
            if text in self._items:
                return
            self._items[text] = value
            self._chars += len(text)
            while len(self._items) > self.max_entries or self._chars > self.max_chars:
                old, _ = self._items.popitem(last=False)
                self._chars -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0


_MISSING = object()
ASSET_CACHE = _AssetCache()


def thaw(value: Any) -> Any:
    """A plain (mutable) copy of frozen context data (:func:`freeze_assets`), for stages that
    take JSON-like input (the sandbox, the world-info engine, a caller's own code)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [thaw(v) for v in value]
    return value


def freeze_assets(assets: Mapping[str, Any]) -> FrozenMap:
    """The request's assets as a detached, frozen view (each top-level value shared between
    requests while its JSON text is unchanged).

    Raises ``TypeError``/``ValueError`` for data that is not JSON (as ``json.dumps`` does) and
    ``RecursionError`` for data nested deeper than :data:`MAX_ASSET_NESTING` containers.
    """
    import json

    if not all(type(k) is str for k in assets):
        # non-string keys: the JSON round trip renames them; no sharing for such a request
        data = json.loads(json_text(assets))
        if not check_nesting(data):
            raise RecursionError("assets nested too deeply")
        return FrozenMap(data)
    out: dict[str, Any] = {}
    for key, value in assets.items():
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            out[key] = value
            continue
        if kind in _VIEW_TYPES or (kind is dict and any(type(v) in _VIEW_TYPES for v in value.values())):
            out[key] = _freeze_with_views(value)
            continue
        try:
            text = json.dumps(value)
        except TypeError as exc:
            try:
                out[key] = _freeze_with_views(value)  # frozen views deeper inside
            except TypeError:
                raise exc from None
            continue
        out[key] = _frozen_from_text(text)
    view = FrozenMap(out)
    view._frozen = out  # the values are frozen already (a tuple is not frozen again into a new one)
    return view


def _frozen_from_text(text: str) -> Any:
    """The shared frozen value of an asset's JSON text (parsed and frozen on a miss)."""
    import json

    frozen = ASSET_CACHE.get(text)
    if frozen is _MISSING:
        loaded = json.loads(text)
        if type(loaded) in (dict, list) and not check_nesting(loaded, MAX_ASSET_NESTING - 1):
            raise RecursionError("assets nested too deeply")
        frozen = freeze(loaded)
        ASSET_CACHE.put(text, frozen)
    return frozen


_VIEW_TYPES = (FrozenDict, FrozenList)
_VIEW_CACHE: OrderedDict[Any, Any] = OrderedDict()
_VIEW_CACHE_SIZE = 64
_VIEW_LOCK = threading.Lock()


def _freeze_with_views(value: Any) -> Any:
    """:func:`_frozen_from_text` for a value holding cached assets' frozen views (``assets/frozen.py``).

    Such a value (a preset dict with a few settings added, a card dict trimmed) is keyed by its
    :func:`~tavernbox.assets.frozen.fingerprint`, which walks only its plain parts, so an
    unchanged asset skips the JSON round trip and keeps its shared frozen value (and what sources
    memoised on it). The result is the very object the plain path gives for the same JSON text.
    Raises ``TypeError`` when something inside is not JSON data.
    """
    fp = fingerprint(value)
    with _VIEW_LOCK:
        frozen = _VIEW_CACHE.get(fp, _MISSING)
        if frozen is not _MISSING:
            _VIEW_CACHE.move_to_end(fp)
            return frozen
    text = json_text(value)
    frozen = _frozen_from_text(text)
    if len(text) <= ASSET_CACHE.max_chars // 4:
        with _VIEW_LOCK:
            _VIEW_CACHE[fp] = frozen
            while len(_VIEW_CACHE) > _VIEW_CACHE_SIZE:
                _VIEW_CACHE.popitem(last=False)
    return frozen


class CancellationToken:
    """A cooperative cancel flag handed to every resolver (the upstream ``signal``)."""

    __slots__ = ("_cancelled", "reason")

    def __init__(self) -> None:
        self._cancelled = False
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Ask the assembly (and resolvers that honour the token) to stop."""
        self._cancelled, self.reason = True, reason

    def raise_if_cancelled(self) -> None:
        """Raise ``ASSEMBLY_CANCELLED`` if cancelled."""
        if self._cancelled:
            raise TemplateError(f"assembly cancelled: {self.reason}", code="ASSEMBLY_CANCELLED")


@dataclass(frozen=True, slots=True)
class SourceDescriptor:
    """What a source declares about itself; capabilities are checked against every rule."""

    id: str
    plugin_id: str
    name: str
    resolve: Callable[..., Any] | None = None
    parse_text: Callable[..., Any] | None = None
    version: int = 1
    stability: str = "conversation"
    dependencies: tuple[str, ...] = ()
    multiple: bool = False
    roles: tuple[str, ...] = ROLES
    lifetimes: tuple[str, ...] = LIFETIMES
    depth: bool = True
    #: the text renderer (``render.Renderer``); ``None`` keeps text as written
    renderer: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The declared metadata (no callables), as recorded with each result."""
        return {
            "id": self.id,
            "plugin_id": self.plugin_id,
            "name": self.name,
            "version": self.version,
            "stability": self.stability,
            "dependencies": list(self.dependencies),
            "multiple": self.multiple,
            "roles": list(self.roles),
            "lifetimes": list(self.lifetimes),
            "depth": self.depth,
            "renderer": getattr(self.renderer, "name", None),
            "parses_text": self.parse_text is not None,
        }


_DESCRIPTOR_ALIASES = {"pluginId": "plugin_id", "parseText": "parse_text", "renderText": "renderer"}


def _descriptor(definition: SourceDescriptor | Mapping[str, Any]) -> SourceDescriptor:
    def bad(msg: str) -> TemplateError:
        return TemplateError(f"invalid source descriptor: {msg}", code="ASSEMBLY_SOURCE_INVALID")

    if isinstance(definition, SourceDescriptor):
        d: dict[str, Any] = {f: getattr(definition, f) for f in SourceDescriptor.__dataclass_fields__}
    elif isinstance(definition, Mapping):
        d = {_DESCRIPTOR_ALIASES.get(k, k): v for k, v in definition.items()}
        unknown = set(d) - set(SourceDescriptor.__dataclass_fields__)
        if unknown:
            raise bad(f"unknown fields {sorted(unknown)}")
    else:
        raise bad("expected a SourceDescriptor or a mapping")
    for key in ("id", "plugin_id"):
        if not isinstance(d.get(key), str) or not SOURCE_ID.fullmatch(d[key]):
            raise bad(f"{key} must be a source id (letter or digit, then [A-Za-z0-9_.:/-])")
    if not isinstance(d.get("name"), str) or not d["name"].strip():
        raise bad("name must be a non-empty string")
    if d.get("resolve") is None and d.get("parse_text") is None:
        raise bad("a source needs resolve or parse_text")
    for key in ("resolve", "parse_text"):
        if d.get(key) is not None and not callable(d[key]):
            raise bad(f"{key} must be callable")
    if d.get("version", 1) != 1:
        raise bad("only protocol version 1 is supported")
    if d.get("stability", "conversation") not in STABILITIES:
        raise bad(f"stability must be one of {', '.join(STABILITIES)}")
    for key, allowed in (("roles", ROLES), ("lifetimes", LIFETIMES)):
        values = tuple(d.get(key, allowed))
        if not values or any(v not in allowed for v in values):
            raise bad(f"{key} must be a non-empty subset of {', '.join(allowed)}")
        d[key] = values
    deps = tuple(d.get("dependencies", ()))
    if any(not isinstance(x, str) or not SOURCE_ID.fullmatch(x) for x in deps):
        raise bad("dependencies must be source ids")
    d["dependencies"] = deps
    for key in ("multiple", "depth"):
        if key in d and not isinstance(d[key], bool):
            raise bad(f"{key} must be a boolean")
    return SourceDescriptor(**d)


class SourceRegistry:
    """Registered sources by id. ``register`` returns a disposer that removes that exact one."""

    def __init__(self) -> None:
        self._sources: dict[str, SourceDescriptor] = {}

    def register(self, descriptor: SourceDescriptor | Mapping[str, Any]) -> Callable[[], None]:
        """Validate and add a source; a second source with the same id is an error."""
        desc = _descriptor(descriptor)
        if desc.id in self._sources:
            raise TemplateError(f"source {desc.id!r} is already registered", code="ASSEMBLY_SOURCE_INVALID")
        self._sources[desc.id] = desc

        def unregister() -> None:
            if self._sources.get(desc.id) is desc:
                del self._sources[desc.id]

        return unregister

    def get(self, source_id: str) -> SourceDescriptor | None:
        """The registered source with this id."""
        return self._sources.get(source_id)

    def list(self) -> list[SourceDescriptor]:
        """All registered sources, sorted by id."""
        return [self._sources[k] for k in sorted(self._sources)]

    def capture(self) -> dict[str, SourceDescriptor]:
        """The registrations one request works with (later changes affect the next request)."""
        return dict(self._sources)


@dataclass(frozen=True, slots=True)
class Job:
    """One source to resolve, with the (explicit or synthetic) rule it resolves for."""

    rule: Rule
    descriptor: SourceDescriptor


@dataclass(frozen=True, slots=True)
class ResolvedEntry:
    """A resolved job: the rule, the source and its validated output."""

    rule: Rule
    descriptor: SourceDescriptor
    output: SourceOutput
    rule_index: int | None = None  # position in the preset; None for synthetic rules
    extra: dict[str, Any] = field(default_factory=dict)


def _unsupported(rule: Rule, desc: SourceDescriptor) -> None:
    if rule.input_mode == "text" and desc.parse_text is None:
        raise TemplateError(f"source {desc.id!r} does not accept custom text", code="ASSEMBLY_RULE_UNSUPPORTED")
    if rule.input_mode == "source" and desc.resolve is None:
        raise TemplateError(f"source {desc.id!r} only supplies a text parser", code="ASSEMBLY_RULE_UNSUPPORTED")
    if rule.role not in desc.roles or rule.lifetime not in desc.lifetimes or (rule.depth is not None and not desc.depth):
        raise TemplateError(
            f"unsupported rule settings for {desc.id!r} (rule {rule.id!r}: role {rule.role}, lifetime "
            f"{rule.lifetime}, depth {rule.depth}; the source allows roles {list(desc.roles)}, lifetimes "
            f"{list(desc.lifetimes)}, depth {desc.depth})",
            code="ASSEMBLY_RULE_UNSUPPORTED",
            path=f"rule {rule.id}",
        )


def build_jobs(preset: Preset, sources: Mapping[str, SourceDescriptor]) -> tuple[list[Job], list[Diagnostic]]:
    """Turn the preset into a dependency-ordered job list (dependencies first).

    Only enabled rules are roots; a disabled rule, or an unlisted source, is resolved only when an
    enabled rule's source depends on it (an unlisted one through a synthetic, disabled rule
    ``reference-<id>``). A cycle in declared dependencies fails; a missing source is a diagnostic
    and its content is simply absent.
    """
    jobs: list[Job] = []
    diags: list[Diagnostic] = []
    done: set[str] = set()  # rule ids
    visiting: list[str] = []
    source_rules: dict[str, list[Rule]] = {}
    for r in preset.rules:
        if r.input_mode == "source":
            source_rules.setdefault(r.kind, []).append(r)

    def visit(rule: Rule) -> None:
        if rule.id in done:
            return
        if rule.kind in visiting:
            cycle = " -> ".join([*visiting[visiting.index(rule.kind) :], rule.kind])
            raise TemplateError(f"cyclic source dependencies: {cycle}", code="ASSEMBLY_DEPENDENCY_CYCLE")
        desc = sources.get(rule.kind)
        if desc is None:
            done.add(rule.id)
            diags.append(
                Diagnostic(
                    "ASSEMBLY_SOURCE_UNAVAILABLE",
                    f"source {rule.kind!r} is not registered; rule {rule.id!r} contributes nothing",
                    data={"source_id": rule.kind, "rule_id": rule.id},
                )
            )
            return
        _unsupported(rule, desc)
        if rule.input_mode == "source" and not desc.multiple and len(source_rules.get(rule.kind, [])) > 1:
            raise TemplateError(f"duplicate source rule for {desc.id!r}", code="ASSEMBLY_RULE_DUPLICATE")
        visiting.append(rule.kind)
        for dep in desc.dependencies:
            listed = source_rules.get(dep)
            if listed:
                visit(listed[0])
                continue
            dep_desc = sources.get(dep)
            role, lifetime = "preserve", "request"
            if dep_desc is not None:
                role = "preserve" if "preserve" in dep_desc.roles else dep_desc.roles[0]
                lifetime = "request" if "request" in dep_desc.lifetimes else dep_desc.lifetimes[0]
            visit(Rule(f"reference-{dep}", dep, False, role, lifetime, None, "", "", None, "source", True))
        visiting.pop()
        done.add(rule.id)
        jobs.append(Job(rule, desc))

    for rule in preset.rules:
        if rule.enabled:
            visit(rule)
    return jobs, diags


def _call(job: Job, context: Any, token: CancellationToken) -> Any:
    fn = job.descriptor.parse_text if job.rule.input_mode == "text" else job.descriptor.resolve
    assert fn is not None  # checked in build_jobs
    try:
        return fn(context, freeze(job.rule.to_dict()))
    except TemplateError:
        raise
    except Exception as exc:  # a resolver bug fails the request, with its source named
        raise TemplateError(
            f"source {job.descriptor.id!r} failed for rule {job.rule.id!r}: {type(exc).__name__}: {exc}",
            code="ASSEMBLY_SOURCE_FAILED",
        ) from exc


#: the output key under which a source hands back the leases its blocks depend on
LEASES_KEY = "leases"


@dataclass(frozen=True, slots=True)
class HeldLeases:
    """The leases one job's output depends on, kept outside the (JSON) output and the record."""

    source_id: str
    rule_id: str
    items: tuple[Any, ...]


def _lease_items(value: Any, source_id: str) -> tuple[Any, ...]:
    """The lease objects under ``leases``: checked for shape now, so a bad one fails at its source."""
    from ..bridge.leases import LeaseSet, Resolution

    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for i, item in enumerate(items):
        if not (isinstance(item, (LeaseSet, Resolution)) or callable(getattr(item, "check_leases", None))
                or callable(item)):
            raise TemplateError(
                f"source {source_id!r} returned {type(item).__name__} under 'leases': expected a LeaseSet, a "
                "Resolution, an object with check_leases() (BridgeResult, TemplateExpansion) or a check_current "
                "callable",
                code="ASSEMBLY_SOURCE_INVALID",
                path=f"$.{LEASES_KEY}[{i}]" if isinstance(value, (list, tuple)) else f"$.{LEASES_KEY}",
            )
    return items


def take_leases(result: Any, job: Job) -> tuple[Any, HeldLeases | None]:
    """Split a resolver's result into its JSON output and the leases it holds (``None`` if none).

    The ``leases`` key may hold one lease or a list of them: a :class:`~tavernbox.bridge.LeaseSet`,
    a :class:`~tavernbox.bridge.Resolution` (its ``check_current``), anything with a
    ``check_leases(when)`` method (:class:`~tavernbox.bridge.BridgeResult`,
    :class:`~tavernbox.bridge.TemplateExpansion`) or a bare ``check_current`` callable. Leases are
    host objects, so they never reach output validation, the output caches or the replay record;
    the output a source returns with them is byte-identical to the one it returns without.
    """
    if not isinstance(result, Mapping) or LEASES_KEY not in result:
        return result, None
    output = {k: v for k, v in result.items() if k != LEASES_KEY}
    items = _lease_items(result[LEASES_KEY], job.descriptor.id)
    return output, HeldLeases(job.descriptor.id, job.rule.id, items) if items else None


def check_held_leases(held: list[HeldLeases]) -> None:
    """Re-check every lease handed back by the request's sources; raise on the first stale one.

    Runs synchronously once every source resolved (upstream ``validateResolved``): a source later
    in the job order may have changed the MVU state or revoked a permission an earlier source
    relied on. The error carries the lease's own code (``SOURCE_POLICY_CHANGED`` or
    ``SOURCE_CONTENT_CHANGED``); a ``check_leases`` that fails with anything but a
    ``TemplateError`` counts as a revoked permission, never as a pass.
    """
    if not held:
        return
    from ..bridge.leases import LeaseSet, Resolution

    for entry in held:
        when = f"after all sources resolved; held by source {entry.source_id!r}, rule {entry.rule_id!r}"
        for item in entry.items:
            if isinstance(item, LeaseSet):
                item.check(when)
            elif isinstance(item, Resolution):
                single = LeaseSet()
                single.add(item.id, item.check_current)
                single.check(when)
            elif callable(getattr(item, "check_leases", None)):
                try:
                    item.check_leases(when)
                except TemplateError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a failing check is a revoked permission
                    raise TemplateError(
                        f"a lease of source {entry.source_id!r} could not be checked ({when}): "
                        f"{type(exc).__name__}: {exc}",
                        code="SOURCE_POLICY_CHANGED",
                    ) from exc
            else:
                single = LeaseSet()
                single.add(f"a lease of source {entry.source_id!r}", item)
                single.check(when)


def _entry(job: Job, result: Any, preset: Preset) -> ResolvedEntry:
    output = validate_output(result, job.descriptor.id, job.descriptor.dependencies)
    index = next((i for i, r in enumerate(preset.rules) if r.id == job.rule.id), None)
    return ResolvedEntry(job.rule, job.descriptor, output, index)


def resolve_jobs(jobs: list[Job], context: Any, token: CancellationToken, preset: Preset) -> list[ResolvedEntry]:
    """Resolve the jobs in order, synchronously; an awaitable result is ``ASSEMBLY_SOURCE_ASYNC``.

    Each resolver is called as ``resolve(context, rule)``: ``context`` is the deep-frozen request
    context (its ``token`` entry is ``token``), ``rule`` a frozen copy of the rule's wire form.
    Leases handed back under ``leases`` are re-checked once all jobs resolved (:func:`check_held_leases`).
    """
    entries = []
    held: list[HeldLeases] = []
    for job in jobs:
        token.raise_if_cancelled()
        result = _call(job, context, token)
        if inspect.isawaitable(result):
            if hasattr(result, "close"):
                result.close()  # do not leave a never-awaited coroutine behind
            raise TemplateError(
                f"source {job.descriptor.id!r} is asynchronous: use assemble_async()", code="ASSEMBLY_SOURCE_ASYNC"
            )
        token.raise_if_cancelled()
        result, leases = take_leases(result, job)
        if leases is not None:
            held.append(leases)
        entries.append(_entry(job, result, preset))
    check_held_leases(held)
    return entries


async def resolve_jobs_async(
    jobs: list[Job], context: Any, token: CancellationToken, preset: Preset
) -> list[ResolvedEntry]:
    """Resolve the jobs strictly in order, awaiting asynchronous resolvers; leases as in :func:`resolve_jobs`."""
    entries = []
    held: list[HeldLeases] = []
    for job in jobs:
        token.raise_if_cancelled()
        result = _call(job, context, token)
        if inspect.isawaitable(result):
            try:
                result = await result
            except TemplateError:
                raise
            except Exception as exc:
                raise TemplateError(
                    f"source {job.descriptor.id!r} failed for rule {job.rule.id!r}: {type(exc).__name__}: {exc}",
                    code="ASSEMBLY_SOURCE_FAILED",
                ) from exc
        token.raise_if_cancelled()
        result, leases = take_leases(result, job)
        if leases is not None:
            held.append(leases)
        entries.append(_entry(job, result, preset))
    check_held_leases(held)
    return entries

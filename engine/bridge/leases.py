"""Leases: the proof, kept outside the VM, that an answer may still be used for this request.

Every answer the bridge gives a template comes from a :class:`Resolution`; its ``check_current``
says whether the content, the configuration and the permission it was granted under still hold.
The bridge re-checks every lease it holds before each new lookup, after each resolver call,
between the pending-job steps of a pass (after each await in the VM, asked by the worker over
its pipe), at the end of each pass, when the template completes, and once more when the caller
asks (after all sources of an assembly resolved, :meth:`LeaseSet.check`). A stale lease fails the
render with ``SOURCE_POLICY_CHANGED`` or ``SOURCE_CONTENT_CHANGED``; nothing falls back to a raw
read, and no lease object ever crosses into the sandbox (only ``content``, as JSON, does).

A stored asset (a library revision the service resolved a ``{"ref": ...}`` into) is held under an
:class:`AssetLease`, ``(kind, id, revision)``: current while the library still holds that
revision as the asset's newest (or, for a ref pinned with ``@rev``, while that revision is still
kept). The bridge never reads the library itself: the lease asks a ``probe`` the host passes
down. :class:`InputLeases` keeps such leases by the JSON path of the request they were read
into, so a source (the prompt-template source's ``getpreset``/``getchar``/``getwi``) can hold the
lease of exactly the asset a lookup answers from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import TemplateError

__all__ = [
    "AssetLease",
    "CheckCurrent",
    "InputLeases",
    "LeaseCheck",
    "LeaseError",
    "LeaseSet",
    "Resolution",
    "Revocable",
    "StaleLease",
    "lease_answer",
    "lease_state",
]

#: What ``check_current`` answers. ``True`` means ``"current"``; anything else (``False``, ``None``,
#: an exception) is stale: an omitted answer never counts as permission.
LeaseCheck = Literal["current", "policy_changed", "content_changed"]


@dataclass(frozen=True)
class StaleLease:
    """A stale answer that says what changed (``presets/p was read at revision 3; the library now holds 4``).

    Why: a bare ``"content_changed"`` cannot name the revisions involved, and a user whose render
    failed needs to know which asset moved and from where to where.
    """

    state: Literal["policy_changed", "content_changed"]
    detail: str


CheckCurrent = Callable[[], "LeaseCheck | StaleLease | bool | None"]

_CODES = {"policy_changed": "SOURCE_POLICY_CHANGED", "content_changed": "SOURCE_CONTENT_CHANGED"}


class LeaseError(TemplateError):
    """A lease is no longer current: the render (or assembly) must not use its output."""

    default_code = "SOURCE_POLICY_CHANGED"


@dataclass(frozen=True)
class Resolution:
    """A trusted answer to one lookup: host-only, never handed to the VM as such.

    ``id`` names the resource (``mvu:hero``, ``world-book:Lore``), ``adapter_id`` the source
    adapter that resolved it, ``content`` the JSON answer the template will see, ``revision`` its
    content revision (reported as what the render read), ``config_revision`` the revision of the
    policy/configuration it was allowed under, ``check_current`` the lease.
    """

    id: str
    adapter_id: str
    content: Any
    revision: str
    config_revision: str | None = None
    check_current: CheckCurrent | None = field(default=None, compare=False, repr=False)


def lease_answer(check: CheckCurrent | None) -> tuple[LeaseCheck, str | None]:
    """Ask one lease: its state and, when it said why it is stale, that detail.

    A missing lease, a raising one or an unclear answer is ``policy_changed``.
    """
    if check is None:
        return "policy_changed", None
    try:
        answer = check()
    except Exception:  # noqa: BLE001 - a failing check is a revoked permission, never a pass
        return "policy_changed", None
    if answer is True or answer == "current":
        return "current", None
    if isinstance(answer, StaleLease):
        state: LeaseCheck = "content_changed" if answer.state == "content_changed" else "policy_changed"
        return state, answer.detail
    if answer == "content_changed":
        return "content_changed", None
    return "policy_changed", None


def lease_state(check: CheckCurrent | None) -> LeaseCheck:
    """Ask one lease; a missing lease, a raising one or an unclear answer is ``policy_changed``."""
    return lease_answer(check)[0]


class Revocable:
    """A lease a source hands out and can revoke later (static files, tests, managers).

    ``check_current`` stays current until :meth:`revoke`; ``revoke("content_changed")`` models an
    edit of the resource, ``revoke()`` a withdrawn permission.
    """

    def __init__(self) -> None:
        self._state: LeaseCheck = "current"

    def revoke(self, reason: LeaseCheck = "policy_changed") -> None:
        """Make every check from now on answer ``reason``."""
        self._state = reason

    def check_current(self) -> LeaseCheck:
        return self._state


@dataclass
class _Held:
    label: str
    check: CheckCurrent | None


class LeaseSet:
    """The leases one render (or one assembly) holds, checked together."""

    def __init__(self) -> None:
        self._held: list[_Held] = []

    def add(self, label: str, check: CheckCurrent | None) -> None:
        """Hold a lease; ``label`` says in errors what it was for (``mvu:hero``, ``template scene``)."""
        self._held.append(_Held(label, check))

    def extend(self, other: LeaseSet) -> None:
        """Hold every lease of ``other`` too (an assembly collecting its templates' leases)."""
        self._held.extend(other._held)

    def __len__(self) -> int:
        return len(self._held)

    def check(self, when: str = "now") -> None:
        """Raise ``LeaseError`` (``SOURCE_POLICY_CHANGED``/``SOURCE_CONTENT_CHANGED``) for the first stale lease."""
        for held in self._held:
            state, detail = lease_answer(held.check)
            if state != "current":
                what = "changed" if state == "content_changed" else "is no longer permitted"
                why = f": {detail}" if detail else ""
                raise LeaseError(f"{held.label} {what} ({when}){why}; the render cannot use it", code=_CODES[state])


#: What an :class:`AssetLease` asks the host: ``(revision, digest)`` of what the library holds now
#: for the lease (the newest live revision; for a pinned lease, the pinned revision if still kept),
#: or ``None`` when there is none (deleted, never existed, not kept).
AssetProbe = Callable[[], "tuple[int, str | None] | None"]


@dataclass(frozen=True)
class AssetLease:
    """A lease on one revision of a stored asset: ``(kind, id, revision)`` (and the revision's digest).

    ``probe`` reads the library (the host's code: the bridge imports no store). An unpinned lease
    is current while that revision is still the asset's newest; a ``pinned`` one (a ref written
    ``kind/id@rev``) while that revision is still kept with the same digest. A stale lease answers
    ``content_changed`` naming the asset and both revisions; a probe that raises (the database is
    unreachable) is a stale lease too, never a pass.
    """

    kind: str
    id: str
    revision: int
    digest: str | None
    probe: AssetProbe = field(compare=False, repr=False)
    pinned: bool = False

    @property
    def name(self) -> str:
        """``kind/id@revision``, as a ref names it."""
        return f"{self.kind}/{self.id}@{self.revision}"

    def check_current(self) -> LeaseCheck | StaleLease:
        now = self.probe()
        if now is not None and now[0] == self.revision and now[1] == self.digest:
            return "current"
        where = f"{self.kind}/{self.id}"
        if self.pinned:
            detail = (f"{where} was read at pinned revision {self.revision}, which the library no longer holds"
                      if now is None else f"{where} revision {self.revision} no longer has the digest it was read with")
        elif now is None:
            detail = f"{where} was read at revision {self.revision}; the library now holds no live revision"
        elif now[0] == self.revision:
            detail = f"{where} revision {self.revision} no longer has the digest it was read with"
        else:
            detail = f"{where} was read at revision {self.revision}; the library now holds revision {now[0]}"
        return StaleLease("content_changed", detail)


@dataclass(frozen=True)
class _PathLease:
    path: str
    label: str
    check: CheckCurrent


def _under(path: str, ancestor: str) -> bool:
    """``path`` is ``ancestor`` or inside it (``$.a`` holds ``$.a.b`` and ``$.a[0]``, not ``$.ab``)."""
    return path == ancestor or (path.startswith(ancestor) and path[len(ancestor)] in ".[")


class InputLeases:
    """Leases on a request's inputs, each kept under the JSON path its content was read into.

    The service adds one :class:`AssetLease` per library ref it resolved (path ``$.assets.st_preset``,
    ``$.card``...). The whole set guards the result (:meth:`check` before anything is committed);
    :meth:`covering` gives the leases of one input, for a source whose lookups answer from it.
    ``refresh`` (optional) is called before :meth:`check` with ``fresh=True``: a host that caches
    its probes between the bridge's frequent mid-render checks reads the library anew there (and
    an error it raises, a database that cannot be read, propagates as it is).
    """

    def __init__(self, refresh: Callable[[], None] | None = None) -> None:
        self._items: list[_PathLease] = []
        self._refresh = refresh

    def add(self, path: str, label: str, check: CheckCurrent) -> None:
        """Hold ``check`` for the input at JSON ``path``; ``label`` names it in errors (``presets/p@3``)."""
        self._items.append(_PathLease(path, label, check))

    def __len__(self) -> int:
        return len(self._items)

    def covering(self, path: str) -> list[tuple[str, CheckCurrent]]:
        """``(label, check)`` of every lease on the input at ``path``: read into it, around it or inside it."""
        return [(i.label, i.check) for i in self._items if _under(path, i.path) or _under(i.path, path)]

    def lease_set(self) -> LeaseSet:
        """All the leases as a :class:`LeaseSet`."""
        held = LeaseSet()
        for item in self._items:
            held.add(item.label, item.check)
        return held

    def check(self, when: str = "now", *, fresh: bool = False) -> None:
        """Raise ``LeaseError`` for the first stale lease; ``fresh`` first drops any cached probe."""
        if fresh and self._refresh is not None:
            self._refresh()
        self.lease_set().check(when)

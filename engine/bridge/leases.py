"""Leases: the proof, kept outside the VM, that an answer may still be used for this request.

Every answer the bridge gives a template comes from a :class:`Resolution`; its ``check_current``
says whether the content, the configuration and the permission it was granted under still hold.
The bridge re-checks every lease it holds before each new lookup, after each resolver call,
between the pending-job steps of a pass (after each await in the VM, asked by the worker over
its pipe), at the end of each pass, when the template completes, and once more when the caller
asks (after all sources of an assembly resolved, :meth:`LeaseSet.check`). A stale lease fails the
render with ``SOURCE_POLICY_CHANGED`` or ``SOURCE_CONTENT_CHANGED``; nothing falls back to a raw
read, and no lease object ever crosses into the sandbox (only ``content``, as JSON, does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import TemplateError

__all__ = [
    "CheckCurrent",
    "LeaseCheck",
    "LeaseError",
    "LeaseSet",
    "Resolution",
    "Revocable",
    "lease_state",
]

#: What ``check_current`` answers. ``True`` means ``"current"``; anything else (``False``, ``None``,
#: an exception) is stale: an omitted answer never counts as permission.
LeaseCheck = Literal["current", "policy_changed", "content_changed"]
CheckCurrent = Callable[[], "LeaseCheck | bool | None"]

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


def lease_state(check: CheckCurrent | None) -> LeaseCheck:
    """Ask one lease; a missing lease, a raising one or an unclear answer is ``policy_changed``."""
    if check is None:
        return "policy_changed"
    try:
        answer = check()
    except Exception:  # noqa: BLE001 - a failing check is a revoked permission, never a pass
        return "policy_changed"
    if answer is True or answer == "current":
        return "current"
    if answer == "content_changed":
        return "content_changed"
    return "policy_changed"


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
            state = lease_state(held.check)
            if state != "current":
                what = "changed" if state == "content_changed" else "is no longer permitted"
                raise LeaseError(f"{held.label} {what} ({when}); the render cannot use it", code=_CODES[state])

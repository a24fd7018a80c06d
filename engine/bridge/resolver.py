"""What the VM may ask for, and the protocol of the trusted code that answers.

A lookup is a kind plus at most two string/number arguments; its canonical JSON text
(``["kind", arg, ...]``) is both the key of the VM's answers table and what a miss reports. The
kinds are fixed here: a request of any other shape is refused (``TEMPLATE_DEPENDENCY_INVALID``)
before any resolver sees it, so a hostile template cannot address anything but these reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import TemplateError
from .leases import Resolution

__all__ = ["KINDS", "DependencyResolver", "LookupRequest", "parse_request"]

#: kind -> number of arguments. ``variables``: the variables tree; ``worldbook-catalog [book]``:
#: ``[[book, uid, title], ...]`` of the books matching ``book`` ("" = all); ``worldbook-entry
#: [book, uid]``: the raw content of an entry activated for this request; ``preset-prompt
#: [name]``: a preset prompt's content by identifier or name ("" when none); ``character
#: [name]``: the current character's description ("" for another name).
KINDS: dict[str, int] = {
    "variables": 0,
    "worldbook-catalog": 1,
    "worldbook-entry": 2,
    "preset-prompt": 1,
    "character": 1,
}

#: Longest request text (the harness refuses longer keys before they cross).
MAX_REQUEST_CHARS = 4096


@dataclass(frozen=True, slots=True)
class LookupRequest:
    """One lookup: ``kind`` and its arguments (strings or numbers)."""

    kind: str
    args: tuple[str | int | float, ...] = ()

    @property
    def key(self) -> str:
        """The canonical JSON text, identical to the harness's key for the same request."""
        return json.dumps([self.kind, *self.args], ensure_ascii=False, separators=(",", ":"))


def parse_request(text: str) -> LookupRequest:
    """Check a pending request reported by the VM: known kind, right arity, plain arguments."""

    def invalid(why: str) -> TemplateError:
        return TemplateError(f"invalid dependency request: {why}", code="TEMPLATE_DEPENDENCY_INVALID")

    if len(text) > MAX_REQUEST_CHARS:
        raise invalid(f"{len(text)} characters, more than {MAX_REQUEST_CHARS}")
    try:
        value = json.loads(text)
    except ValueError:
        raise invalid("not JSON") from None
    if not isinstance(value, list) or not value or not isinstance(value[0], str):
        raise invalid("not [kind, ...args]")
    kind, args = value[0], value[1:]
    if kind not in KINDS:
        raise invalid(f"unknown kind {kind[:80]!r}")
    if len(args) != KINDS[kind]:
        raise invalid(f"{kind} takes {KINDS[kind]} argument(s), got {len(args)}")
    for arg in args:
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise invalid("arguments must be strings or numbers")
    return LookupRequest(kind, tuple(args))


@runtime_checkable
class DependencyResolver(Protocol):
    """Trusted code that answers lookups outside the VM.

    ``resolve`` returns a :class:`Resolution` whose ``content`` is JSON data and whose
    ``check_current`` is the lease, or raises ``TemplateError`` with a stable code
    (``TEMPLATE_DEPENDENCY_NOT_ACTIVE``, ``TEMPLATE_DEPENDENCY_DENIED``, ...). It never runs
    template code and is called between passes, never while a VM runs.
    """

    def resolve(self, request: LookupRequest) -> Resolution: ...

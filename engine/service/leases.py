"""Library revisions as leases: what a request read from the library must still be there when it commits.

A request may name stored assets (``{"ref": "presets/p"}``) instead of embedding them;
:func:`~.library.resolve_refs` reads each at its current revision (or at ``@rev``). From then on
the request holds one lease per ref, ``(kind, id, revision)``, an
:class:`~tavernbox.bridge.AssetLease` checked by the bridge's lease mechanism:

- by the bridge at its own check points while a template renders (``getpreset``, ``getchar``,
  ``getwi`` and ``getvar`` over MVU answer from stored assets hold their leases; so does a
  template read from the library);
- by the assembler after every source resolved and right before a session's snapshots are saved;
- by the service right before it commits a result: before a record is stored, before the
  answer is sent, before a chat completion is forwarded upstream, and when a stored record is
  replayed.

An unpinned lease is current while its revision is still the asset's newest; a pinned one
(``kind/id@rev``) while that revision is still kept with its digest. A stale lease fails the
request with ``SOURCE_CONTENT_CHANGED`` naming the asset and both revisions, and nothing is
stored; the request is never retried against the newer content.

Why the probes are cached: the bridge asks its leases after every pending-job step of a pass
(up to thousands per render), and each ask here is a database read. Between two reads of the
library at most :data:`MAX_AGE_S` pass; a check that guards a commit always reads anew
(``InputLeases.check(fresh=True)``), so the cache can delay an early failure, never let a stale
result through.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..bridge import AssetLease, InputLeases
from ..errors import TemplateError
from ..store import AssetLibrary

__all__ = ["MAX_AGE_S", "LibraryLeases", "recorded_refs"]

#: The longest a library read answers the bridge's mid-render lease checks (seconds).
MAX_AGE_S = 0.02


class LibraryLeases:
    """The leases one request holds on the library revisions it resolved refs into.

    ``refs`` are :func:`~.library.resolve_refs` items (``ref``, ``kind``, ``id``, ``revision``,
    ``digest``, ``path``); a ref whose text names ``@rev`` is pinned. ``pinned_all`` pins every
    lease (a replay against the recorded revisions). ``leases`` is the
    :class:`~tavernbox.bridge.InputLeases` to hand to the assembler or a render.
    """

    def __init__(self, library: AssetLibrary, refs: Sequence[dict[str, Any]], *, pinned_all: bool = False) -> None:
        self.library = library
        self._lock = threading.Lock()
        self._answers: list[tuple[int, str | None] | None] | None = None
        self._read_at = 0.0
        #: how many times the library was read for these leases (one batched read each)
        self.reads = 0
        self._items: list[tuple[str, str, int | None]] = []
        self.leases = InputLeases(refresh=self.refresh)
        for index, ref in enumerate(refs):
            pinned = pinned_all or "@" in str(ref.get("ref", ""))
            self._items.append((ref["kind"], ref["id"], ref["revision"] if pinned else None))
            lease = AssetLease(ref["kind"], ref["id"], ref["revision"], ref.get("digest"),
                               probe=partial(self._probe, index), pinned=pinned)
            self.leases.add(ref.get("path") or "$", lease.name, lease.check_current)

    def __len__(self) -> int:
        return len(self._items)

    def refresh(self) -> None:
        """Read the library now (the commit checks do, through ``InputLeases.check(fresh=True)``).

        Called outside the lease itself, so a database failure surfaces with the store's own code
        (``SNAPSHOT_STORE_UNAVAILABLE``...) rather than as a revoked lease.
        """
        if not self._items:
            return
        with self._lock:
            self._answers = self.library.heads(self._items)
            self._read_at = time.monotonic()
            self.reads += 1

    def _probe(self, index: int) -> tuple[int, str | None] | None:
        with self._lock:
            now = time.monotonic()
            if self._answers is None or now - self._read_at > MAX_AGE_S:
                self._answers = self.library.heads(self._items)
                self._read_at = now
                self.reads += 1
            return self._answers[index]

    def check(self, when: str) -> None:
        """Read the library anew and raise ``SOURCE_CONTENT_CHANGED`` if an asset moved on (the commit check)."""
        if self._items:
            self.leases.check(when, fresh=True)


def recorded_refs(value: Any, path: str) -> list[dict[str, Any]]:
    """The revisions a stored record (or an assemble answer) names under ``refs``, checked for shape.

    Why checked: a client may post an answer back to ``/v1/replay``; its ``refs`` then become
    leases, so each must name a library kind, an id and a revision.
    """
    from .library import MAX_REFS, _parse_ref

    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_REFS:
        raise TemplateError(f"'refs' must be a list of at most {MAX_REFS} refs", code="SERVICE_REQUEST_INVALID",
                            path=path)
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        revision = item.get("revision") if isinstance(item, dict) else None
        digest = item.get("digest") if isinstance(item, dict) else None
        if not isinstance(item, dict) or isinstance(revision, bool) or not isinstance(revision, int) or revision < 1 \
                or not (digest is None or isinstance(digest, str)):
            raise TemplateError("a recorded ref is {ref, kind, id, revision, digest, path}",
                                code="SERVICE_REQUEST_INVALID", path=where)
        kind, asset_id, _ = _parse_ref(f"{item.get('kind')}/{item.get('id')}", where)
        out.append({"ref": item.get("ref") if isinstance(item.get("ref"), str) else f"{kind}/{asset_id}",
                    "kind": kind, "id": asset_id, "revision": revision, "digest": digest,
                    "path": item.get("path") if isinstance(item.get("path"), str) else "$"})
    return out

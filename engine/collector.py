"""Pausing the cyclic garbage collector while large acyclic structures are built.

World-info normalisation and indexing, an assembly and its span provenance each allocate tens of
thousands of small containers that stay alive; shared by those stages, so it lives on its own.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["bulk_allocation"]


@contextlib.contextmanager
def bulk_allocation() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large acyclic structure is built.

    Normalising a book, indexing its keys or assembling a request allocates tens of thousands of small dicts, tuples and
    lists that all stay alive; every allocation burst triggers a collection that walks every live
    object again, which more than doubles the build time of a 10,000-entry book. Nothing built
    under this forms a cycle, so pausing is safe; the previous state is restored (so nesting is fine).
    Cyclic garbage made meanwhile by other code (a macro hook) is collected by a later full collection.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:
                # what was built joins the oldest generation directly: re-enabling would otherwise
                # start with a young collection walking all of it (as long as the build took).
                # Skipped when the application froze objects itself (fork servers), so its frozen
                # set is never disturbed.
                gc.freeze()
                gc.unfreeze()
            gc.enable()

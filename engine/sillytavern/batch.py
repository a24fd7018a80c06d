"""Many requests in one process: :func:`assemble_requests` (and ``tavernbox assemble --jsonl``, issue 11).

A cold process pays its imports, the tokenizer and the grammars once; a user with many requests keeps one process
warm and sends them through it. Each request is computed fresh (nothing of one answer is reused for the next); what
stays warm is what any warm process keeps: the parsed assets by file identity or content, the compiled macro plans,
the tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import TemplateError
from .assemble import StAssembly, assemble_request
from .request import StRequest

__all__ = ["assemble_requests"]


def assemble_requests(requests: Iterable[Mapping[str, Any] | StRequest], *,
                      base_dir: str | Path | None = None) -> Iterator[StAssembly | TemplateError]:
    """Assemble each request in turn, in this process, yielding its :class:`StAssembly` or the ``TemplateError``
    that refused it (one bad request does not end the batch). ``base_dir`` is what relative asset paths are
    relative to, as for :func:`assemble_request`. The requests are read lazily: a generator of a million works."""
    for request in requests:
        try:
            yield assemble_request(request, base_dir=base_dir)
        except TemplateError as exc:
            yield exc

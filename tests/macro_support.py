"""Helpers shared by the macro engine's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tavernbox.macros import evaluator


@contextmanager
def plans(enabled: bool) -> Iterator[None]:
    """Compiled level plans on or off (``evaluator.USE_PLANS``) inside the block, restored after.

    With plans off, a template runs through the general evaluator only: the reference the plan
    tests compare against.
    """
    saved = evaluator.USE_PLANS
    evaluator.USE_PLANS = enabled
    try:
        yield
    finally:
        evaluator.USE_PLANS = saved

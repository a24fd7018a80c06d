"""Helpers shared by the macro engine's tests."""

from __future__ import annotations

from typing import Any

from tavernbox.shortcuts import Shortcuts

#: compiled level plans off: a template runs through the general evaluator only (the reference the
#: plan tests compare against); passed to ``expand`` by name, so tests may run in threads
NO_PLANS = Shortcuts(plans=False)
#: every argument and body re-parsed from its text, in every render (the reference of the tests of
#: parse reuse and of compiled templates' caches)
NO_REUSE = Shortcuts(reuse_parse=False)
#: the whole-document parser only (the reference of the region-by-region parse)
NO_REGIONS = Shortcuts(regions=False)


def level_plans(template: Any, depth: int | None = None) -> list[Any]:
    """The level plans a compiled template has built so far (at ``depth``, or at any depth)."""
    return [
        memo.plan
        for level in template._levels.values()
        for at, memo in level.depths.items()
        if memo.plan is not None and (depth is None or at == depth)
    ]

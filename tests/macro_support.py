"""Helpers shared by the macro engine's tests."""

from __future__ import annotations

from tavernbox.shortcuts import Shortcuts

#: compiled level plans off: a template runs through the general evaluator only (the reference the
#: plan tests compare against); passed to ``expand`` by name, so tests may run in threads
NO_PLANS = Shortcuts(plans=False)
#: every argument and body re-parsed from its text, in every render (the reference of the tests of
#: parse reuse and of compiled templates' caches)
NO_REUSE = Shortcuts(reuse_parse=False)
#: the whole-document parser only (the reference of the region-by-region parse)
NO_REGIONS = Shortcuts(regions=False)

"""``tavernbox lint``: static checks of presets, cards, world books, templates and MVU files.

Nothing is rendered: the checks read the assets with the engine's own parsers (macro parser and
pairing rule, EJS compiler plus a QuickJS compile, world-info normaliser and regex translator,
asset importers) and its catalogue. ``lint_files`` runs them over an asset set; ``report``
formats the findings (rich text, JSON, SARIF 2.1.0). Every code is in :data:`LINT_CODES`
and ``docs/LINT.md``. ``cache_report`` (``tavernbox cache-report``) is the prompt-cache stability
report: it assembles consecutive turns (so this package sits beside ``strategies``, never below it).
"""

from __future__ import annotations

from .codes import LINT_CODES, LintCode
from .model import Finding, LintReport
from .prefix_cache import CacheReport, cache_report
from .run import lint_files

__all__ = ["LINT_CODES", "CacheReport", "Finding", "LintCode", "LintReport", "cache_report", "lint_files"]

"""Which performance shortcuts a call may take, passed by name: :class:`Shortcuts`.

Every shortcut gives exactly what a plain path gives (ARCHITECTURE's table of shortcuts names the
test that proves each). A call takes them all by default; :data:`PLAIN` switches them all off and
runs the reference path, and a test comparing one shortcut with its plain path switches off that
one (``Shortcuts(plans=False)``, ``Shortcuts(wi_incremental=False)``). The value travels with the
call, so two threads may run with different shortcuts at once (no module global to patch).

The macro engine's fields (``plans``, ``reuse_parse``, ``regions``) reach ``expand_macros``,
``CompiledMacros`` and ``RenderState``; world info's (``wi_*``) reach ``activate_world_info``,
``ActivationOptions``, the activation loop, the key matcher and the raw-book cache; ST-Prompt-Template's
(``pt_*``) reach ``evaluate_prompt_templates``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "PLAIN", "Shortcuts"]


@dataclass(frozen=True, slots=True)
class Shortcuts:
    """The shortcuts a call may take; each field off runs the plain path it must equal."""

    #: macros: a level evaluated again runs from its plan of literals and pre-bound calls, kept
    #: outputs included (``macros/plan.py``); off: ``RenderState.evaluate`` item by item
    plans: bool = True
    #: macros: arguments and bodies are evaluated from their parent's parse, and a compiled
    #: template keeps its sub-parses and pairings between renders; off: every argument and body
    #: is re-parsed from its text, as SillyTavern does, in every render
    reuse_parse: bool = True
    #: macros: a text is parsed region by region (a simple macro read off one regex match, a
    #: malformed region recovered on its own, ``macros/parser.py``); off: the whole-document
    #: lexer and parser
    regions: bool = True
    #: world info: a recursion pass re-decides only the entries whose answer can have changed
    #: (``worldinfo/activation.py``, ``_Run.changed_entries``), and the first pass looks only at
    #: entries that can be candidates; off: every pass looks at every entry
    wi_incremental: bool = True
    #: world info: the entries the first pass never looked at get its "no match" decision directly
    #: (``_Run.resolve_pending``); off: each goes through ``_Run.consider``
    wi_fast_pending: bool = True
    #: world info: an entry with regex keys whose keys provably still answer as before keeps its
    #: decision (``_Run.settle_regex_entries``); off: it is looked at again in every pass
    wi_settled_regex: bool = True
    #: world info: a raw book argument is looked up in the cache by the digest of ``marshal``'s
    #: current encoding before version 2's (``_normalized_books``); off: the version-2 digest alone
    wi_quick_digest: bool = True
    #: world info: a regex key that begins with its required literal is tried only where the
    #: literal occurs (``worldinfo/matching.py``, ``KeyMatcher._anchors``); off: the search from the
    #: literal's first place to the end of the text
    wi_anchored_regex: bool = True
    #: ST-Prompt-Template at generation: a template whose text an earlier request of the same sandbox
    #: worker compiled is loaded from that worker's bytecode (``sandbox/worker.py``, ``TemplateCache``);
    #: off: the request's VM compiles every template it runs (``(0, eval)``)
    pt_bytecode: bool = True
    #: world info: a pass whose candidates no rule of ``_Run.admit`` can refuse (no probability, words
    #: counted as running sums, the pass's total below the budget) admits them all at once
    #: (``_Run.admit_in_bulk``); off: each through ``_Run.admit``
    wi_bulk_admit: bool = True
    #: world info: an entry whose keys (primary, and secondary when they count) are all word keys of
    #: the index, with no rule before them, is decided in the pass's loop from the word-run maps
    #: (``_Run.candidates_by_words``); off: each through ``_Run.consider``
    wi_word_candidates: bool = True
    #: world info: a plain key the index files by window (not a single word) is searched for in a text
    #: only when every window of its word runs occurs among the text's (``worldinfo/matching.py``,
    #: ``key_windows``); off: every key of a bucket whose window occurs is searched for
    wi_key_windows: bool = True
    #: world info: a regex key's required literal whose first ``GRAM`` characters are word characters
    #: is not searched for in a text whose word runs' windows (kept for the chat, the extra sources and
    #: each recursion piece) lack them (``worldinfo/matching.py``, ``KeyMatcher._literal_absent``); off:
    #: it is searched for
    wi_literal_windows: bool = True


#: every shortcut (what a call takes when it names none)
DEFAULT = Shortcuts()
#: no shortcut: the reference path
PLAIN = Shortcuts(plans=False, reuse_parse=False, regions=False, wi_incremental=False, wi_fast_pending=False,
                  wi_settled_regex=False, wi_quick_digest=False, wi_anchored_regex=False,
                  wi_bulk_admit=False, wi_word_candidates=False, wi_key_windows=False, wi_literal_windows=False,
                  pt_bytecode=False)

"""Text -> frozen macro nodes, with SillyTavern 1.18's tolerance for malformed macros.

The document parser: :func:`document_parse` (and :func:`document_items`, :func:`parse_macros`)
turn a text into its top-level items, in four stages, one module each:

* :mod:`.lexer` produces SillyTavern's token stream: a contextual (mode-stack) lexer whose modes
  are the lexing contexts of SillyTavern's Chevrotain lexer, including the characters it drops.
* :mod:`.lalr` parses those tokens with the LALR(1) table Lark builds from
  ``grammars/macros.lark``, driven by a tight shift/reduce loop that builds frozen nodes
  (:mod:`.nodes`) on each reduction (offsets come from the tokens; no tree, no recursion).
* :mod:`.recovery`: a token stream the grammar rejects holds a malformed macro, parsed as
  SillyTavern's parser recovers it (its recovered fragments are visible text).
* :mod:`.regions`: the shortcut, a text parsed one top-level region at a time (plain text and
  simple macros read off one regex match each; other regions lexed and parsed on their own),
  giving the items of the whole-document path (``Shortcuts(regions=False)``).

:func:`document_items` flattens what did not parse completely into text spans, keeping the
complete macros nested inside it (SillyTavern's walker does the same).
"""

from __future__ import annotations

from ..errors import Diagnostic
from ..shortcuts import DEFAULT, Shortcuts
from ..spans import Span
from .lalr import lalr_items, validate_macro
from .lexer import tokenize_limited
from .nodes import ArgNode, MacroNode, Plain, VarNode
from .recovery import _Parser, _flattened
from .regions import _add_range, _coalesced, _put_items, _region_prefix

__all__ = [
    "MAX_NESTING",
    "ArgNode",
    "MacroNode",
    "Plain",
    "VarNode",
    "document_items",
    "document_parse",
    "parse_macros",
    "validate_macro",
]

#: Brace nesting deeper than this is left as written (``MACRO_NESTING_LIMIT``).
MAX_NESTING = 64


def document_items(
    text: str, lo: int = 0, hi: int | None = None, max_nesting: int = MAX_NESTING, *, shortcuts: Shortcuts = DEFAULT
) -> tuple[list, list[Diagnostic], bool]:
    """The top-level items of ``text[lo:hi]`` in order: :class:`Plain` spans and complete macros.

    Incomplete macros are flattened; tokens no rule accepted are not items (the caller copies
    the gaps between items verbatim, as SillyTavern does). Offsets are absolute in ``text``.
    The flag is true when nothing needed recovery (then argument items can be trusted).
    """
    items, diagnostics, clean, _untrusted = document_parse(text, lo, hi, max_nesting, shortcuts=shortcuts)
    return items, diagnostics, clean


def document_parse(
    text: str, lo: int = 0, hi: int | None = None, max_nesting: int = MAX_NESTING, *, shortcuts: Shortcuts = DEFAULT
) -> tuple[list, list[Diagnostic], bool, tuple[tuple[int, int], ...]]:
    """:func:`document_items`, and the ranges of ``text`` where the parse needed recovery.

    Outside those ranges the items are what a parse of any span made of whole items finds (the
    lexer and the parser are at the start of a document item between two top-level items), so
    the evaluator can hand a scoped macro's body its items instead of re-parsing its text. The
    ranges are the regions recovered on their own and, when the whole-document path ran and
    needed recovery (or cut too-deep regions out), everything from where it started; empty
    when the flag is true. ``shortcuts.regions`` off: the whole-document path only (the
    region-by-region parse must equal it).
    """
    if hi is None:
        hi = len(text)
    prefix: list = []
    rejected = False
    recovered: list[tuple[int, int]] = []
    if shortcuts.regions:
        prefix, stop, rejected = _region_prefix(text, lo, hi, max_nesting, recovered)
        if stop == hi:
            return prefix, [], not recovered, tuple(recovered)
        lo = stop  # the prefix is the whole-document parse up to there (see _region_prefix)
    lex_errors: list[int] = []
    if rejected:
        # the rejected region was lexed completely (no dropped character, within the nesting
        # limit) and the lexer is back in plain text after it: its tokens are the ones
        # ``tokenize_limited`` would make first, so lexing resumes at its end
        head, resume = rejected  # type: ignore[misc]
        toks, holes = tokenize_limited(text, resume, hi, lex_errors, max_nesting)
        toks = head + toks
    else:
        toks, holes = tokenize_limited(text, lo, hi, lex_errors, max_nesting)
    diagnostics: list[Diagnostic] = []
    for start, end in holes:
        diagnostics.append(
            Diagnostic(
                "MACRO_NESTING_LIMIT",
                f"macros nested deeper than {max_nesting} levels; left as written",
                Span(start, end),
            )
        )
    # a dropped character: the fallback builds the nodes, and an argument holding one keeps no
    # items (its text re-lexed on its own may not drop it), so the evaluator re-parses it
    lalr = None if (rejected and not holes) or lex_errors else lalr_items(text, toks)
    if lalr is not None:  # well-formed: the LALR grammar's parse
        raw_items = lalr
        clean = not holes
    else:  # a malformed macro somewhere: SillyTavern's recovery decides what stays text
        parser = _Parser(text, toks, hi, lex_errors)
        raw_items = parser.document()
        clean = parser.anomalies == 0 and not lex_errors and not holes
    items = _flattened(raw_items)
    for start, end in holes:
        items.append(Plain(start, end))
    if holes or not clean:
        before = items[:]
        items.sort(key=lambda i: (i.start, i.end))
        if holes or items != before:
            items = _coalesced(items)  # text that met only once in order
        _add_range(recovered, lo, hi)
    clean = not recovered  # nothing here needed recovery, nor did a region before
    if prefix:
        _put_items(prefix, items)
        return prefix, diagnostics, clean, tuple(recovered)
    return items, diagnostics, clean, tuple(recovered)


def parse_macros(text: str) -> tuple[Plain | MacroNode, ...]:
    """The top-level items of ``text``: verbatim spans and complete macros, with offsets."""
    return tuple(document_items(text)[0])



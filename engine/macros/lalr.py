"""The LALR path of the macro parser: Lark's LALR(1) table for ``grammars/macros.lark``, driven over
the mode lexer's tokens.

Lark compiles the grammar into its parse table (stored as data in :mod:`.lalr_table` with the
grammar's digest); :func:`lalr_items` drives that table with Lark's own shift/reduce algorithm,
building frozen nodes on each reduction: no tree, no recursion. ``None`` means the grammar
rejects the stream (a malformed macro: the recovering parser, :mod:`.recovery`, takes over).
"""

from __future__ import annotations

import threading
from functools import lru_cache
from importlib import resources

from .budget import CHECK_CHARS, check
from .lexer import T, Tok, tokenize
from .nodes import ArgNode, MacroNode, Plain, VarNode, _macro_node, _plain

# ---- the LALR path (grammars/macros.lark) --------------------------------------------------
#
# Lark compiles the grammar into its LALR(1) parse table; the loop below drives that table over
# the mode lexer's tokens. It is Lark's own shift/reduce algorithm without its per-token
# ``Token`` objects and tree callbacks (the table is the parser; those wrappers tripled the
# cost), and it builds our frozen nodes directly on each reduction: no tree, no recursion.

_TYPE_NAMES = {value: name for name, value in vars(T).items() if isinstance(value, int) and name != "EOF"}


class _Splice(list):
    """Children of an inlined helper rule (``_item``, ``__arg_star_0``...), spliced into the parent."""


def _children(values: list) -> list:
    out: list = []
    for v in values:
        if type(v) is _Splice:
            out.extend(v)
        else:
            out.append(v)
    return out


def _span(items: list) -> tuple[int, int] | None:
    if not items:
        return None
    return (items[0][1] if type(items[0]) is Tok else items[0].start, items[-1][2] if type(items[-1]) is Tok else items[-1].end)


class _Reducer:
    """One parse's reduction actions (they need the text for names and glued braces)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def _arg(self, items: list) -> ArgNode:
        span = _span(items)
        if span is None:
            return ArgNode(None, ())
        text = self.text
        out: list = []
        cursor = span[0]
        for part in items:
            if type(part) is MacroNode:
                if part.start > span[0] and text[part.start - 1] == "{":
                    return ArgNode(span, None)
                if part.start > cursor:
                    out.append(_plain(cursor, part.start))
                out.append(part)
                cursor = part.end
        if cursor < span[1]:
            out.append(_plain(cursor, span[1]))
        return ArgNode(span, tuple(out))

    def start(self, c: list) -> list:
        return _children(c)

    def text_(self, c: list) -> Plain:
        return _plain(c[0][1], c[0][2])

    def flags(self, c: list) -> str:
        text = self.text
        return "".join(text[t[1] : t[2]] for t in _children(c))

    def seq(self, c: list) -> list:
        return _children(c)

    def args_dcolon(self, c: list) -> list[ArgNode]:
        return [self._arg(part) for part in _children(c) if type(part) is list]

    def args_colon(self, c: list) -> list[ArgNode]:
        return [self._arg(c[1])]

    def args_space(self, c: list) -> list[ArgNode]:
        return [self._arg(_children(c))]

    def name_only(self, c: list) -> tuple:
        return (self.text[c[0][1] : c[0][2]], [], None)

    def name_args(self, c: list) -> tuple:
        return (self.text[c[0][1] : c[0][2]], c[1], None)

    def _var(self, c: list, op: str | None, value: list | None) -> tuple:
        text = self.text
        scope = text[c[0][1] : c[0][2]]
        name = text[c[1][1] : c[1][2]]
        if value is None:
            return ("", [], VarNode(scope, name, op, None, ()))
        macros = tuple(v for v in value if type(v) is MacroNode)
        return ("", [], VarNode(scope, name, op, _span(value), macros))

    def var_get(self, c: list) -> tuple:
        return self._var(c, None, None)

    def var_step(self, c: list) -> tuple:
        return self._var(c, self.text[c[2][1] : c[2][2]], None)

    def var_op(self, c: list) -> tuple:
        return self._var(c, self.text[c[2][1] : c[2][2]], c[3])

    def macro(self, c: list) -> MacroNode:
        start_tok, flags, body, end_tok = c
        name, args, var = body
        return _macro_node(start_tok[1], end_tok[2], flags, name, tuple(args), var)


_RULE_ACTIONS = {
    "start": "start",
    "text": "text_",
    "macro": "macro",
    "flags": "flags",
    "arg": "seq",
    "argc": "seq",
    "value": "seq",
    "args_dcolon": "args_dcolon",
    "args_colon": "args_colon",
    "args_space": "args_space",
    "name_only": "name_only",
    "name_args": "name_args",
    "var_get": "var_get",
    "var_step": "var_step",
    "var_op": "var_op",
}


@lru_cache(maxsize=1)
def _table() -> tuple:
    """Lark's LALR(1) table for ``grammars/macros.lark``, keyed by our token ints.

    Each state maps a token type (``-1`` for end of input) or a rule name (for gotos) to
    ``(is_shift, next state or rule number)``; rule number -> ``(action name, size, rule name)``.

    Building it with Lark costs a fresh process about as much as a whole warm assembly, so the
    table Lark builds is kept in :mod:`.lalr_table` with the digest of the grammar it came from;
    when the grammar file no longer has that digest, Lark builds it here as before (a test keeps
    the stored table equal to Lark's).
    """
    import hashlib

    grammar = (resources.files("tavernbox.grammars") / "macros.lark").read_text(encoding="utf-8")
    from . import lalr_table

    if lalr_table.GRAMMAR_DIGEST == hashlib.sha256(grammar.encode("utf-8")).hexdigest():
        return lalr_table.TABLE
    return build_table(grammar)


def build_table(grammar: str) -> tuple:
    """:func:`_table` computed by Lark from the grammar's text."""
    from lark import Lark
    from lark.parsers.lalr_analysis import Shift

    lark = Lark(grammar, parser="lalr", lexer="basic")
    parse_table = lark.parser.parser.parser.parse_table
    ints = {name: value for value, name in _TYPE_NAMES.items()}
    ints["$END"] = -1
    states: dict = {}
    rule_ids: dict = {}
    rules: list = []
    for number, row in parse_table.states.items():
        out: dict = {}
        for key, (action, arg) in row.items():
            # plain ints/strs as keys and rule numbers as values: Lark's Token and Rule objects
            # hash and compare in Python, which dominated the loop
            plain_key = ints.get(key, str(key))
            if action is Shift:
                out[plain_key] = (True, arg)
                continue
            if arg not in rule_ids:
                rule_ids[arg] = len(rules)
                name = arg.alias or arg.origin.name
                if name.startswith("_"):
                    act = None  # an inlined helper rule: splice its children into the parent
                elif arg.options.expand1:
                    act = ""  # a ?rule with one child passes it through
                else:
                    act = _RULE_ACTIONS[name]
                rules.append((act, len(arg.expansion), str(arg.origin.name)))
            out[plain_key] = (False, rule_ids[arg])
        states[number] = out
    return states, parse_table.start_states["start"], parse_table.end_states["start"], rules


#: reduction kinds of the driver
_SPLICE, _PASS, _CALL = 0, 1, 2


@lru_cache(maxsize=1)
def _driver_table() -> tuple:
    """:func:`_table` in the shape the driver loop reads fastest.

    ``actions[state]`` maps a token type (``-1``: end of input) to an int: ``>= 0`` shifts to
    that state, ``-1 - r`` reduces by rule ``r``. ``rules[r]`` is ``(kind, action name, size,
    goto)`` with ``goto`` the state -> next state map of the rule's origin, so a reduction does
    not look the origin up in the uncovered state's row.
    """
    states, start_state, end_state, rules = _table()
    actions: list[dict[int, int]] = [{} for _ in range(max(states) + 1)]
    for number, row in states.items():
        actions[number] = {
            key: (arg if is_shift else -1 - arg) for key, (is_shift, arg) in row.items() if type(key) is int
        }
    compiled = []
    for act, size, origin in rules:
        goto = {number: row[origin][1] for number, row in states.items() if origin in row}
        kind = _SPLICE if act is None else (_PASS if act == "" else _CALL)
        compiled.append((kind, act, size, goto))
    return actions, start_state, end_state, compiled


class _Local(threading.local):
    """A per-thread reducer with its bound actions (the driver loop is not re-entrant)."""

    def __init__(self) -> None:
        _, _, _, rules = _driver_table()
        self.reducer = _Reducer("")
        self.rules = [
            (kind, getattr(self.reducer, act) if kind == _CALL else None, size, goto) for kind, act, size, goto in rules
        ]


_local: _Local | None = None


def lalr_items(text: str, toks: list[Tok]) -> list | None:
    """Parse a token stream with the LALR grammar; ``None`` when it holds a malformed macro.

    Lark's shift/reduce algorithm over its own table. Helper rules (``_item``, ``__x_star_n``)
    splice their children into the parent; a one-child helper passes the child up as is
    (every consumer treats a lone child and a one-element splice alike), which saves a list
    per document item.
    """
    global _local
    actions, state, end_state, _ = _driver_table()
    if _local is None:
        _local = _Local()
    local = _local
    local.reducer.text = text
    rules = local.rules
    state_stack = [state]
    push_state = state_stack.append
    value_stack: list = []
    push_value = value_stack.append
    n = len(toks)
    i = 0
    tok = toks[0] if n else None
    key = tok[0] if n else -1
    check_at = (tok[1] if n else 0) + CHECK_CHARS  # type: ignore[index]
    while True:
        act = actions[state].get(key)
        if act is None:
            return None
        if act >= 0:  # shift
            if key >= 0 and tok[1] >= check_at:  # type: ignore[index]
                check_at = tok[1] + CHECK_CHARS  # type: ignore[index]
                check(tok[1], text)  # type: ignore[index]  # the render's CPU budget (see .budget)
            state = act
            push_state(state)
            push_value(tok)
            i += 1
            if i < n:
                tok = toks[i]
                key = tok[0]
            else:
                tok = None
                key = -1
            continue
        kind, fn, size, goto = rules[-1 - act]
        if kind == _SPLICE:
            if size == 1:
                value = value_stack[-1]  # passes up as is (a splice stays one)
                del state_stack[-1]
            elif size == 0:
                value = _Splice()
                push_value(value)
            else:
                children = value_stack[-size:]
                del value_stack[-size:]
                del state_stack[-size:]
                first = children[0]
                if type(first) is _Splice:
                    value = first
                else:
                    value = _Splice()
                    value.append(first)
                for child in children[1:]:
                    if type(child) is _Splice:
                        value.extend(child)
                    else:
                        value.append(child)
                push_value(value)
        elif kind == _PASS:
            del state_stack[-1]  # the single child stays on the value stack
        else:
            if size:
                children = value_stack[-size:]
                del value_stack[-size:]
                del state_stack[-size:]
                push_value(fn(children))
            else:
                push_value(fn([]))
        state = goto[state_stack[-1]]
        push_state(state)
        if key == -1 and state == end_state:
            return value_stack[-1]


def validate_macro(source: str) -> bool:
    """Whether ``source`` is exactly one well-formed macro by the LALR grammar."""
    toks = tokenize(source)
    items = lalr_items(source, toks)
    return items is not None and len(items) == 1 and isinstance(items[0], MacroNode)


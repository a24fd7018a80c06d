"""Bytes to text to data, with every repair reported.

Real asset files are messier than their formats: one shared preset is Windows-1252, some files start
with a UTF-8 byte-order mark, and some carry raw control characters inside JSON strings (emoji lost in
a bad save). SillyTavern either chokes on these or silently accepts them depending on the code path; we
accept what can be read unambiguously and say so in a diagnostic, so the user knows the file was
repaired rather than read as written. JSON errors are reported at a line and column, because a 1.8 MB
single-line card is unreadable without one.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

from ..errors import Diagnostic, TemplateError
from ..spans import Span, line_col
from ..strict_json import check_json_text, join_pairs, loads, refuse_non_finite, refuse_surrogates

__all__ = [
    "DecodedText",
    "decode_bytes",
    "parse_json_text",
    "parse_json5_text",
    "parse_yaml_text",
    "MAX_SAFE_INTEGER",
    "unsafe_number",
]

#: JavaScript's largest exactly representable integer; bigger numbers change meaning in SillyTavern.
MAX_SAFE_INTEGER = 2**53 - 1

_BOM = b"\xef\xbb\xbf"
_UTF16_LE, _UTF16_BE = b"\xff\xfe", b"\xfe\xff"
_CONTROL = re.compile(r"[\x00-\x1f]")


@dataclass(frozen=True, slots=True)
class DecodedText:
    """The text of a file, the encoding it was read with, and what was repaired on the way."""

    text: str
    encoding: str
    diagnostics: tuple[Diagnostic, ...] = ()


def decode_bytes(data: bytes) -> DecodedText:
    """Decode asset bytes: UTF-8 (BOM removed), UTF-16 with its byte-order mark, else Windows-1252
    with a warning.

    Windows-1252 is the only fallback because it is what Windows editors save "ANSI" text as, and it
    is what the one non-UTF-8 file in the shared corpus is. UTF-16 is read only with its byte-order
    mark (what Windows editors write as "Unicode"): without one it cannot be told from other bytes.
    Bytes that are none of these (the five bytes cp1252 leaves undefined, UTF-16 with a broken
    surrogate) are rejected with ``ASSET_ENCODING`` rather than guessed at.
    """
    if data.startswith((_UTF16_LE, _UTF16_BE)):
        return _decode_utf16(data)
    diagnostics: list[Diagnostic] = []
    encoding = "utf-8"
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
        encoding = "utf-8-sig"
        diagnostics.append(
            Diagnostic(
                "ASSET_BOM",
                "the file starts with a UTF-8 byte-order mark; it was removed",
                severity="info",
                path="$",
            )
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start
        try:
            text = data.decode("cp1252")
        except UnicodeDecodeError as exc2:
            raise TemplateError(
                f"the file is neither UTF-8 (invalid byte 0x{data[bad]:02x} at offset {bad}) nor "
                f"Windows-1252 (undefined byte 0x{data[exc2.start]:02x} at offset {exc2.start})",
                code="ASSET_ENCODING",
                path="$",
            ) from None
        encoding = "cp1252"
        diagnostics.append(
            Diagnostic(
                "ASSET_ENCODING",
                f"the file is not UTF-8 (invalid byte 0x{data[bad]:02x} at offset {bad}); it was decoded as "
                "Windows-1252, so non-ASCII characters may differ from what the author wrote",
                severity="warning",
                path="$",
                data={"encoding": "cp1252", "byte_offset": bad},
            )
        )
    return DecodedText(text, encoding, tuple(diagnostics))


def _decode_utf16(data: bytes) -> DecodedText:
    """UTF-16 text with its byte-order mark (little- or big-endian), the mark removed."""
    encoding = "utf-16-le" if data.startswith(_UTF16_LE) else "utf-16-be"
    try:
        text = data[2:].decode(encoding)
    except UnicodeDecodeError as exc:
        raise TemplateError(f"the file starts with a UTF-16 byte-order mark but is not UTF-16 ({exc.reason} at "
                            f"offset {exc.start + 2})", code="ASSET_ENCODING", path="$") from None
    note = Diagnostic("ASSET_BOM", f"the file is UTF-16 ({encoding[-2:].upper()}, with a byte-order mark); it was "
                      "read as such", severity="info", path="$", data={"encoding": encoding})
    return DecodedText(text, encoding, (note,))


def _json_error(text: str, exc: json.JSONDecodeError, what: str = "JSON") -> TemplateError:
    pos = min(exc.pos, len(text))
    return TemplateError(
        f"invalid {what}: {exc.msg}",
        code="ASSET_JSON",
        span=Span(pos, min(pos + 1, len(text)) if pos < len(text) else pos),
        source=text,
        line=exc.lineno,
        column=exc.colno,
    )


#: Deepest nesting accepted. Real assets nest under 20 levels; parsers and walkers recurse, so a
#: hostile file nested 100,000 deep must be refused with a message rather than a RecursionError.
MAX_DEPTH = 256
#: Most values a YAML document may expand to once its aliases are resolved (the "billion laughs" guard).
MAX_YAML_NODES = 1_000_000

#: Python refuses to convert integers longer than this (``sys.int_info.default_max_str_digits``).
MAX_INT_DIGITS = 4300


def _parse_int(digits: str) -> int:
    """``int(digits)``, refusing absurdly long numbers with a clear error instead of a ValueError."""
    if len(digits) > MAX_INT_DIGITS:
        raise TemplateError(
            f"a number with {len(digits)} digits (more than {MAX_INT_DIGITS}) cannot be read: {digits[:20]}...",
            code="ASSET_JSON",
            path="$",
        )
    return int(digits)


def _too_deep() -> TemplateError:
    return TemplateError(f"the data is nested deeper than {MAX_DEPTH} levels", code="ASSET_JSON", path="$")


def _loads(text: str, **options: Any) -> Any:
    """The strict JSON reader (no NaN, no lone surrogate: :mod:`tavernbox.strict_json`) with C-speed
    integers; only a text with an integer too long for ``int()`` is parsed again through
    :func:`_parse_int`, which names it (the same first failure, with our message)."""
    try:
        return loads(text, what="the file", code="ASSET_JSON", **options)
    except json.JSONDecodeError:
        raise
    except TemplateError:
        raise
    except ValueError:
        return loads(text, what="the file", code="ASSET_JSON", parse_int=_parse_int, **options)


def check_depth(value: Any) -> None:
    """Raise ``ASSET_JSON`` when ``value`` nests deeper than :data:`MAX_DEPTH` (an iterative walk).

    Walked level by level: one list of the containers at each depth, so the depth is checked once
    per level rather than once per container (a 2 MB card holds tens of thousands of values).
    """
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        if depth > MAX_DEPTH:
            raise _too_deep()
        below: list[Any] = []
        for node in level:
            below += [v for v in (node.values() if isinstance(node, dict) else node) if isinstance(v, (dict, list))]
        level = below
        depth += 1


def _expand_yaml(value: Any) -> Any:
    """Copy a YAML result into a plain tree, resolving shared (aliased) nodes into copies under a budget.

    PyYAML returns one object for every use of an anchor, so nine nested aliases of ten can stand for
    10^9 values; anything walking the tree later would take forever. The expanded size is computed
    first, memoised per shared node (linear in the document), and refused past :data:`MAX_YAML_NODES`;
    recursive aliases (``&a [*a]``) fail the depth limit.
    """
    sizes: dict[int, int] = {}

    def size(node: Any, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise _too_deep()
        if not isinstance(node, (dict, list)):
            return 1
        known = sizes.get(id(node))
        if known is not None:
            return known
        children = node.values() if isinstance(node, dict) else node
        total = 1 + sum(size(child, depth + 1) for child in children)
        sizes[id(node)] = total
        return total

    if size(value, 0) > MAX_YAML_NODES:
        raise TemplateError(
            f"the YAML expands to more than {MAX_YAML_NODES} values through its aliases", code="ASSET_JSON", path="$"
        )
    def copy(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: copy(v) for k, v in node.items()}
        if isinstance(node, list):
            return [copy(v) for v in node]
        return node

    return copy(value)


def parse_json_text(text: str) -> tuple[Any, list[Diagnostic]]:
    """Parse JSON; accept raw control characters inside strings with a warning.

    Python's strict parser is tried first because it is the common case and tells us exactly where a
    raw control character sits; only then do we reparse leniently (``strict=False``), so the warning
    carries the first offending line and column.
    """
    try:
        value = _loads(text)
        check_depth(value)
        return value, []
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        if not exc.msg.startswith("Invalid control character"):
            raise _json_error(text, exc) from None
        first = exc.pos
    try:
        value = _loads(text, strict=False)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        raise _json_error(text, exc) from None
    check_depth(value)
    count = 0
    # Count only the control characters inside strings: newlines between tokens are ordinary.
    for m in _CONTROL.finditer(text, first):
        if m.group() not in "\n\r\t":
            count += 1
    line, col = line_col(text, first)
    diag = Diagnostic(
        "ASSET_CONTROL_CHAR",
        f"raw control character U+{ord(text[first]):04X} inside a JSON string (first at {line}:{col}; "
        f"{max(count, 1)} in all); kept as written",
        span=Span(first, first + 1),
        severity="warning",
        path="$",
        data={"line": line, "column": col},
    )
    return value, [diag]


def parse_json5_text(text: str) -> Any:
    """Parse JSON5 (comments, trailing commas, single quotes): MVU initvars are often written so."""
    import json5

    try:
        value = json5.loads(text)
    except RecursionError:
        raise _too_deep() from None
    check_depth(value)
    check_json_text(text, value, what="the file")
    refuse_non_finite(value, what="the file", code="ASSET_JSON")
    return value


@functools.lru_cache(maxsize=1)
def _yaml12_loader() -> type[yaml.SafeLoader]:
    """The YAML 1.2 loader class, built on first use: YAML is read only for YAML files (MVU
    variables), so the JSON assets of a request never pay for importing PyYAML."""
    import yaml

    class _Yaml12Loader(yaml.SafeLoader):
        """A safe YAML loader with YAML 1.2 core-schema scalars.

        PyYAML implements YAML 1.1, where ``15:44`` is the integer 944, ``no`` is false and
        ``2024-04-08`` is a date. MVU files are read by JavaScript's ``yaml`` package (1.2 core schema), in
        which all three are strings; real initvars contain such times, so 1.1 rules would corrupt them.
        """


    def _scan_anchor(self: yaml.SafeLoader, token_class: type) -> yaml.Token:
        """Scan ``&name``/``*name`` with YAML 1.2 anchor characters (anything but spaces and flow indicators).

        PyYAML accepts only ASCII letters, digits, ``-`` and ``_``; real tavern_sync files use CJK anchor
        names such as ``&分隔符``, which JavaScript's ``yaml`` reads fine.
        """
        start_mark = self.get_mark()
        kind = "alias" if self.peek() == "*" else "anchor"
        self.forward()
        length = 0
        while self.peek(length) not in "\0 \t\r\n\x85\u2028\u2029\ufeff,[]{}":
            length += 1
        if not length:
            raise yaml.scanner.ScannerError(
                f"while scanning an {kind}", start_mark, "expected an anchor name", self.get_mark()
            )
        value = self.prefix(length)
        self.forward(length)
        return token_class(value, start_mark, self.get_mark())


    _Yaml12Loader.scan_anchor = _scan_anchor  # type: ignore[method-assign]
    _Yaml12Loader.yaml_implicit_resolvers = {}
    _Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
    )
    _Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
    )
    _Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
    )
    _Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        list("-+0123456789."),
    )


    def _construct_int12(loader: yaml.SafeLoader, node: yaml.Node) -> int:
        value = str(loader.construct_scalar(node))  # type: ignore[arg-type]
        if len(value) > MAX_INT_DIGITS:
            _parse_int(value)  # raises the clear error
        if value.startswith("0o"):
            return int(value[2:], 8)
        if value.startswith("0x"):
            return int(value[2:], 16)
        return int(value)


    _Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int12)

    return _Yaml12Loader


def parse_yaml_text(text: str) -> Any:
    """Parse one YAML document with 1.2 core scalars; errors become ``ASSET_JSON`` at line:col."""
    import yaml

    try:
        value = _expand_yaml(yaml.load(text, Loader=_yaml12_loader()))  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise _too_deep() from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise TemplateError(f"invalid YAML: {problem}", code="ASSET_JSON", line=line, column=col) from None
    except yaml.YAMLError as exc:
        raise TemplateError(f"invalid YAML: {exc}", code="ASSET_JSON") from None
    # YAML escapes (\ud800, \U0000d800) can spell surrogates: pairs are joined as JSON would read
    # them, and a lone one is refused.
    if "\\" in text:
        value = join_pairs(value)
        refuse_surrogates(value, what="the file")
    refuse_non_finite(value, what="the file", code="ASSET_JSON")
    return value


def unsafe_number(value: Any, path: str, field: str) -> Diagnostic | None:
    """An ``ASSET_NUMBER_UNSAFE`` warning for an integer JavaScript cannot hold exactly, else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        try:
            rounded = float(value)
            exact = int(rounded) == value
        except OverflowError:  # beyond the largest double: JavaScript reads Infinity
            rounded, exact = float("inf") if value > 0 else float("-inf"), False
        shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:20]}...({len(str(value))} digits)"
        return Diagnostic(
            "ASSET_NUMBER_UNSAFE",
            f"{field} {shown} is beyond JavaScript's exact integers (2^53-1); SillyTavern reads it as "
            f"{rounded:.17g}{'' if exact else ' (rounded)'}; the exact value is kept",
            severity="warning",
            path=path,
            data={"value": value, "javascript": rounded if rounded not in (float("inf"), float("-inf")) else str(rounded)},
        )
    return None

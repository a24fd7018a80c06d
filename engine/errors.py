"""The error root and the diagnostic record shared by every stage.

Every failure a user can cause carries a stable ``code`` (the catalogue below), a message, and
where possible the span of source it concerns. Line and column are computed from the offset only
when the error is shown, so raising is cheap on hot paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .spans import Span, caret_snippet, line_col

__all__ = ["CODES", "BoundedDiagnostics", "Diagnostic", "Severity", "TemplateError", "bound_diagnostics",
           "message_shape"]

Severity = Literal["error", "warning", "info"]

#: The catalogue of stable codes. A code, once published, keeps its meaning.
CODES: dict[str, str] = {
    # generic
    "INTERNAL_ERROR": "an unexpected failure inside tavernbox (a bug: please report it)",
    "INPUT_INVALID": "an input file or argument could not be read or has the wrong shape",
    "INSTALL_EXTRA_MISSING": "a feature needs an optional extra that is not installed; the message names the pip install",
    "USAGE_INVALID": "a command line the command does not take (an unknown option, a missing or bad argument); exit 2",
    "INPUT_UNKNOWN_KEY": "an input object has a key tavernbox does not read; ignored, with the nearest known key",
    "TEXT_SURROGATE": "text holds a lone UTF-16 surrogate (a JSON \\ud800 escape), which is not Unicode; refused at its path",
    # macros
    "MACRO_UNKNOWN": "a macro name that is not registered; left as written",
    "MACRO_ARITY": "a macro called with the wrong number of arguments; left as written",
    "MACRO_ARGUMENT_TYPE": "a macro argument of the wrong type; left as written",
    "MACRO_HANDLER_ERROR": "a macro handler failed; left as written",
    "MACRO_UNCLOSED_SCOPE": "a scoped macro without its closing tag",
    "MACRO_NESTING_LIMIT": "macros nested deeper than the limit; left as written",
    "MACRO_INPUT_LIMIT": "macro text larger than the input limit",
    "MACRO_OUTPUT_LIMIT": "the expanded text would pass the output limit",
    "MACRO_ROLL_LIMIT": "a dice roll asks for more dice than the limit",
    "MACRO_REPEAT_LIMIT": "{{newline}} or {{space}} asks for more repetitions than the limit",
    "MACRO_DIAGNOSTICS_LIMIT": "a render raised more diagnostics than it reports; the rest are counted by code",
    "MACRO_TIME_LIMIT": "rendering the macros used up its CPU time budget",
    # Handlebars (SillyTavern's story strings)
    "HANDLEBARS_SYNTAX": "the story string is not valid Handlebars (Handlebars would refuse to compile it)",
    "HANDLEBARS_UNSUPPORTED": "the story string uses partial blocks, decorators or raw blocks, which story strings cannot",
    "HANDLEBARS_RUNTIME": "rendering the story string failed where Handlebars throws (a helper's arguments, a missing partial)",
    "HANDLEBARS_TOO_LARGE": "the story string is longer than the limit",
    "HANDLEBARS_NESTING_LIMIT": "blocks or sub-expressions nest deeper than the limit",
    "HANDLEBARS_OUTPUT_LIMIT": "the rendered story string passed the output limit",
    "HANDLEBARS_TIME_LIMIT": "rendering the story string used up its CPU time budget",
    # templates (EJS + sandbox)
    "TEMPLATE_SYNTAX": "the template or its JavaScript does not compile",
    "TEMPLATE_TOO_LARGE": "the template is longer than the limit",
    "TEMPLATE_INPUT_LIMIT": "the input snapshot is larger than the limit",
    "TEMPLATE_OUTPUT_LIMIT": "the rendered output passed the limit",
    "TEMPLATE_MEMORY_LIMIT": "the VM ran out of its memory budget",
    "TEMPLATE_STACK_LIMIT": "the VM ran out of stack",
    "TEMPLATE_TIME_LIMIT": "the render used up its time budget",
    "TEMPLATE_JOB_LIMIT": "too many pending-job steps in one pass",
    "TEMPLATE_UNSETTLED": "the template's promise never settled",
    "TEMPLATE_EXECUTION_FAILED": "the template threw a JavaScript exception",
    "TEMPLATE_CANCELLED": "the caller cancelled the render",
    "TEMPLATE_SANDBOX_CRASHED": "the sandbox worker process died",
    "TEMPLATE_UNSUPPORTED": "the template called a write or command; templates are read-only",
    "TEMPLATE_DEPENDENCY_LIMIT": "too many distinct lookups",
    "TEMPLATE_BRIDGE_LIMIT": "too many bridge calls",
    "TEMPLATE_DEPENDENCY_NOT_ACTIVE": "the world-info entry is not active for this request",
    "TEMPLATE_DEPENDENCY_DENIED": "a managed dependency was denied",
    "TEMPLATE_POLICY_SKIPPED": "the template was skipped by its manager",
    "TEMPLATE_SESSION_REQUIRED": "the template is enabled for no session",
    # the template API and the dependency bridge (issue 4)
    "TEMPLATE_DEPENDENCY_INVALID": "a lookup request is malformed or longer than 4,096 characters, or a path too deep",
    "TEMPLATE_DEPENDENCY_UNAVAILABLE": "a dependency resolver gave no usable answer (not a Resolution, or not JSON)",
    "TEMPLATE_DEPENDENCY_MISSING": "the requested world book or entry does not exist in this request's selection",
    "TEMPLATE_RESOURCE_INVALID": "a prompt-template resource is malformed (id, name, content, sessions, variables)",
    "TEMPLATE_LIFECYCLE_UNSUPPORTED": "a template title tag or decorator asks for a lifecycle this engine does not run",
    "UNSUPPORTED_EVENT": "the resource's metadata asks for an event that is not supported; it cannot be enabled",
    "SOURCE_POLICY_CHANGED": "a lease (permission, manager or selection) is no longer current; the output is void",
    "SOURCE_CONTENT_CHANGED": "a dependency's content changed after it was read; the output is void",
    "SOURCE_LEASE_REQUIRED": "a usage allowance carried no check_current lease",
    # assets
    "ASSET_ENCODING": "the file is not valid UTF-8 text",
    "ASSET_JSON": "the file is not valid JSON (or YAML where accepted)",
    "ASSET_KIND_UNKNOWN": "the file is not a card, world book, preset or MVU variables",
    "ASSET_INVALID": "a field of the asset has the wrong type or value",
    "ASSET_PNG": "the PNG has no readable character chunk",
    "ASSET_BOM": "the file starts with a UTF-8 byte-order mark (removed)",
    "ASSET_CONTROL_CHAR": "raw control characters inside JSON strings (accepted as written)",
    "ASSET_FIELD_MISSING": "a required field is absent (an error) or an expected one is (a default is used)",
    "ASSET_VALUE_NORMALISED": "a value SillyTavern reads differently from how it is written was read SillyTavern's way",
    "ASSET_NUMBER_UNSAFE": "an integer beyond JavaScript's 2^53-1, which SillyTavern rounds",
    "ASSET_DUPLICATE_ID": "two entries or prompts share an id (the later one wins), or a prompt order repeats one (the first)",
    "ASSET_UID_MISMATCH": "a world-book entry's uid differs from the key it is stored under",
    "ASSET_REFERENCE_MISSING": "a prompt order names a prompt the preset does not have",
    "ASSET_CONVERTED": "the asset was converted from another shape (v1 card, card-book list form)",
    "ASSET_SPEC_UNKNOWN": "a card spec other than chara_card_v2/v3",
    "ASSET_MVU_META": "an MVU $meta object of the wrong shape",
    "ASSET_KIND_MISMATCH": "a kind was asked for (kind=, --kind) but the data is unmistakably another kind of asset",
    # world info
    "WI_REGEX_INVALID": "a regex key does not compile",
    "WI_REGEX_REFUSED": "a regex key was refused by the regex policy",
    # SillyTavern regex scripts (tavernbox.regexscripts)
    "REGEX_SCRIPT_INVALID": "a regex script (global, the preset's or the card's) has a field of the wrong type; see its "
                            "JSON path",
    "REGEX_PATTERN_INVALID": "a regex script's findRegex does not compile in JavaScript; SillyTavern skips the script",
    "REGEX_TIME_LIMIT": "the regex scripts used up the request's time budget; names the script and its asset",
    "REGEX_SCRIPT_FAILED": "a regex script ran out of memory or stack, or its replacement threw, as it would in "
                           "SillyTavern; names the script and its asset",
    # fuzzing (tavernbox fuzz)
    "FUZZ_TARGET_UNAVAILABLE": "the fuzz target cannot run here: its engine or its input strategy is missing",
    # assembler (issue 6)
    "ASSEMBLY_PRESET_INVALID": "an assembly preset (dsh-tavern-request-assembly v1) is malformed; see its JSON path",
    "ASSEMBLY_REQUEST_INVALID": "an assembly request (chat messages, input ids, options) has the wrong shape",
    "REQUEST_INVALID": "a SillyTavern request file (preset, card, books, chat, user, options) has the wrong shape "
                       "or an unknown field",
    "ST_WORLD_INFO_BUDGET": "triggered world-info entries left out by the world-info budget (SillyTavern's overflow "
                            "alert): how many, their tokens, the budget",
    "ST_LINKED_WORLD_MISSING": "the card links a world book that is not among the given books; it is not scanned",
    "ST_LOREBOOK_MISSING": "the chat or persona lorebook named is not among the given books; it is not scanned",
    "ST_GROUP_CARD_MISSING": "a group joining its cards has a member whose card is not given; the member is skipped",
    "ST_GROUP_JOIN_LIMIT": "a group's joined card field or depth prompts would pass the macro output limit (8 Mi "
                           "characters)",
    "ST_GROUP_LOREBOOK_NOT_READ": "a book another group member links is not scanned: only the replying member's is",
    "ST_CONTEXT_TOO_SMALL": "the prompts that must be sent do not fit into max_context - max_tokens (SillyTavern "
                            "refuses to send too); raise budget.max_context",
    "ASSEMBLY_SOURCE_INVALID": "a source descriptor is malformed or its id is already registered",
    "ASSEMBLY_SOURCE_UNAVAILABLE": "a rule names a source that is not registered; its content is left out",
    "ASSEMBLY_DEPENDENCY_CYCLE": "declared source dependencies form a cycle",
    "ASSEMBLY_DEPENDENCY_UNDECLARED": "a source referenced, claimed or expanded a source it does not depend on",
    "ASSEMBLY_RULE_UNSUPPORTED": "a rule asks for a role, lifetime, depth or mode its source does not support",
    "ASSEMBLY_RULE_DUPLICATE": "more than one rule for a source that is not `multiple`",
    "ASSEMBLY_LIFETIME_UNSUPPORTED": "lifetime `snapshot` (retained snapshots) is not supported yet",
    "ASSEMBLY_PLACEMENT_UNSUPPORTED": "the preset's placement mode is not supported by this engine",
    "ASSEMBLY_SOURCE_FAILED": "a source resolver raised; the whole request fails",
    "ASSEMBLY_SOURCE_OUTPUT_INVALID": "a source returned output of the wrong shape; the whole request fails",
    "ASSEMBLY_SOURCE_OUTPUT_LIMIT": "a source returned more than 10,000 blocks or 8 MiB",
    "ASSEMBLY_SOURCE_ASYNC": "an asynchronous source was used by the synchronous assemble()",
    "ASSEMBLY_CANCELLED": "the caller cancelled the assembly",
    "ASSEMBLY_MACRO_INVALID": "a source macro name is duplicated or points at no text block",
    "ASSEMBLY_REFERENCE_CYCLE": "source block references form a cycle",
    "ASSEMBLY_REFERENCE_UNAVAILABLE": "a reference names a source with no resolved content",
    "ASSEMBLY_DUPLICATE_SLOT": "a reference whose targets were all placed already (e.g. {{history}} twice)",
    "ASSEMBLY_NATIVE_UNKNOWN": "a native block names a message id that is not in this request",
    "ASSEMBLY_NATIVE_MISSING": "a native message is dropped or appears more than once",
    "ASSEMBLY_NATIVE_SYSTEM_ORDER": "the layout moves native messages across a native system boundary",
    "ASSEMBLY_TOOL_TOPOLOGY": "the layout splits a tool call from its results, or the transaction is incomplete",
    "ASSEMBLY_EMPTY": "the assembled request has no messages",
    "ASSEMBLY_SYSTEM_ONLY": "the assembled request holds only system messages",
    "ASSEMBLY_SYSTEM_NOT_TEXT": "a system message holds non-text content and cannot be projected",
    "ASSEMBLY_SYSTEM_UPDATES_UNSUPPORTED": "a non-leading system message without the in-history capability",
    "SYSTEM_UPDATE_CAPABILITY_UNVERIFIED": "preview: non-leading system messages need a capability not checked here",
    "ASSEMBLY_PROFILE_LIMIT": "the logical extra bytes pass max_profile_bytes (rejected, never truncated)",
    "ASSEMBLY_PROJECTION_LIMIT": "the physical projection overhead passes its limit (rejected, never truncated)",
    "ASSEMBLY_LIMIT_INVALID": "a byte limit is not a non-negative integer within its maximum",
    "ASSEMBLY_MACROS_UNAVAILABLE": "the macro engine is not installed; Tavern text was kept as written",
    "ASSEMBLY_STRATEGY_UNKNOWN": "a strategy id that is neither a file nor a known built-in strategy",
    "ASSEMBLY_REPLAY_INVALID": "a replay record is malformed or does not reproduce its recorded messages",
    "NATIVE_TEXT_VARIABLE_UNAVAILABLE": "dsh.text names a native variable the request does not supply",
    "TAVERN_TEMPLATE_PARSER_UNAVAILABLE": "Tavern text holds a '<%' template tag and no template parser is wired in",
    "ASSEMBLY_INPUT_UNSUPPORTED": "a CLI input (ST preset, MVU, templates) whose source is not part of this build yet",
    "WORLD_BOOK_SLOT_MISSING": "a world-info position with no slot in this placement; put in the before/after group",
    "GREETING_AFTER_INPUT": "the first-turn character greeting was placed after the current input",
    "WORLD_BOOK_MVU_VARIABLE_VERSION": "world info inserted the MVU state; names the resource and its revision",
    "MVU_RESOURCE_VERSION": "the MVU state source read this resource at this revision",
    "TAVERN_MEMORY_RESOURCE_VERSION": "the prompt-template source rendered this resource at this revision",
    "TAVERN_MEMORY_DEPENDENCY_VERSION": "a prompt template read this dependency (MVU, world info, preset, card) then",
    # retained snapshots and their store
    "SNAPSHOT_RECORD_INVALID": "a retained snapshot record (from a result or a store) is malformed; see its JSON path",
    "SNAPSHOT_ANCHORED_TO_NATIVE_HISTORY": "a retained snapshot's anchor is gone; it follows its native anchor instead",
    "SNAPSHOT_ANCHOR_NO_LONGER_ACTIVE": "history compaction removed a retained snapshot's anchors; it is left out",
    "SNAPSHOT_STORE_CONFLICT": "another writer saved the session's snapshots since they were read",
    "SNAPSHOT_STORE_INVALID": "snapshot records or a session id that cannot be stored (not JSON data, bad id)",
    "SNAPSHOT_STORE_CORRUPT": "stored snapshot records fail their integrity check",
    "SNAPSHOT_STORE_UNAVAILABLE": "the snapshot database cannot be opened or written",
    # prompt-studio components
    "COMPONENT_INVALID": "a prompt-studio component is malformed; see its JSON path",
    "COMPONENT_TEMPLATE_VARIABLE": "a component template names an unknown or valueless variable",
    "COMPONENT_SETTINGS_INVALID": "settings.yaml of the prompt-studio components cannot be read",
    # SillyTavern prompt-manager placement and the built-in strategies (issue 7)
    "ST_PRESET_INVALID": "the SillyTavern chat-completion preset given to the `preset` source is malformed",
    "ST_PRESET_ABSENT": "a `preset` rule without a SillyTavern preset (assets.st_preset): it contributes nothing",
    "ST_PROMPT_ORDER_FALLBACK": "no prompt_order for character 100001 or 100000; the first bucket was used",
    "ST_PROMPT_ORDER_DEFAULT": "no prompt_order for character 100001: SillyTavern's default order was used",
    "ST_PROMPT_NOT_SENT": "a prompt marked as a system prompt with an identifier SillyTavern has no place for; never sent",
    "UNSUPPORTED_MARKER": "a prompt-manager marker with no content source here; it was skipped",
    "ST_INJECTION_SKIPPED": "an in-chat prompt whose injection_depth is outside 0..10000; SillyTavern never injects it",
    "ST_WORLD_INFO_UNPLACED": "activated world info with no enabled marker or position in the SillyTavern preset; not sent",
    "ASSEMBLY_NATIVE_UNSUPPORTED": "a native-mode strategy has no enabled history/input, or a depth, snapshot or assistant rule",
    "NATIVE_ROLE_ADJUSTED": "native placement changed a contribution's role to fit the history boundaries",
    "NATIVE_DELIVERY_ADJUSTED": "native-slots delivered content between history and input as a pre-step user message",
    "NATIVE_SLOTS_ABSENT": "native-slots found no history or input slot in the preset; roles first was used",
    "NATIVE_DEPTH_BOUNDARY": "native placement put a depth-0/1 item after the input / before history",
    "NATIVE_DEPTH_APPROXIMATED": "native placement ignored a depth and placed the item by its role",
    "NATIVE_PLACEMENT_ADJUSTED": "native placement reordered contributions to fit the native boundaries",
    "STRATEGY_BUILTIN_IMMUTABLE": "a built-in strategy cannot be saved over or deleted; copy it first",
    "STRATEGY_IN_USE": "a strategy applied to a session cannot be deleted",
    "STRATEGY_SESSION_INVALID": "a session id that is not 1-200 of [A-Za-z0-9._:-] starting with a letter or digit",
    # MVU reply updates (apply_mvu_reply)
    "MVU_COMMAND_SYNTAX": "an MVU update command or JSON Patch block cannot be read (unbalanced, no ';', not JSON)",
    "MVU_COMMAND_INVALID": "an MVU update command with the wrong arguments or operation; it was skipped",
    "MVU_PATH_MISSING": "an MVU update command names a path that does not exist; it was skipped",
    "MVU_SCHEMA": "an MVU update refused by the state's shape or $meta (extensible, required); it was skipped",
    "MVU_REPLY_LIMIT": "the reply given to the MVU updater is larger than 1 MiB",
    "MVU_COMMAND_LIMIT": "the reply holds more than 1,000 MVU update commands",
    "MVU_PATH_LIMIT": "an MVU path is longer than 2,000 characters or 64 parts",
    "MVU_STATE_LIMIT": "the MVU state passes 2 MiB serialised, 100,000 nodes or depth 64",
    "MVU_VALUE_LIMIT": "a reply's non-JSON structured values (JSON5, YAML) pass 64 KiB in total",
    # the asset library (tavernbox.store.library)
    "LIBRARY_INVALID": "a library kind, asset id, revision or If-Match/If-None-Match value that is not valid",
    "LIBRARY_NOT_FOUND": "no such asset in the library (or that revision is not kept, or it was deleted)",
    "LIBRARY_CONFLICT": "a conditional library write whose condition no longer holds (another client wrote first)",
    "LIBRARY_CORRUPT": "a stored library document does not match its digest",
    # the HTTP service (tavernbox serve)
    "SERVICE_UNAUTHORIZED": "a request without the service's bearer token (or with a wrong one)",
    "SERVICE_ORIGIN_REFUSED": "a browser request from another origin (the service sends no permissive CORS)",
    "SERVICE_BODY_TOO_LARGE": "a request body larger than the service's limit (2 MiB)",
    "SERVICE_REQUEST_INVALID": "a request body that is not JSON, or not of the route's shape",
    "SERVICE_ROUTE_UNKNOWN": "no such route (or not with this method)",
    "SERVICE_UPSTREAM_UNCONFIGURED": "/v1/chat/completions was called but the service has no --upstream",
    "SERVICE_UPSTREAM_FAILED": "the upstream chat-completion server could not be reached or failed",
}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding about an input: a stable code, a message and where it is.

    ``path`` is a JSON path (``$.entries.3.key``) for structured inputs; ``span`` an offset range
    for text inputs. Both may be absent for findings about the whole input.
    """

    code: str
    message: str
    span: Span | None = None
    severity: Severity = "warning"
    path: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, source: str | None = None) -> dict[str, Any]:
        """A JSON-ready dict; ``line``/``column`` are added when ``source`` is given."""
        out: dict[str, Any] = {"code": self.code, "message": self.message, "severity": self.severity}
        if self.span is not None:
            out["start"], out["end"] = self.span.start, self.span.end
            if source is not None:
                out["line"], out["column"] = line_col(source, self.span.start)
        if self.path is not None:
            out["path"] = self.path
        if self.data:
            out["data"] = dict(self.data)
        return out


#: the data key of the last diagnostic shown of its shape: how many more like it were left out
MORE_LIKE_IT = "more_like_it"
#: how many diagnostics of one shape every command and answer shows
SHOWN_PER_SHAPE = 3
_SHAPE = re.compile(r"\d+|'[^']*'|\"[^\"]*\"|\{\{[^{}]*\}\}")
_MORE_SUFFIX = re.compile(r" \(and [\d,]+ more like it\)$")


def message_shape(message: str) -> str:
    """A message with its numbers, quoted values and macros blanked: diagnostics alike differ only there."""
    return _SHAPE.sub("#", message)


def _more(d: Diagnostic) -> int:
    return int(d.data.get(MORE_LIKE_IT, 0)) if d.data else 0


def _with_more(d: Diagnostic, more: int) -> Diagnostic:
    base = _MORE_SUFFIX.sub("", d.message)
    return replace(d, message=f"{base} (and {more:,} more like it)", data={**d.data, MORE_LIKE_IT: more})


def bound_diagnostics(diagnostics: Iterable[Diagnostic], per_shape: int = SHOWN_PER_SHAPE) -> list[Diagnostic]:
    """The first ``per_shape`` diagnostics of each kind (code and :func:`message_shape`), in their order; the last
    one shown of a kind says how many more like it there were (``"... (and N more like it)"``, ``data.more_like_it``).

    Identical findings (a mistake repeated in every entry of a book) are then counted, not listed: 100,000 of them
    print as three lines. Counts carried by diagnostics already bounded (:class:`BoundedDiagnostics`) add up.
    """
    kept: list[Diagnostic] = []
    shown: dict[tuple[str, str], int] = {}
    last: dict[tuple[str, str], int] = {}
    more: dict[tuple[str, str], int] = {}
    for d in diagnostics:
        key = (d.code, message_shape(_MORE_SUFFIX.sub("", d.message)))
        carried = _more(d)
        if shown.get(key, 0) < per_shape:
            shown[key] = shown.get(key, 0) + 1
            last[key] = len(kept)
            kept.append(d)
            more[key] = more.get(key, 0) + carried
        else:
            more[key] = more.get(key, 0) + 1 + carried
    for key, n in more.items():
        if n or _more(kept[last[key]]):
            kept[last[key]] = _with_more(kept[last[key]], n)
    return kept


class BoundedDiagnostics(list[Diagnostic]):
    """A list that keeps at most ``per_shape`` diagnostics of each kind as they are added and counts the others.

    What a reader collects into (``load_asset``): a book repeating one mistake in 100,000 entries then holds a
    hundred diagnostics, not 200,000. :meth:`finished` gives the list with the counts said
    (:func:`bound_diagnostics`).
    """

    def __init__(self, per_shape: int = 100) -> None:
        super().__init__()
        self.per_shape = per_shape
        self._seen: dict[tuple[str, str], int] = {}
        self._shapes: dict[str, str] = {}

    def append(self, d: Diagnostic) -> None:
        shape = self._shapes.get(d.message)
        if shape is None:
            shape = message_shape(d.message)
            if len(self._shapes) < 4096:
                self._shapes[d.message] = shape
        key = (d.code, shape)
        seen = self._seen.get(key, 0)
        self._seen[key] = seen + 1
        if seen < self.per_shape:
            super().append(d)

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        for d in diagnostics:
            self.append(d)

    def __iadd__(self, diagnostics: Iterable[Diagnostic]) -> BoundedDiagnostics:  # type: ignore[override,misc]
        self.extend(diagnostics)
        return self

    def finished(self) -> list[Diagnostic]:
        """The kept diagnostics; the last of each kind says how many more like it were counted."""
        out = list(self)
        last: dict[tuple[str, str], int] = {}
        for i, d in enumerate(out):
            last[(d.code, message_shape(d.message))] = i
        for key, i in last.items():
            left = self._seen.get(key, 0) - self.per_shape
            if left > 0:
                out[i] = _with_more(out[i], left)
        return out


class TemplateError(Exception):
    """The root of every error tavernbox raises on purpose.

    ``code`` is stable (see ``CODES``); ``span`` locates the problem in ``source``. ``line`` and
    ``column`` may instead be given directly when the position comes from elsewhere (a JavaScript
    line map, a JSON file).
    """

    default_code = "INTERNAL_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        span: Span | None = None,
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.span = span
        self.source = source
        self.path = path
        self._line = line
        self._column = column

    @property
    def line(self) -> int | None:
        """1-based line, computed from the span on first use."""
        if self._line is None and self.span is not None and self.source is not None:
            self._line, self._column = line_col(self.source, self.span.start)
        return self._line

    @property
    def column(self) -> int | None:
        """1-based column, computed from the span on first use."""
        if self._column is None:
            _ = self.line
        return self._column

    def snippet(self) -> str | None:
        """The offending source line with a caret under the span, when both are known."""
        if self.span is None or self.source is None:
            return None
        return caret_snippet(self.source, self.span)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready ``{"code", "message", "line", "column"}`` (plus ``path`` when known)."""
        out: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }
        if self.path is not None:
            out["path"] = self.path
        return out

    def __str__(self) -> str:
        where = f" at {self.line}:{self.column}" if self.line is not None else ""
        return f"{self.code}{where}: {self.message}"

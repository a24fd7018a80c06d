"""The request file: everything SillyTavern knows when it builds a chat-completion request, in one object.

``tavernbox assemble --request REQ.json``, :func:`tavernbox.assemble_request` and the HTTP service take
the same object. Every asset field is an object or a path (relative to the request file's folder)::

    {
      "preset": <SillyTavern chat-completion preset>,
      "card": <character card, JSON or PNG>,
      "books": [<world book> | {"book": <world book>, "source": "global" | "chat" | "persona" | "character"}],
      "chat": {"messages": [{"role", "content", "name"?, "force_avatar"?}], "lorebook"?} | <.json/.jsonl path>,
      "user": {"name": "User", "persona": {"description", "position", "depth", "role", "lorebook"?}},
      "author_note": {"content", "interval", "depth", "position": "chat" | "before" | "after", "role"},
      "world_info": {SillyTavern's world-info setting names},
      "group": {"members": [names], "name"?, "cards"?: [<card>], "generation_mode"?: "swap" | "append" |
                "append_disabled", "join_prefix"?, "join_suffix"?, "disabled_members"?: [names]},
      "options": {"post_processing", "names_behavior", "squash_system_messages", "seed", "reasoning", ...},
      "extensions": {"regex": {"scripts": [<regex script>], "preset_scripts": true, "card_scripts": true}}
    }

Defaults are the ones SillyTavern ships (its ``settings.json``): a user who never opened a panel gets
what SillyTavern would send. Unknown fields are errors with their JSON path (``REQUEST_INVALID``), so
a misspelt setting never silently does nothing.

Why pydantic: the schema is the documentation (``StRequest.model_json_schema()``), and its error
locations become the JSON paths users see.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..errors import TemplateError
from ..world_info_fields import SETTING_FIELDS

__all__ = [
    "AuthorNote",
    "BookRef",
    "Budget",
    "Generation",
    "GroupChat",
    "Options",
    "Persona",
    "ReasoningOptions",
    "RegexExtension",
    "RequestExtensions",
    "StRequest",
    "UserSettings",
    "WorldInfoOptions",
    "POST_PROCESSING",
    "parse_request",
    "read_request_text",
]

#: SillyTavern's ``custom_prompt_post_processing`` values ("" = none); ``claude`` is its deprecated
#: alias of ``merge``
POST_PROCESSING = ("", "none", "merge", "merge_tools", "semi", "semi_tools", "strict", "strict_tools", "single",
                   "claude")
Role = Literal["system", "user", "assistant"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Persona(_Strict):
    """The user's persona: SillyTavern's persona description and where it goes."""

    description: str = ""
    #: in_prompt (the personaDescription marker), top_an / bottom_an (around the Author's Note),
    #: at_depth (in the chat at ``depth`` with ``role``), none
    position: Literal["in_prompt", "top_an", "bottom_an", "at_depth", "none"] = "in_prompt"
    depth: int = Field(2, ge=0, le=10_000)
    role: Role = "system"
    #: the persona's lorebook: the name of a book in ``books``
    lorebook: str | None = None


class UserSettings(_Strict):
    name: str = "User"
    persona: Persona = Persona()


class AuthorNote(_Strict):
    """SillyTavern's Author's Note panel (chat metadata ``note_*``); defaults as a new chat has them."""

    content: str = ""
    #: inserted when the number of user messages is a multiple of the interval (1: always, 0: never)
    interval: int = Field(1, ge=0)
    depth: int = Field(4, ge=0, le=10_000)
    #: chat (in the chat at ``depth``), before / after the main prompt
    position: Literal["chat", "before", "after"] = "chat"
    role: Role = "system"


def _world_info_options() -> type[_Strict]:
    """The request's world-info settings: the field table's rows a request may set, with their bounds."""
    fields: dict[str, Any] = {}
    for f in SETTING_FIELDS:
        if f.request:
            kind = Literal[f.choices] if f.choices else f.kind  # type: ignore[valid-type]
            fields[f.st_name] = (kind, Field(f.default, ge=f.ge, le=f.le))
    return create_model("WorldInfoOptions", __base__=_Strict, __module__=__name__,  # type: ignore[call-overload,no-any-return]
                        __doc__="World-info settings under SillyTavern's names, with its shipped defaults.", **fields)


WorldInfoOptions = _world_info_options()


class ReasoningOptions(_Strict):
    """SillyTavern's reasoning settings (``power_user.reasoning``, the "Reasoning" block of its Advanced
    Formatting panel) for messages that carry reasoning; defaults as SillyTavern ships them."""

    #: add the newest messages' reasoning to the prompt ("Add to Prompts")
    add_to_prompts: bool = False
    prefix: str = "<think>"
    suffix: str = "</think>"
    separator: str = "\n"
    #: how many messages' reasoning are added, newest first ("Max Additions")
    max_additions: int = Field(1, ge=0)


class Options(_Strict):
    #: SillyTavern's prompt post-processing for back ends that refuse system messages after the first
    post_processing: Literal["", "none", "merge", "merge_tools", "semi", "semi_tools", "strict", "strict_tools",
                             "single", "claude"] = ""
    #: overrides the preset's ``names_behavior`` (-1 none, 0 default, 1 completion, 2 content)
    names_behavior: Literal[-1, 0, 1, 2] | None = None
    #: overrides the preset's ``squash_system_messages``
    squash_system_messages: bool | None = None
    #: scan the card's embedded ``character_book`` (what SillyTavern does once the user accepts the
    #: import offered for such a card); false: only the books given
    scan_embedded_book: bool = True
    prefer_character_prompt: bool = True
    prefer_character_jailbreak: bool = True
    seed: int = 0
    #: a preview (SillyTavern's dry run: no squashing, as its token counter shows it)
    dry_run: bool = False
    #: the API shape of ``body``: an OpenAI-compatible chat completion (the Custom source), or the
    #: Claude or Google conversion SillyTavern's server applies for those sources
    target: Literal["openai", "claude", "google"] = "openai"
    #: Claude/Google: send the leading system messages as the system prompt (the preset's ``use_sysprompt``)
    use_sysprompt: bool | None = None
    #: the clock the time macros read (ISO 8601); default: now
    now: str | None = None
    #: reasoning stored with chat messages, added to the prompt as SillyTavern's settings say
    reasoning: ReasoningOptions = ReasoningOptions()


class GroupChat(_Strict):
    """A group chat: its members, and how SillyTavern builds the card of the member replying now.

    The request's ``card`` is the member asked to reply. ``generation_mode`` is the group's
    "Group generation handling mode": ``swap`` (SillyTavern's default) sends that member's card
    alone; ``append`` ("join character cards") joins the enabled members' descriptions,
    personalities, scenarios and example messages and sends their depth prompts; ``append_disabled``
    joins the muted members' fields too. The join modes read the members' ``cards``.
    """

    #: the members' names, in the group's order
    members: list[str] = Field(min_length=1)
    name: str | None = None
    #: the members' cards (each an object or a path, like ``card``), matched to ``members`` by name;
    #: the request's ``card`` counts as the replying member's
    cards: list[Any] = Field(default_factory=list)
    generation_mode: Literal["swap", "append", "append_disabled"] = "swap"
    #: written before and after each member's field in the join modes: ``<FIELDNAME>`` is the
    #: field's name (Description, Personality, Scenario, Example Messages), ``{{char}}`` the member
    join_prefix: str = ""
    join_suffix: str = ""
    #: muted members (names among ``members``)
    disabled_members: list[str] = Field(default_factory=list)


class Generation(_Strict):
    """What kind of generation SillyTavern is asked for (its ``Generate(type)``)."""

    #: normal; continue (the last message is continued); impersonate (write as the user);
    #: regenerate / swipe (the last assistant message is replaced, so it is not sent); quiet (a
    #: background prompt, e.g. a summary)
    type: Literal["normal", "continue", "impersonate", "regenerate", "swipe", "quiet"] = "normal"
    #: the quiet prompt (``generateQuietPrompt({quietPrompt})``), sent last as a system message
    quiet_prompt: str = ""
    #: what is in SillyTavern's send box when the generation starts. ``None`` (default): nothing
    #: more, the chat's last message is the one just sent; a text: it is sent as the user's new
    #: message first; ``""`` (an empty box): a normal generation sends the preset's
    #: ``send_if_empty`` as the user's message, when it has one (``Generate``)
    input: str | None = None


class Budget(_Strict):
    """The context budget: ``max_context - max_tokens`` tokens, counted with ``tokenizer``."""

    #: the preset's ``openai_max_context`` when absent
    max_context: int | None = Field(None, ge=1)
    #: the preset's ``openai_max_tokens`` when absent
    max_tokens: int | None = Field(None, ge=0)
    #: o200k (GPT-4o and later: SillyTavern's choice for its default OpenAI models), cl100k (GPT-4,
    #: GPT-3.5), estimate (SillyTavern's no-tokenizer guess), or a name given to
    #: ``tavernbox.tokenizers.register_tokenizer``
    tokenizer: str = "o200k"
    #: dialogue examples: gradual (dropped when the context fills; SillyTavern's default), keep
    #: (``pin_examples``: always kept, added before the history), disabled (``strip_examples``)
    examples: Literal["gradual", "keep", "disabled"] = "gradual"


class BookRef(_Strict):
    book: Any
    source: Literal["global", "chat", "persona", "character"] | None = None


class RegexExtension(_Strict):
    """SillyTavern's regex extension: the user's global scripts, and whether the preset's and the card's own
    scripts were allowed (SillyTavern asks once per preset and per card; the default here is the answer users
    give to assets they chose, "allow")."""

    #: the global scripts: SillyTavern's script objects (``scriptName``, ``findRegex``, ``replaceString``...),
    #: a list or one object, as its export writes them
    scripts: Any = None
    #: run the preset's ``extensions.regex_scripts``
    preset_scripts: bool = True
    #: run the card's ``data.extensions.regex_scripts``
    card_scripts: bool = True
    #: CPU seconds all scripts together may take for one request (``REGEX_TIME_LIMIT`` past it); generous,
    #: as real scripts can be quadratic in a message's length
    time_limit: float = Field(5.0, gt=0, le=60)


class RequestExtensions(_Strict):
    regex: RegexExtension = RegexExtension()
    #: ST-Prompt-Template: ``{"enabled", <its settings as it stores them>}`` or ``true``/``false`` (on by default;
    #: checked by :func:`tavernbox.macros.st_extension_settings.parse_extensions`)
    prompt_template: Any = None
    #: Tavern Helper: ``{"enabled"}`` or ``true``/``false`` (on by default)
    tavern_helper: Any = None

    def template_settings(self) -> dict[str, Any] | None:
        """The two template extensions' settings as given (``None``: neither given, both at their defaults)."""
        given = {name: value for name in ("prompt_template", "tavern_helper")
                 if (value := getattr(self, name)) is not None}
        return given or None


class TextCompletionSettings(_Strict):
    """SillyTavern's ``power_user`` settings that shape a text-completion prompt (its names and defaults)."""

    trim_spaces: bool = True
    collapse_newlines: bool = False
    always_force_name2: bool = True
    single_line: bool = False
    custom_stopping_strings: str = ""
    custom_stopping_strings_macro: bool = True
    prefer_character_prompt: bool = True
    prefer_character_jailbreak: bool = True
    token_padding: int = 64


class TextCompletionSpec(_Strict):
    """Text completion (``text_completion``): SillyTavern's instruct, context and system-prompt
    templates, each an object in SillyTavern's field names, a file, or a name looked up in
    ``templates`` (a SillyTavern template folder; else the ``TAVERNBOX_ST_TEMPLATES`` folder).
    ``instruct: null`` is instruct mode off, ``sysprompt: null`` a disabled system prompt;
    ``export`` is SillyTavern's master export (an object or a file), whose parts fill what is not
    given. ``settings``: the ``power_user`` settings that shape the prompt."""

    instruct: Any = None
    context: Any = None
    sysprompt: Any = None
    export: Any = None
    templates: str | None = None
    settings: TextCompletionSettings = TextCompletionSettings()


class StRequest(_Strict):
    """One SillyTavern chat-completion request, as data."""

    preset: Any = None
    card: Any = None
    books: list[Any] = Field(default_factory=list)
    chat: Any = None
    user: UserSettings = UserSettings()
    author_note: AuthorNote = AuthorNote()
    world_info: WorldInfoOptions = WorldInfoOptions()
    group: GroupChat | None = None
    generation: Generation = Generation()
    budget: Budget = Budget()
    options: Options = Options()
    extensions: RequestExtensions = RequestExtensions()
    #: SillyTavern's global variables (``extension_settings.variables.global``)
    global_variables: dict[str, Any] | None = None
    #: present: the request is for a text-completion API (the preset is then not needed)
    text_completion: TextCompletionSpec | None = None


def _path_of(loc: tuple[Any, ...]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def parse_request(data: Any, *, base_dir: str | Path | None = None) -> StRequest:
    """Validate a request object (``REQUEST_INVALID`` with the JSON path of the first problem).

    Asset fields are checked for shape only here; they are read by
    :func:`tavernbox.sillytavern.assemble_request`. ``base_dir`` is kept for resolving relative paths.
    """
    if isinstance(data, StRequest):
        return data
    if not isinstance(data, Mapping):
        raise TemplateError("a request must be a JSON object", code="REQUEST_INVALID", path="$")
    try:
        request = StRequest.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith(("literal[", "function-"))))
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = f"unknown field {loc[-1]!r}" if loc else "unknown field"
        raise TemplateError(f"{message} at {_path_of(loc)}", code="REQUEST_INVALID", path=_path_of(loc)) from None
    if request.preset is None and request.text_completion is None:
        raise TemplateError("a request needs a preset (a SillyTavern chat-completion preset or its path)",
                            code="REQUEST_INVALID", path="$.preset")
    if request.chat is None:
        raise TemplateError("a request needs a chat ({\"messages\": [...]} or the path of a .json/.jsonl chat)",
                            code="REQUEST_INVALID", path="$.chat")
    for i, book in enumerate(request.books):
        if isinstance(book, Mapping) and "book" in book and "entries" not in book:
            try:
                BookRef.model_validate(dict(book))
            except ValidationError as exc:
                err = exc.errors()[0]
                where = _path_of(("books", i, *err["loc"]))
                raise TemplateError(f"{err['msg']} at {where}", code="REQUEST_INVALID", path=where) from None
        elif not isinstance(book, (str, Mapping)):
            raise TemplateError("a book is an object, a path, or {\"book\", \"source\"}", code="REQUEST_INVALID",
                                path=f"$.books[{i}]")
    if request.group is not None:
        _check_group(request.group)
    return request


def _check_group(group: GroupChat) -> None:
    """Member names are unique; muted members are members; member cards are objects or paths."""
    seen: set[str] = set()
    for i, name in enumerate(group.members):
        if name in seen:
            raise TemplateError(f"the member {name!r} is listed twice at $.group.members[{i}]",
                                code="REQUEST_INVALID", path=f"$.group.members[{i}]")
        seen.add(name)
    for i, name in enumerate(group.disabled_members):
        if name not in seen:
            raise TemplateError(f"the muted member {name!r} is not among $.group.members at "
                                f"$.group.disabled_members[{i}]", code="REQUEST_INVALID",
                                path=f"$.group.disabled_members[{i}]")
    for i, card in enumerate(group.cards):
        if not isinstance(card, (str, Mapping)):
            raise TemplateError(f"a member card is an object or a path at $.group.cards[{i}]",
                                code="REQUEST_INVALID", path=f"$.group.cards[{i}]")


def read_request_text(text: str, *, where: str = "request") -> Any:
    """Parse a request file's JSON text (``REQUEST_INVALID`` with line:column on a syntax error)."""
    from ..strict_json import loads

    try:
        return loads(text, what=f"the {where}", code="REQUEST_INVALID")
    except json.JSONDecodeError as exc:
        raise TemplateError(f"the {where} is not JSON: {exc.msg}", code="REQUEST_INVALID", line=exc.lineno,
                            column=exc.colno) from None
    except RecursionError:
        raise TemplateError(f"the {where} is nested too deeply", code="REQUEST_INVALID") from None

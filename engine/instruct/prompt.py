"""The text-completion prompt put together from its pieces, as SillyTavern's ``Generate`` joins them.

This is the back half of ``Generate`` for text-completion APIs once the front has done its work:
the story string (rendered and wrapped), the example dialogues (formatted), the chat history
(oldest first, each message already through its macros) and the prompts placed in it at a depth
(:mod:`.inject`), fitted to the context budget when one is given (:mod:`.fitting`; a continue's
prompt is counted a second time there, and each count adds the last prompt line to the newest
message once more).

The joins, in SillyTavern's order:

1. the prompts at a depth go into the history (:func:`~.inject.inject_in_chat`); then the
   post-history instructions (when the system prompt is on and has them) become one more user
   message at the end of the history (before the message continued, for a continue);
2. each message is formatted: with instruct mode, by :func:`~.messages.format_message` (the oldest
   with the *first* sequences, the last user message with the *last* input sequence unless
   impersonating); without, as ``Name: text`` and a line break (a narrator's without the name);
3. for a continue, the newest message is cut where its text ends and held back to go last;
4. with instruct mode, the template's ``user_alignment_message`` opens the history as a user message
   (with the first input sequence) unless the oldest message sent is a user's;
5. the newest message sent loses one trailing line break (instruct off, or ``wrap`` on and not a
   quiet generation), then the last prompt line is added to it: for a quiet generation its prompt
   first (instruct off: on a line of its own, and nothing more; on: as a narrator's message), then
   the instruct prompt line (:func:`~.messages.format_prompt_line`; the system's for a quiet prompt)
   or, instruct off, ``Char:`` on a line of its own (``User:`` when impersonating);
6. story string + examples + ``chat_start`` + the messages + the held-back continued message, without
   ``\\r``; with ``collapse_newlines``, runs of line breaks become one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .fitting import PromptBudget, fit_prompt, recheck_continue
from .inject import ExtensionPrompt, inject_in_chat
from .messages import ForceSequence, Speaker, format_message, format_prompt_line
from .prompt_items import ChatItem
from .templates import Context, Instruct, Substitute

__all__ = ["ChatItem", "PromptPieces", "assemble_prompt"]


@dataclass(frozen=True, slots=True)
class PromptPieces:
    """Everything :func:`assemble_prompt` joins; ``instruct`` is None with instruct mode off."""

    instruct: Instruct | None
    context: Context
    speaker: Speaker
    story: str
    examples: Sequence[str] = ()
    history: Sequence[ChatItem] = ()
    #: prompts placed in the history at a depth (Author's Note, depth prompt, persona, story string...)
    injections: Sequence[ExtensionPrompt] = ()
    generation: str = "normal"  # normal | continue | impersonate | regenerate | swipe | quiet
    #: a quiet generation's prompt (macros substituted), added after the newest message
    quiet_prompt: str = ""
    post_history: str = ""
    force_name2: bool = True
    collapse_newlines: bool = False
    #: the context budget (None: everything is sent)
    budget: PromptBudget | None = None


_FORMAT_TOKEN = "\u0000\ufffc\u0000\ufffd"
_NEWLINES = re.compile(r"\n+")


def _format(pieces: PromptPieces, item: ChatItem, substitute: Substitute, force: ForceSequence) -> str:
    if pieces.instruct is None:
        if item.name and not item.is_narrator:
            return f"{item.name}: {item.mes}\n"
        return f"{item.mes}\n"
    return format_message(pieces.instruct, pieces.speaker, substitute, name=item.name, text=item.mes,
                          is_user=item.is_user, is_narrator=item.is_narrator, force_avatar=item.force_avatar,
                          force=force)


class _History(NamedTuple):
    """The formatted history, oldest first, with what the budget needs to know of each message."""

    texts: list[str]
    sources: list[str]
    injected: list[bool]
    users: list[bool]
    #: the message continued, held back to go last (``continue``)
    held: str


def _history_texts(pieces: PromptPieces, substitute: Substitute) -> _History:
    """The formatted messages, oldest first, and the held-back continued message."""
    is_continue = pieces.generation == "continue"
    core, injected_at = inject_in_chat(pieces.history, pieces.injections, pieces.speaker, substitute,
                                       is_continue=is_continue)
    injected = {id(core[i]) for i in injected_at}
    if pieces.post_history:
        phi = ChatItem(name="", mes=pieces.post_history, is_user=True, source="post_history")
        core.insert(len(core) - 1 if is_continue else len(core), phi)
    last_user = max((i for i, item in enumerate(core) if item.is_user), default=-1)
    texts: list[str] = []
    held = ""
    for j, item in enumerate(core):
        force = ForceSequence.FIRST if j == 0 and pieces.instruct is not None else ForceSequence.NONE
        if j == last_user and pieces.instruct is not None and pieces.generation != "impersonate":
            force = ForceSequence.LAST
        text = _format(pieces, item, substitute, force)
        if is_continue and j == len(core) - 1:
            if pieces.instruct is not None:
                marked = ChatItem(item.name, item.mes.replace(_FORMAT_TOKEN, "") + _FORMAT_TOKEN, item.is_user,
                                  item.is_narrator, item.force_avatar)
                text = _format(pieces, marked, substitute, ForceSequence.LAST)
            if _FORMAT_TOKEN in text:
                text = text[: text.rfind(_FORMAT_TOKEN)]
            else:
                text = text[: text.rfind(item.mes) + len(item.mes)]
        texts.append(text)
    flags = [id(item) in injected for item in core]
    users = [item.is_user for item in core]
    sources = [item.source or f"message[{j}]" for j, item in enumerate(core)]
    if is_continue and len(texts) > 1:
        held = texts.pop()
        flags.pop()
        users.pop()
        sources.pop()
    return _History(texts, sources, flags, users, held)


class _LastLine(NamedTuple):
    """``modifyLastPromptLine``'s additions after the newest message: the quiet prompt, then the line
    the reply starts after."""

    quiet: str
    line: str

    @property
    def text(self) -> str:
        return self.quiet + self.line


def _last_line(pieces: PromptPieces, substitute: Substitute, newest: str = "") -> _LastLine:
    """What ``modifyLastPromptLine`` adds after ``newest``: a quiet generation's prompt (instruct
    off: on a line of its own, and nothing after it; on: formatted as a narrator's message, then the
    system's prompt line), then the instruct prompt line or, instruct off, the name line."""
    instruct, speaker = pieces.instruct, pieces.speaker
    is_continue = pieces.generation == "continue"
    impersonate = pieces.generation == "impersonate"
    quiet = pieces.quiet_prompt
    if instruct is None:
        if quiet:
            return _LastLine("\n" + quiet, "")
        return _LastLine("", _plain_last_line(pieces, newest)[len(newest):])
    quiet_text = ""
    if quiet:
        quiet_text = format_message(instruct, speaker, substitute, name=speaker.user, text=quiet, is_user=False,
                                    is_narrator=True)
    if is_continue:
        return _LastLine(quiet_text, "")
    name = speaker.user if impersonate else speaker.char
    if quiet and not impersonate:
        name = "System"
    line = format_prompt_line(instruct, speaker, substitute, name=name, impersonate=impersonate,
                              quiet=bool(quiet) and pieces.generation == "quiet")
    return _LastLine(quiet_text, line)


def _user_alignment(pieces: PromptPieces, substitute: Substitute) -> str:
    """The instruct template's ``user_alignment_message`` as a first user message (sent unless the
    oldest message sent already is a user's)."""
    instruct = pieces.instruct
    if instruct is None or not instruct.user_alignment_message:
        return ""
    item = ChatItem(name=pieces.speaker.user, mes=substitute(instruct.user_alignment_message), is_user=True)
    return _format(pieces, item, substitute, ForceSequence.FIRST)


@dataclass(frozen=True, slots=True)
class Span:
    """A range of the prompt (character offsets) and what produced it."""

    start: int
    end: int
    source: str


@dataclass(frozen=True, slots=True)
class PromptText:
    """The prompt and, for each of its parts, where it came from."""

    text: str
    spans: tuple[Span, ...]


def assemble_prompt(pieces: PromptPieces, substitute: Substitute) -> str:
    """The prompt string (see the module's description for what it covers)."""
    return assemble_prompt_spans(pieces, substitute).text


def assemble_prompt_spans(pieces: PromptPieces, substitute: Substitute) -> PromptText:
    """The prompt string with the provenance of every part: ``story_string``, ``example[i]``,
    ``chat_start``, ``user_alignment``, ``message[i]`` (the history given, in order, after the
    in-chat prompts are placed), ``in-chat:KEY+KEY`` (prompts placed at a depth), ``post_history``,
    ``quiet_prompt``, ``prompt_line`` (the sequence the reply starts after) and ``continued``."""
    history = _history_texts(pieces, substitute)
    texts, sources, examples = history.texts, history.sources, list(pieces.examples)
    alignment = _user_alignment(pieces, substitute)
    chat_start = substitute(pieces.context.chat_start + "\n") if pieces.context.chat_start else ""
    if pieces.budget is not None:
        line = _last_line(pieces, substitute).text
        fitted = fit_prompt(pieces.budget, fixed=(pieces.story, line, history.held), messages=texts,
                            injected=history.injected, users=history.users, examples=examples,
                            alignment=alignment, chat_start=chat_start)
        texts, sources = [texts[i] for i in fitted.kept], [sources[i] for i in fitted.kept]
        examples = examples[:fitted.examples]
        use_alignment = fitted.alignment
    else:
        use_alignment = bool(alignment) and not (history.users and history.users[0])
    modified = 1
    if pieces.budget is not None and pieces.generation == "continue" and history.held:
        sent = Sent(texts, sources, examples, use_alignment)
        sent, modified = _recheck(pieces, substitute, sent, alignment, chat_start, history.held)
        texts, sources, examples, use_alignment = sent
    instruct = pieces.instruct
    # instruct mode keeps the newest message's line break for a quiet generation (``Generate``)
    if texts and pieces.generation != "continue" and (
            instruct is None or (instruct.wrap and pieces.generation != "quiet")):
        texts[-1] = texts[-1][:-1] if texts[-1].endswith("\n") else texts[-1]
    newest = texts[-1] if texts else ""
    for _ in range(modified - 1):  # the continue's second count added the prompt line more than once
        newest += _last_line(pieces, substitute, newest).text
    last = _last_line(pieces, substitute, newest) if modified else _LastLine("", "")
    segments: list[tuple[str, str]] = [("story_string", pieces.story)]
    segments += [(f"example[{i}]", example) for i, example in enumerate(examples)]
    segments += [("chat_start", chat_start), ("user_alignment", alignment if use_alignment else "")]
    segments += list(zip(sources[:-1], texts[:-1]))
    if texts:
        segments.append((sources[-1], newest))
    segments += [("quiet_prompt", last.quiet), ("prompt_line", last.line), ("continued", history.held)]
    return _join(segments, pieces.collapse_newlines)


class Sent(NamedTuple):
    """The messages (oldest first), their sources and the example dialogues sent, and whether the
    user alignment message opens the history."""

    texts: list[str]
    sources: list[str]
    examples: list[str]
    alignment: bool


def _recheck(pieces: PromptPieces, substitute: Substitute, sent: Sent, alignment: str, chat_start: str,
             held: str) -> tuple[Sent, int]:
    """The continue's second count (:func:`~.fitting.recheck_continue`) applied to what is sent; the
    number of times the newest message gets the last prompt line."""
    assert pieces.budget is not None
    messages = ([alignment] if sent.alignment else []) + sent.texts
    checked = recheck_continue(pieces.budget, story=pieces.story, examples=sent.examples, chat_start=chat_start,
                               messages=messages, held=held,
                               modify=lambda text: text + _last_line(pieces, substitute, text).text)
    dropped = checked.dropped
    use_alignment = sent.alignment
    if use_alignment and dropped:
        use_alignment, dropped = False, dropped - 1
    return Sent(sent.texts[dropped:], sent.sources[dropped:], sent.examples[:checked.examples],
                use_alignment), checked.modified


def _join(segments: list[tuple[str, str]], collapse: bool) -> PromptText:
    """The segments joined without ``\r`` (and, with ``collapse``, each run of line breaks made one,
    the run's first break kept where it is), with their spans."""
    out: list[str] = []
    spans: list[Span] = []
    at = 0
    ends_in_newline = False
    for source, text in segments:
        text = text.replace("\r", "")
        if collapse and text:
            text = _NEWLINES.sub("\n", text)
            if ends_in_newline:
                text = text.lstrip("\n")
        if not text:
            continue
        out.append(text)
        spans.append(Span(at, at + len(text), source))
        at += len(text)
        ends_in_newline = text.endswith("\n")
    return PromptText("".join(out), tuple(spans))


def _plain_last_line(pieces: PromptPieces, last: str) -> str:
    """Instruct off: ``User:`` when impersonating, ``Char:`` when names are forced (not after a user
    message being continued)."""
    speaker = pieces.speaker
    is_continue = pieces.generation == "continue"
    if pieces.generation == "impersonate" and not is_continue:
        if not last.endswith("\n"):
            last += "\n"
        last += speaker.user + ":"
    continuing_first = is_continue and len(pieces.history) == 1
    # ``force_name2`` is off for an impersonation (the user speaks next)
    if pieces.force_name2 and pieces.generation != "impersonate" and not continuing_first:
        if not last.endswith("\n"):
            last += "\n"
        if not is_continue or not (pieces.history and pieces.history[-1].is_user):
            last += f"{speaker.char}:"
    return last

"""SillyTavern's text-completion formatting against its own recordings (tests/golden/st_text_completion).

The recordings hold the prompt and the stop strings SillyTavern 1.18.0 sent for each scenario, and
the instruct, context and system-prompt objects it had applied. These tests rebuild the pieces the
pure functions make and compare them with what SillyTavern sent, byte for byte: the whole stop
list of every recording; the story string the prompt starts with; the example dialogues and every
chat message in their place; the line the prompt ends with.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from tavernbox.instruct import (
    ChatItem,
    Context,
    ExtensionPrompt,
    ForceSequence,
    Instruct,
    PromptPieces,
    Speaker,
    StopSettings,
    StoryParams,
    assemble_prompt,
    format_examples,
    format_message,
    format_prompt_line,
    render_story_string,
    split_example_blocks,
    stopping_strings,
    wrap_story_string,
)
from tavernbox.macros import expand_macros

GOLDEN = Path(__file__).parent / "golden" / "st_text_completion" / "requests.jsonl"


@lru_cache(maxsize=1)
def _records() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines())


def _record(case_id: str) -> dict[str, Any]:
    return next(r for r in _records() if r["id"] == case_id)


class _Case:
    """One recording's templates, names and macro substitution."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.scenario = record["scenario"]
        snapshot = record["snapshot"]
        self.instruct = Instruct.from_fields(snapshot["instruct"]) if snapshot["instruct"]["enabled"] else None
        self.context = Context.from_fields(snapshot["context"])
        self.sysprompt = snapshot["sysprompt"]
        self.power_user = snapshot["power_user"]
        self.speaker = Speaker(user=snapshot["name1"], char=snapshot["name2"])
        self.gen = self.scenario.get("generation_type") or "normal"

    def substitute(self, text: str) -> str:
        return expand_macros(text, {"user": self.speaker.user, "char": self.speaker.char}).text

    def story_params(self) -> StoryParams:
        card = self.scenario["card"]["data"]
        system = ""
        if self.sysprompt["enabled"]:
            system = self.substitute(self.sysprompt["content"])
            if card.get("system_prompt") and self.power_user["prefer_character_prompt"]:
                system = expand_macros(card["system_prompt"], {"user": self.speaker.user, "char": self.speaker.char,
                                                              "original": system}).text
        persona = self.scenario.get("persona_description", "")
        if self.power_user["persona_description_position"] != 0:
            persona = ""
        return StoryParams(description=self.substitute(card["description"]),
                           personality=self.substitute(card["personality"]), scenario=self.substitute(card["scenario"]),
                           persona=self.substitute(persona), system=system, char=self.speaker.char,
                           user=self.speaker.user)


def _each(check: Any) -> int:
    """Run ``check`` on every recording; fail with every mismatch; the number checked."""
    failures, checked = [], 0
    for record in _records():
        try:
            checked += check(_Case(record)) is not False
        except AssertionError as exc:
            failures.append(f"{record['id']}: {exc}")
    assert not failures, f"{len(failures)} recordings differ:\n" + "\n".join(failures[:5])
    return checked


def test_the_stop_strings_are_sillytaverns() -> None:
    assert _each(_check_stops) >= 80


def _check_stops(case: _Case) -> None:
    chat = case.scenario["chat"]
    settings = StopSettings(custom_stopping_strings=case.power_user["custom_stopping_strings"],
                            custom_stopping_strings_macro=case.power_user["custom_stopping_strings_macro"],
                            single_line=case.power_user["single_line"])
    stops = stopping_strings(case.instruct, case.context, case.speaker, case.substitute, settings,
                             impersonate=case.gen == "impersonate",
                             continue_after_user=case.gen == "continue" and chat[-1]["role"] == "user")
    assert stops == case.record["stop"]


def _plain_top(case: _Case) -> bool:
    """Scenarios whose story string sits at the top of the prompt with nothing before it."""
    sc = case.scenario
    note = sc.get("author_note") or {}
    return (not case.context.in_chat and not sc.get("book") and note.get("position") not in ("before", "after")
            and case.power_user["persona_description_position"] in (0, 9) and case.gen != "impersonate")


def test_the_prompt_starts_with_the_story_string() -> None:
    assert _each(_check_story) >= 60


def _check_story(case: _Case) -> bool:
    if not _plain_top(case):
        return False  # world info, anchors or a depth change what comes first
    story = render_story_string(case.context, case.instruct, case.story_params(), case.substitute)
    if case.instruct is not None:
        story = wrap_story_string(story, case.context, case.instruct, case.substitute)
    assert story.strip()
    assert case.record["prompt"].startswith(story), story
    return True


def _examples(case: _Case) -> list[str]:
    text = case.scenario["card"]["data"]["mes_example"]
    blocks = ["<START>\n" + block.strip() + "\n" for block in text.split("<START>")[1:]]
    return [case.substitute(b) for b in blocks]


def test_formatted_examples_and_messages_are_in_the_prompt() -> None:
    assert _each(_check_messages) >= 60


def _check_messages(case: _Case) -> bool:
    if case.instruct is None or case.instruct.skip_examples or case.scenario.get("max_context"):
        return False  # instruct off, examples skipped, or a budget that drops some
    prompt = case.record["prompt"]
    examples = "".join(format_examples(_examples(case), case.instruct, case.context, case.speaker, case.substitute))
    if examples:
        assert examples in prompt
    for message in case.scenario["chat"][1:-1]:
        is_user = message["role"] == "user"
        name = message.get("name") or (case.speaker.user if is_user else case.speaker.char)
        if message["role"] == "system":
            name = message.get("name") or "System"
        text = format_message(case.instruct, case.speaker, case.substitute, name=name,
                              text=case.substitute(message["content"]), is_user=is_user,
                              is_narrator=message["role"] == "system",
                              force_avatar=bool(message.get("force_avatar")))
        assert text in prompt, text
    return True


def test_the_prompt_ends_with_the_prompt_line() -> None:
    assert _each(_check_prompt_line) >= 60


def _check_prompt_line(case: _Case) -> bool:
    if case.instruct is None or case.gen == "continue":
        return False  # instruct off, or a continue (the prompt ends inside the message continued)
    quiet = case.gen == "quiet"  # generateQuietPrompt: the system's prompt line, named "System"
    name = "System" if quiet else case.speaker.user if case.gen == "impersonate" else case.speaker.char
    line = format_prompt_line(case.instruct, case.speaker, case.substitute, name=name,
                              impersonate=case.gen == "impersonate", quiet=quiet)
    assert case.record["prompt"].endswith(line.lstrip("\n")), line
    return True


def test_first_and_last_sequences_are_used() -> None:
    case = _Case(_record("first-last-sequences"))
    assert case.instruct is not None
    prompt = case.record["prompt"]
    first = format_message(case.instruct, case.speaker, case.substitute, name="Mira",
                           text=case.scenario["chat"][0]["content"].replace("{{char}}", "Mira"), is_user=False,
                           force=ForceSequence.FIRST)
    assert first.startswith("<|first-out|>") and first in prompt
    assert "<|last-in|>" in prompt


ROLE_NAMES = ("system", "user", "assistant")


def _whole_prompt_case(case: _Case) -> bool:
    """Recordings :func:`assemble_prompt` covers here: no world info (it needs the activation the
    shared front runs) and a budget everything fits (the llama3 counts are not offline yet)."""
    sc = case.scenario
    return not sc.get("book") and not sc.get("max_context")


def _injections_and_anchors(case: _Case, story: str) -> tuple[list[ExtensionPrompt], str, str]:
    """The prompts SillyTavern places in the chat, and the story string's two anchors."""
    sc, pu = case.scenario, case.power_user
    prompts: list[ExtensionPrompt] = []
    before = after = ""
    persona = sc.get("persona_description", "")
    position = pu["persona_description_position"]
    note = sc.get("author_note")
    if note:
        text = note["content"]
        if position == 2:
            text = f"{persona}\n{text}"
        elif position == 3:
            text = f"{text}\n{persona}"
        if note["position"] == "chat":
            prompts.append(ExtensionPrompt("2_floating_prompt", text, note["depth"], note["role"]))
        elif note["position"] == "before":
            before = case.substitute(text.strip()).strip()
        else:
            after = case.substitute(text.strip()).strip()
    if position == 4:
        prompts.append(ExtensionPrompt("PERSONA_DESCRIPTION", persona, pu["persona_description_depth"],
                                       ROLE_NAMES[pu["persona_description_role"]]))
    depth_prompt = sc["card"]["data"]["extensions"].get("depth_prompt") or {}
    if depth_prompt.get("prompt"):
        prompts.append(ExtensionPrompt("DEPTH_PROMPT", case.substitute(depth_prompt["prompt"].strip()),
                                       depth_prompt["depth"], depth_prompt["role"]))
    if case.context.in_chat and story:
        prompts.append(ExtensionPrompt("__STORY_STRING__", story, case.context.story_string_depth,
                                       ROLE_NAMES[case.context.story_string_role]))
    return prompts, before, after


def _history(case: _Case) -> list[ChatItem]:
    chat = list(case.scenario["chat"])
    if case.gen == "regenerate" and chat and chat[-1]["role"] == "assistant":
        chat = chat[:-1]  # SillyTavern deletes the reply it regenerates first
    items = []
    for message in chat:
        role = message["role"]
        name = message.get("name") or {"user": case.speaker.user, "assistant": case.speaker.char}.get(role, "System")
        items.append(ChatItem(name=name, mes=message["content"], is_user=role == "user", is_narrator=role == "system",
                              force_avatar=bool(message.get("force_avatar"))))
    return items


def _post_history(case: _Case) -> str:
    if not case.sysprompt["enabled"]:
        return ""
    card_phi = case.scenario["card"]["data"].get("post_history_instructions")
    if card_phi and case.power_user["prefer_character_jailbreak"]:
        return expand_macros(card_phi, {"user": case.speaker.user, "char": case.speaker.char,
                                        "original": case.sysprompt["post_history"]}).text
    return case.substitute(case.sysprompt["post_history"])


def _check_whole_prompt(case: _Case) -> bool:
    if not _whole_prompt_case(case):
        return False
    _, before, after = _injections_and_anchors(case, "")
    params = dataclasses.replace(case.story_params(), anchorBefore=before, anchorAfter=after)
    story = render_story_string(case.context, case.instruct, params, case.substitute)
    raw_examples = case.substitute(case.scenario["card"]["data"]["mes_example"])
    blocks = split_example_blocks(raw_examples, case.context, case.substitute, instruct_on=case.instruct is not None)
    examples: list[str] = blocks
    if case.instruct is not None:
        story = wrap_story_string(story, case.context, case.instruct, case.substitute)
        examples = format_examples(blocks, case.instruct, case.context, case.speaker, case.substitute)
    injections, _, _ = _injections_and_anchors(case, story)
    if case.context.in_chat:
        story = ""
    pieces = PromptPieces(instruct=case.instruct, context=case.context, speaker=case.speaker, story=story,
                          examples=examples, history=_history(case), injections=injections, generation=case.gen,
                          quiet_prompt=case.substitute(case.scenario.get("quiet_prompt") or ""),
                          post_history=_post_history(case),
                          force_name2=case.power_user["always_force_name2"] or case.gen == "quiet",
                          collapse_newlines=case.power_user["collapse_newlines"])
    prompt = assemble_prompt(pieces, case.substitute)
    assert prompt == case.record["prompt"], _first_difference(prompt, case.record["prompt"])
    return True


def _first_difference(ours: str, theirs: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    return f"first difference at {at}: ours {ours[max(0, at - 60):at + 60]!r}\ntheirs {theirs[max(0, at - 60):at + 60]!r}"


def test_whole_prompts_are_sillytaverns_byte_for_byte() -> None:
    # every shipped instruct template with its context template, instruct off, names, wrap, sequences,
    # examples and separators, system prompts and post-history instructions, generation types
    assert _each(_check_whole_prompt) >= 60

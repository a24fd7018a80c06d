#!/usr/bin/env python3
"""Build the text-completion oracle scenarios, run them, and keep what SillyTavern sent as golden data.

Why: tavernbox's text-completion path must produce exactly the prompt string and stop strings SillyTavern 1.18.0
sends to a text-completion back end. The reference is SillyTavern itself, driven through its Text Completion API
by `../shared/tools/st-oracle/oracle_tc.py` (its own SillyTavern copy on 127.0.0.1:8127, the llama.cpp stub
`stub_tc.py` on 127.0.0.1:8128; see that folder's README-text-completion.md). Every scenario is built here from
one hand-made card, world book and chat (inline: they are small), so the recording is reproducible.

  make_scenarios.py list                  # ids and what each pins
  make_scenarios.py show ID               # one scenario as the oracle receives it
  make_scenarios.py run [--only ID,ID]    # run through oracle_tc.py --batch, merge into requests.jsonl by id

A failed case is written to failed.jsonl (id, error) instead.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SHARED = os.environ.get("TAVERNBOX_SHARED", os.path.join(REPO, "..", "shared"))
# the quiet cases need an oracle that sends generation type quiet through generateQuietPrompt({quietPrompt}), as
# the chat-completion oracle.py does (TAVERNBOX_ORACLE_TC names such a copy until the shared one does)
ORACLE = os.environ.get("TAVERNBOX_ORACLE_TC") or os.path.join(SHARED, "tools", "st-oracle", "oracle_tc.py")
OUT = os.path.join(HERE, "requests.jsonl")
FAILED = os.path.join(HERE, "failed.jsonl")
ST_HOME = os.environ.get("ST_ORACLE_HOME", os.path.join(os.path.expanduser("~"), ".cache", "st-oracle"))
PRESETS = os.path.join(ST_HOME, "st", "default", "content", "presets")

USER = "Ash"
PERSONA = "Ash is a wandering cartographer with ink-stained fingers."

CARD: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "{{char}} is the keeper of the lighthouse at Grey Point. She speaks softly.",
        "personality": "patient, curious, dry humour",
        "scenario": "{{user}} arrives at the lighthouse during a storm.",
        "first_mes": "The door creaks open. \"Come in, quickly,\" says {{char}}.",
        "mes_example": "<START>\n{{user}}: Do you ever get lonely?\n{{char}}: *She smiles.* The gulls keep me company.\n"
                       "<START>\n{{user}}: What is that light?\n{{char}}: The lamp. It has not failed in forty years.",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "tavernbox",
        "character_version": "1",
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "",
                       "depth_prompt": {"prompt": "", "depth": 4, "role": "system"}},
    },
}

CHAT = [
    {"role": "assistant", "content": "The door creaks open. \"Come in, quickly,\" says Mira."},
    {"role": "user", "content": "Thank you. The storm is getting worse."},
    {"role": "assistant", "content": "*She hands you a blanket.* Sit by the fire. Tea?"},
    {"role": "user", "content": "Yes, please. How long have you lived here?"},
]


def _entry(uid: int, content: str, position: int, **extra: Any) -> dict[str, Any]:
    base = {"uid": uid, "key": [], "keysecondary": [], "comment": f"entry {uid}", "content": content, "constant": True,
            "selective": False, "order": 100 + uid, "position": position, "disable": False, "depth": 4, "role": 0,
            "probability": 100, "useProbability": True, "excludeRecursion": False, "preventRecursion": False,
            "vectorized": False, "addMemo": True, "group": "", "scanDepth": None, "caseSensitive": None,
            "matchWholeWords": None, "automationId": "", "sticky": 0, "cooldown": 0, "delay": 0, "displayIndex": uid}
    base.update(extra)
    return base


BOOK = {"entries": {str(e["uid"]): e for e in (
    _entry(0, "[Lore before: Grey Point is a rocky cape.]", 0),
    _entry(1, "[Lore after: storms come from the west.]", 1),
    _entry(2, "[AN top: the lamp uses whale oil.]", 2),
    _entry(3, "[AN bottom: the keeper's log is on the desk.]", 3),
    _entry(4, "[At depth 2 as system: thunder rolls.]", 4, depth=2, role=0),
    _entry(5, "[At depth 1 as user: you feel cold.]", 4, depth=1, role=1),
    _entry(6, "[At depth 3 as assistant: Mira hums.]", 4, depth=3, role=2),
    _entry(7, "[Examples top: keep replies short.]", 5),
    _entry(8, "[Examples bottom: stay in character.]", 6),
)}}

HANDWRITTEN_STORY = (
    "{{#if system}}{{system}}\n{{/if}}"
    "{{! a hand-written story string }}\n"
    "{{#if description~}}\n"
    "  ## {{char}}\n"
    "  {{description}}\n"
    "{{~else}}(no description){{/if}}\n"
    "{{#unless scenario}}No scenario.{{else}}Scenario: {{scenario}}{{/unless}}\n"
    "{{#if personality}}{{char}} is {{personality}}.{{/if}} {{#if missingField}}never{{else}}-{{/if}}\n"
    "{{#with persona}}Persona: {{.}}{{/with}}\n"
    "{{{wiBefore}}}{{&wiAfter}}\n"
    "{{!-- {{mesExamples}} is left for the chat --}}\n"
    "{{#each anchorBefore}}{{this}}{{/each}}{{trim}}"
)


def _names(kind: str) -> list[str]:
    return sorted(name[:-5] for name in os.listdir(os.path.join(PRESETS, kind)) if name.endswith(".json"))


def _base(case_id: str, pins: str, **fields: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {"id": case_id, "pins": pins, "card": copy.deepcopy(CARD), "chat": copy.deepcopy(CHAT),
                          "user_name": USER, "persona_description": PERSONA, "instruct": "ChatML", "context": "ChatML",
                          "sysprompt": "Neutral - Chat"}
    sc.update(fields)
    return sc


def _card(**data: Any) -> dict[str, Any]:
    card = copy.deepcopy(CARD)
    for key, value in data.items():
        if key == "depth_prompt":
            card["data"]["extensions"]["depth_prompt"] = value
        else:
            card["data"][key] = value
    return card


def scenarios() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    contexts = set(_names("context"))
    for name in _names("instruct"):
        context = name if name in contexts else "Default"
        out.append(_base(f"instruct-{name}", f"instruct template {name!r} with context template {context!r}",
                         instruct=name, context=context))
    for context in ("Default", "Minimalist", "NovelAI", "OldDefault", "ChatML"):
        out.append(_base(f"instruct-off-{context}", f"instruct mode off, context template {context!r}",
                         instruct=None, context=context))
    for behavior in ("none", "force", "always"):
        out.append(_base(f"names-{behavior}", f"names_behavior {behavior!r}", instruct_overrides={"names_behavior": behavior}))
    out.append(_base("wrap-off", "wrap off", instruct_overrides={"wrap": False}))
    out.append(_base("macro-off", "instruct macro off", instruct_overrides={"macro": False}))
    out.append(_base("first-last-sequences", "first/last input/output/system sequences", instruct_overrides={
        "first_output_sequence": "<|first-out|>\n", "last_output_sequence": "<|last-out|>\n",
        "first_input_sequence": "<|first-in|>\n", "last_input_sequence": "<|last-in|>\n",
        "last_system_sequence": "<|last-sys|>\n"}))
    out.append(_base("story-prefix-suffix", "story_string_prefix/suffix", instruct_overrides={
        "story_string_prefix": "<<STORY>>\n", "story_string_suffix": "<</STORY>>\n"}))
    out.append(_base("system-same-as-user", "system_same_as_user", instruct_overrides={"system_same_as_user": True},
                     chat=CHAT[:2] + [{"role": "system", "content": "The wind howls outside."}] + CHAT[2:]))
    out.append(_base("narrator-message", "a system (narrator) message in the chat",
                     chat=CHAT[:2] + [{"role": "system", "content": "The wind howls outside."}] + CHAT[2:]))
    out.append(_base("skip-examples", "skip_examples", instruct_overrides={"skip_examples": True}))
    out.append(_base("examples-separator", "example_separator and chat_start", context_overrides={
        "example_separator": "***", "chat_start": "### Start of the chat"}))
    out.append(_base("examples-separator-off", "examples with instruct off, custom separator", instruct=None,
                     context="Default", context_overrides={"example_separator": "--- example ---"}))
    out.append(_base("stop-strings-off", "sequences_as_stop_strings, use_stop_strings, names_as_stop_strings off",
                     instruct_overrides={"sequences_as_stop_strings": False},
                     context_overrides={"use_stop_strings": False, "names_as_stop_strings": False}))
    out.append(_base("custom-stop", "custom_stopping_strings", power_user={
        "custom_stopping_strings": "[\"###\", \"{{user}}:\"]", "custom_stopping_strings_macro": True}))
    out.append(_base("world-info-all", "world info at every position (before, after, AN top/bottom, depth, examples)",
                     book=BOOK, author_note={"content": "[Author's note: keep it tense.]", "interval": 1, "depth": 2,
                                             "position": "chat", "role": "system"}))
    out.append(_base("world-info-instruct-off", "world info at every position, instruct off", book=BOOK,
                     instruct=None, context="Default",
                     author_note={"content": "[AN]", "interval": 1, "depth": 2, "position": "chat", "role": "system"}))
    for position, depth in (("chat", 1), ("before", 4), ("after", 4)):
        out.append(_base(f"author-note-{position}", f"Author's Note {position}", author_note={
            "content": "[Author's note: {{char}} is tired.]", "interval": 1, "depth": depth, "position": position,
            "role": "system"}))
    out.append(_base("author-note-user-role", "Author's Note in chat as user", author_note={
        "content": "[note as user]", "interval": 1, "depth": 3, "position": "chat", "role": "user"}))
    for position, label in ((0, "in_prompt"), (2, "top_an"), (3, "bottom_an"), (4, "at_depth"), (9, "none")):
        extra: dict[str, Any] = {"persona_description_position": position}
        if position == 4:
            extra.update(persona_description_depth=1, persona_description_role=0)
        out.append(_base(f"persona-{label}", f"persona description position {label}", power_user=extra,
                         author_note={"content": "[AN text]", "interval": 1, "depth": 2, "position": "chat",
                                      "role": "system"}))
    out.append(_base("depth-prompt", "the card's depth prompt", card=_card(depth_prompt={
        "prompt": "[Depth prompt: {{char}} watches the sea.]", "depth": 2, "role": "system"})))
    out.append(_base("depth-prompt-assistant", "the card's depth prompt as assistant at depth 0", card=_card(
        depth_prompt={"prompt": "[Mira thinks]", "depth": 0, "role": "assistant"})))
    out.append(_base("post-history", "post-history instructions (system prompt's and the card's)",
                     sysprompt_overrides={"post_history": "[Post-history: reply in two sentences.]"}))
    out.append(_base("post-history-card", "the card's post_history_instructions win (prefer_character_jailbreak)",
                     card=_card(post_history_instructions="[Card PHI: {{original}} and be terse.]"),
                     sysprompt_overrides={"post_history": "[System PHI]"}))
    out.append(_base("card-system-prompt", "the card's system prompt (prefer_character_prompt)",
                     card=_card(system_prompt="Card system prompt for {{char}}. {{original}}")))
    out.append(_base("sysprompt-off", "system prompt disabled", sysprompt=None))
    out.append(_base("sysprompt-roleplay", "another system prompt", sysprompt="Roleplay - Detailed"))
    out.append(_base("story-in-chat", "story string in chat at depth 1 as system", context_overrides={
        "story_string_position": 1, "story_string_depth": 1, "story_string_role": 0}))
    out.append(_base("story-in-chat-instruct-off", "story string in chat, instruct off", instruct=None,
                     context="Default", context_overrides={"story_string_position": 1, "story_string_depth": 2,
                                                           "story_string_role": 1}))
    for gen in ("continue", "impersonate", "regenerate"):
        chat = CHAT + [{"role": "assistant", "content": "*She pours the tea.* Long enough"}] if gen != "impersonate" else CHAT
        out.append(_base(f"gen-{gen}", f"generation type {gen}", generation_type=gen, chat=chat))
        out.append(_base(f"gen-{gen}-off", f"generation type {gen}, instruct off", generation_type=gen, chat=chat,
                         instruct=None, context="Default"))
    long_chat = []
    for i in range(30):
        long_chat.append({"role": "user", "content": f"Question {i}: tell me about the lighthouse, part {i}."})
        long_chat.append({"role": "assistant", "content": f"Answer {i}: the lighthouse was built long ago, {i} stones high, "
                                                          "and the lamp burns through every storm."})
    out.append(_base("budget-trims-history", "a small context budget trims history and examples",
                     chat=long_chat, max_context=768, max_tokens=256))
    out.append(_base("budget-trims-history-off", "a small context budget, instruct off", chat=long_chat,
                     max_context=768, max_tokens=256, instruct=None, context="Default"))
    for label, instruct, context in (("", "ChatML", "ChatML"), ("-off", None, "Default")):
        out.append(_base(f"budget-estimate{label}", "a small context budget counted by SillyTavern's estimate "
                         "(tokenizer None: 3.35 characters a token, 64 tokens of padding)", chat=long_chat,
                         max_context=768, max_tokens=256, instruct=instruct, context=context,
                         power_user={"tokenizer": 0}))
    out.append(_base("handlebars-story-string", "a hand-written Handlebars story string",
                     context_overrides={"story_string": HANDWRITTEN_STORY}))
    out.append(_base("handlebars-story-string-off", "a hand-written Handlebars story string, instruct off",
                     instruct=None, context="Default", context_overrides={"story_string": HANDWRITTEN_STORY}))
    out.append(_base("group-names-in-chat", "messages with other speakers' names and force_avatar", chat=[
        CHAT[0], {"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": "I am the ghost.", "name": "Ghost", "force_avatar": True}, CHAT[3]]))
    out.append(_base("trim-collapse", "trim_spaces off, collapse_newlines on", power_user={
        "trim_spaces": False, "collapse_newlines": True}, chat=[CHAT[0], {"role": "user", "content": "  Spaces  \n\n\n\nand lines  "}]))
    out.append(_base("single-line", "single_line", power_user={"single_line": True}))
    out.append(_base("no-examples-card", "a card without examples or personality",
                     card=_card(mes_example="", personality="")))
    for max_context, max_tokens in ((768, 79), (768, 300), (1024, 556), (768, 256)):
        out.append(_base(f"budget-continue-recheck-off-{max_context}-{max_tokens}", "a continue whose assembled "
                         "prompt is counted again (checkPromptSize), instruct off", chat=long_chat,
                         generation_type="continue", max_context=max_context, max_tokens=max_tokens, instruct=None,
                         context="Default", power_user={"tokenizer": 0}))
    out.append(_base("budget-continue-recheck", "a continue whose assembled prompt is counted again "
                     "(checkPromptSize)", chat=long_chat, generation_type="continue", max_context=768,
                     max_tokens=300, power_user={"tokenizer": 0}))
    quiet = "Summarise {{char}}'s mood in one line."
    out.append(_base("quiet", "a quiet prompt (generateQuietPrompt)", generation_type="quiet", quiet_prompt=quiet))
    out.append(_base("quiet-off", "a quiet prompt, instruct off", generation_type="quiet", quiet_prompt=quiet,
                     instruct=None, context="Default"))
    out.append(_base("quiet-last-system-sequence", "a quiet prompt with last_system_sequence and names always",
                     generation_type="quiet", quiet_prompt=quiet, instruct_overrides={
                         "last_system_sequence": "<|im_start|>narrator", "names_behavior": "always"}))
    out.append(_base("quiet-llama3-wrap-off", "a quiet prompt, Llama 3 Instruct with wrap off",
                     generation_type="quiet", quiet_prompt=quiet, instruct="Llama 3 Instruct",
                     context="Llama 3 Instruct", instruct_overrides={"wrap": False}))
    return out


def inline(sc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sc.items() if k != "pins"}


def run(only: set[str] | None) -> None:
    cases = [sc for sc in scenarios() if not only or sc["id"] in only]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            for sc in cases:
                f.write(json.dumps(inline(sc), ensure_ascii=False) + "\n")
        subprocess.run([sys.executable, ORACLE, "--batch", src, dst], check=False)
        results = {}
        if os.path.exists(dst):
            for line in open(dst, encoding="utf-8"):
                res = json.loads(line)
                results[res["id"]] = res
    merge(cases, results)


def _record(sc: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    body = res["request"]
    snap = res["snapshot"]
    return {
        "id": sc["id"], "pins": sc["pins"], "scenario": inline(sc), "st_version": res.get("st_version"),
        "prompt": body["prompt"], "stop": body.get("stop"),
        "request_fields": {k: body.get(k) for k in ("n_predict", "max_tokens", "stopping_strings", "stream") if k in body},
        "snapshot": {k: snap.get(k) for k in ("instruct", "context", "sysprompt", "power_user", "max_context",
                                              "amount_gen", "name1", "name2")},
    }


def merge(cases: list[dict[str, Any]], results: dict[str, dict[str, Any]]) -> None:
    kept: dict[str, dict[str, Any]] = {}
    if os.path.exists(OUT):
        for line in open(OUT, encoding="utf-8"):
            rec = json.loads(line)
            kept[rec["id"]] = rec
    failed: dict[str, str] = {}
    if os.path.exists(FAILED):
        for line in open(FAILED, encoding="utf-8"):
            rec = json.loads(line)
            failed[rec["id"]] = rec["error"]
    for sc in cases:
        res = results.get(sc["id"])
        if res is not None and res.get("ok"):
            kept[sc["id"]] = _record(sc, res)
            failed.pop(sc["id"], None)
        else:
            failed[sc["id"]] = (res or {}).get("error", "no result")
    order = [sc["id"] for sc in scenarios()]
    with open(OUT, "w", encoding="utf-8") as f:
        for cid in order:
            if cid in kept:
                f.write(json.dumps(kept[cid], ensure_ascii=False) + "\n")
    if not failed:
        if os.path.exists(FAILED):
            os.remove(FAILED)
        return
    with open(FAILED, "w", encoding="utf-8") as f:
        for cid in order:
            if cid in failed:
                f.write(json.dumps({"id": cid, "error": failed[cid]}, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> None:
    if not argv or argv[0] == "list":
        for sc in scenarios():
            print(f"{sc['id']}: {sc['pins']}")
    elif argv[0] == "show":
        print(json.dumps(next(sc for sc in scenarios() if sc["id"] == argv[1]), ensure_ascii=False, indent=1))
    elif argv[0] == "run":
        only = set(argv[2].split(",")) if len(argv) > 2 and argv[1] == "--only" else None
        run(only)


if __name__ == "__main__":
    main(sys.argv[1:])

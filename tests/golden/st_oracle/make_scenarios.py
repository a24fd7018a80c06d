#!/usr/bin/env python3
"""Build the SillyTavern-oracle scenarios, run them, and keep what SillyTavern sent as golden data.

Why: tavernbox's `builtin-st` strategy must produce exactly the chat-completion `messages` SillyTavern 1.18.0
sends. The only trustworthy reference is SillyTavern itself, driven by `../shared/tools/st-oracle/oracle.py`.
This script is the reproducible recipe for `requests.jsonl`: every scenario is built here from the shared corpus
(`../shared/corpora`, referenced by corpus-relative path so the golden file stays small) plus a few hand-made
inline assets, and only inlined when the oracle runs.

  make_scenarios.py list                       # ids and one-line descriptions
  make_scenarios.py show ID                    # the stored (corpus-referencing) scenario
  make_scenarios.py run [--only ID,ID] [--group A1,B]   # run through oracle.py --batch, merge into requests.jsonl
  make_scenarios.py refresh                    # recompute pins/volatile of recorded cases (no SillyTavern needed)
  make_scenarios.py table                      # the per-case table of README.md (from requests/failed.jsonl)

`run` needs SillyTavern on 127.0.0.1:8123 and stub.py on 127.0.0.1:8124 (see the oracle's README). Results are
merged by id into requests.jsonl in generator order; a failed case is retried once and then written to
failed.jsonl (id, error) so the README can list it.

Asset references in a stored scenario (resolved by `inline`):
  {"corpus": "cards/x.json"}                              the file as it is (cp1252 files decoded as such)
  {"corpus": "cards/x.json", "patch": {...}}              then a deep merge of `patch` (dicts merge, others replace)
  {"corpus": "cards/x.json", "drop": ["data.extensions.regex_scripts"]}   then those keys removed
  {"corpus": "presets/x.json", "prompts_patch": {IDENT: {...}}, "add_prompts": [{prompt, "order_after": IDENT}]}
                                                          preset prompt fields replaced / prompts added to
                                                          `prompts` and to every `prompt_order` list
  {"corpus": "presets/x.json", "disable_prompts": [IDENT]}  those prompts disabled in every `prompt_order` list
"""
from __future__ import annotations

import copy
import functools
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SHARED = os.environ.get("TAVERNBOX_SHARED", os.path.join(REPO, "..", "shared"))
CORPUS = os.path.join(SHARED, "corpora")
ORACLE = os.path.join(SHARED, "tools", "st-oracle", "oracle.py")
OUT = os.path.join(HERE, "requests.jsonl")
FAILED = os.path.join(HERE, "failed.jsonl")
STUB_URL = os.environ.get("STUB_URL", "http://127.0.0.1:8124")
ST_HOME = os.environ.get("ST_ORACLE_HOME", os.path.join(os.path.expanduser("~"), ".cache", "st-oracle"))

USER = "Ash"
PERSONA = "Ash is a wandering cartographer with ink-stained fingers."

# Macros whose output changes from run to run (time, randomness, chat-id seeded picks).
VOLATILE_RE = re.compile(r"\{\{\s*(random|roll|pick|time|date|weekday|isodate|isotime|datetimeformat|idle_duration|"
                         r"idleDuration|timeDiff)\b", re.I)


# ---------------------------------------------------------------- assets

def corpus(path: str, **extra: Any) -> dict:
    """A reference to a corpus file (resolved only when the oracle runs)."""
    ref = {"corpus": path}
    ref.update(extra)
    return ref


def load_corpus(path: str) -> Any:
    raw = open(os.path.join(CORPUS, path), "rb").read()
    if ".cp1252." in path:
        return json.loads(raw.decode("cp1252"), strict=False)
    return json.loads(raw.decode("utf-8-sig"))


def deep_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = deep_merge(base.get(k), v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


def resolve(ref: Any) -> Any:
    """Turn a stored asset reference into the object the oracle takes."""
    if not (isinstance(ref, dict) and "corpus" in ref):
        return ref
    obj = load_corpus(ref["corpus"])
    if "patch" in ref:
        obj = deep_merge(obj, ref["patch"])
    for dotted in ref.get("drop") or []:
        *parents, last = dotted.split(".")
        node = obj
        for k in parents:
            node = node.get(k) or {}
        node.pop(last, None)
    for ident, fields in (ref.get("prompts_patch") or {}).items():
        hits = [p for p in obj["prompts"] if p.get("identifier") == ident]
        if not hits:
            raise SystemExit(f"prompts_patch: no prompt {ident} in {ref['corpus']}")
        for p in hits:
            p.update(fields)
    for ident in ref.get("disable_prompts") or []:
        for po in obj.get("prompt_order") or []:
            for o in po["order"]:
                if o["identifier"] == ident:
                    o["enabled"] = False
    for add in ref.get("add_prompts") or []:
        prompt = dict(add["prompt"])
        obj["prompts"].append(prompt)
        for po in obj.get("prompt_order") or []:
            order = po["order"]
            idx = next((i for i, o in enumerate(order) if o["identifier"] == add["order_after"]), len(order) - 1)
            order.insert(idx + 1, {"identifier": prompt["identifier"], "enabled": True})
    return obj


def card(path: str) -> dict:
    """A corpus card as a scenario uses it. Embedded regex scripts are dropped: on selecting such a card SillyTavern
    asks whether to allow them and the oracle's page.evaluate waits on that popup forever; a card whose scripts are
    not allowed sends the same prompt as the card without them (scoped scripts only run once allowed)."""
    raw = load_corpus(path)
    if ((raw.get("data") or {}).get("extensions") or {}).get("regex_scripts"):
        return corpus(path, drop=["data.extensions.regex_scripts"])
    return corpus(path)


def card_name(card: dict) -> str:
    return (card.get("data") or card).get("name") or card.get("name") or "Character"


def greeting(card_ref: dict) -> str:
    """The card's first message as SillyTavern stores it in a new chat ({{user}}/{{char}} already substituted)."""
    card = resolve(card_ref)
    d = card.get("data") or card
    text = d.get("first_mes") or card.get("first_mes") or ""
    name = card_name(card)
    return re.sub(r"\{\{user\}\}", USER, re.sub(r"\{\{char\}\}", name, text, flags=re.I), flags=re.I)


def u(text: str, **kw: Any) -> dict:
    return {"role": "user", "content": text, **kw}


def a(text: str, **kw: Any) -> dict:
    return {"role": "assistant", "content": text, **kw}


def s(text: str, **kw: Any) -> dict:
    return {"role": "system", "content": text, **kw}


SERA = corpus("cards/st-default-seraphina.v2.json")
SERA_NOWORLD = corpus("cards/st-default-seraphina.v2.json", patch={"data": {"extensions": {"world": ""}}})
DEFAULT_PRESET = corpus("presets/st-default-openai.json")

EXAMPLES = ("<START>\n{{user}}: Is this place safe?\n{{char}}: *Seraphina smiles.* \"As long as I keep watch, it is.\"\n"
            "<START>\n{{user}}: What do you eat here?\n{{char}}: \"Berries, roots, and the kindness of the forest.\"\n"
            "{{user}}: That sounds lonely.\n{{char}}: *She tilts her head.* \"Not with guests like you.\"")
SERA_EXAMPLES = corpus("cards/st-default-seraphina.v2.json", patch={"data": {"mes_example": EXAMPLES}})


def sera_chat() -> list:
    return [a(greeting(SERA)),
            u("Where am I? This forest feels strange."),
            a("*Seraphina smiles softly.* \"You are in my glade, safe from the beasts outside.\""),
            u("Thank you. What happened to this place?")]


def generic_chat(card_ref: dict) -> list:
    return [a(greeting(card_ref)),
            u("Hello. Who are you, and where are we?"),
            a("Someone who has been waiting for you. Sit, and I will explain."),
            u("All right. Tell me what happens next.")]


def base(cid: str, group: str, pins: str, **kw: Any) -> dict:
    sc = {"id": cid, "group": group, "pins": pins, "preset": DEFAULT_PRESET, "card": SERA, "chat": sera_chat(),
          "user_name": USER, "persona_description": PERSONA}
    sc.update(kw)
    return sc


# Small hand-made world books (inline): entries in SillyTavern's world-file format.
def wi_entry(uid: int, keys: list, content: str, order: int = 100, position: int = 0, constant: bool = False,
             **kw: Any) -> dict:
    e = {"uid": uid, "key": keys, "keysecondary": [], "comment": f"entry {uid}", "content": content,
         "constant": constant, "selective": True, "selectiveLogic": 0, "addMemo": True, "order": order,
         "position": position, "disable": False, "excludeRecursion": False, "preventRecursion": False,
         "delayUntilRecursion": False, "probability": 100, "useProbability": True, "depth": 4, "group": "",
         "groupOverride": False, "groupWeight": 100, "scanDepth": None, "caseSensitive": None, "matchWholeWords": None,
         "useGroupScoring": None, "automationId": "", "role": None, "sticky": 0, "cooldown": 0, "delay": 0,
         "displayIndex": uid}
    e.update(kw)
    return e


def book(*entries: dict) -> dict:
    return {"entries": {str(e["uid"]): e for e in entries}}


GLOBAL_LANTERN = book(
    wi_entry(0, ["forest"], "[Global lore, order 50: lanterns of blue flame hang along the forest paths.]", order=50),
    wi_entry(1, ["place"], "[Global lore, order 150: the old road north of the glade is flooded.]", order=150),
)
NAME_BOOK = book(wi_entry(0, ["Ash"], "[Ash is known in these woods as the mapmaker.]"))


# ---------------------------------------------------------------- scenarios

PRESETS = sorted(f for f in os.listdir(os.path.join(CORPUS, "presets")) if f.endswith(".json")) \
    if os.path.isdir(os.path.join(CORPUS, "presets")) else []
PRESET_CARD = {  # a few presets paired with another corpus card (language / style match); the rest use Seraphina
    "stagedog-mingyue-qiuqing.json": "cards/lide-ai.v3.json",
    "yinyue-zhuwang-v2.0-avarsiskull.json": "cards/mvu-qingkong-li.v3.json",
    "prolix-lucid-loom-v3.2.json": "cards/prolix-lumia-official.v3.json",
    "prolix-storyweaver-v1.1.json": "cards/prolix-cipher.v3.json",
    "tawa-delta.vi.json": "cards/chien-quoc-1.vi.v3.json",
}


def stem(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace(".json", "")).strip("-")


def scenarios() -> Iterator[dict]:
    # A1: every corpus preset with its defaults
    for p in PRESETS:
        cref = card(PRESET_CARD[p]) if p in PRESET_CARD else SERA
        chat = generic_chat(cref) if p in PRESET_CARD else sera_chat()
        yield base(f"preset-{stem(p)}", "A1", f"preset {p} with its own defaults and {cref['corpus']}: prompt_order, "
                   "markers, enabled prompts, macro substitution (populateChatCompletion)", preset=corpus("presets/" + p),
                   card=cref, chat=chat)

    # A2: names_behavior
    for nb in (-1, 0, 1, 2):
        chat = [a(greeting(SERA)),
                u("Who else lives in this forest?"),
                a("*A tall woman in dark armour steps out of the shadows.* \"I do. Lilith, at your service.\"",
                  name="Lilith", force_avatar=True),
                s("The wind rises and the lanterns flicker.", name="Narrator"),
                u("Seraphina, do you trust her?")]
        yield base(f"names-behavior-{'m1' if nb < 0 else nb}", "A2",
                   f"names_behavior {nb}: name fields / name prefixes on user, assistant, force_avatar and named "
                   "system messages (setOpenAIMessages, ChatCompletion names handling)",
                   chat=chat, st_overrides={"oai_settings": {"names_behavior": nb}})

    # A3: squash_system_messages with dialogue examples
    for squash in (True, False):
        yield base(f"squash-{'on' if squash else 'off'}-examples", "A3",
                   f"squash_system_messages {squash} with mes_example dialogues and new_example_chat_prompt "
                   "(ChatCompletion.squashSystemMessages: examples and named messages stay unsquashed)",
                   card=SERA_EXAMPLES, st_overrides={"oai_settings": {"squash_system_messages": squash,
                                                                      "new_example_chat_prompt": "[Example dialogue]"}})

    for nb in (1, 2):
        yield base(f"names-behavior-{nb}-examples", "A2",
                   f"names_behavior {nb} with dialogue examples: how example_user / example_assistant messages are "
                   "named or prefixed (populateDialogueExamples, Message.setName)", card=SERA_EXAMPLES,
                   st_overrides={"oai_settings": {"names_behavior": nb}})
    narr_chat = [a(greeting(SERA)), u("Where am I?"), s("Thunder rolls outside.", name="Narrator"),
                 s("The lanterns go out.", name="Narrator"), u("What was that?")]
    for nb in (0, 1):
        yield base(f"squash-on-chat-system-names{nb}", "A3",
                   f"squash_system_messages true with two consecutive narrator (system) messages in the chat and an "
                   f"Author's Note at depth 1, names_behavior {nb}: which mid-chat system messages are squashed "
                   "(ChatCompletion.squashSystemMessages skips named messages)", chat=narr_chat,
                   author_note={"content": "[Author's note: a storm.]", "interval": 1, "depth": 1,
                                "position": "chat", "role": "system"},
                   st_overrides={"oai_settings": {"squash_system_messages": True, "names_behavior": nb}})

    # A4: prompt post-processing (Custom source select values)
    for pp in ("", "merge_tools", "semi_tools", "strict_tools", "merge", "semi", "strict", "single"):
        yield base(f"post-processing-{pp or 'none'}", "A4",
                   f"custom_prompt_post_processing '{pp}' (server-side postProcessPrompt as sent by the page)",
                   card=SERA_EXAMPLES,
                   chat=[a(greeting(SERA)), u("Where am I?"), a("\"Safe, in my glade.\""),
                         s("The fire crackles.", name="Narrator"), u("Thank you.")],
                   author_note={"content": "[Keep the mood calm.]", "interval": 1, "depth": 1, "position": "chat",
                                "role": "system"},
                   post_processing=pp)

    for pp in ("merge", "strict"):
        yield base(f"post-processing-{pp}-names1", "A4",
                   f"custom_prompt_post_processing '{pp}' with names_behavior 1: named chat messages get a Name: "
                   "prefix when the name fields are removed (server-side mergeMessages)",
                   card=SERA_EXAMPLES,
                   chat=[a(greeting(SERA)), u("Where am I?"), a("\"Safe, in my glade.\""),
                         s("The fire crackles.", name="Narrator"), u("Thank you.")],
                   author_note={"content": "[Keep the mood calm.]", "interval": 1, "depth": 1, "position": "chat",
                                "role": "system"},
                   post_processing=pp, st_overrides={"oai_settings": {"names_behavior": 1}})

    # A5: persona positions
    an = {"content": "[Author's note: the night is cold.]", "interval": 1, "depth": 2, "position": "chat",
          "role": "system"}
    for pos, depth, role, with_an in (("in_prompt", 2, "system", False), ("top_an", 2, "system", True),
                                      ("bottom_an", 2, "system", True), ("top_an", 2, "system", False),
                                      ("at_depth", 1, "user", False), ("at_depth", 3, "system", False),
                                      ("none", 2, "system", False)):
        cid = f"persona-{pos.replace('_', '-')}" + (f"-d{depth}-{role}" if pos == "at_depth" else "") + \
              ("-no-an" if pos.endswith("_an") and not with_an else "")
        kw = {"author_note": an} if with_an else {}
        yield base(cid, "A5", f"persona_description_position {pos} (depth {depth}, role {role})"
                   + (" with an Author's Note" if with_an else " without an Author's Note")
                   + " (getEffectivePersonaPosition / authors-note setFloatingPrompt / openai.js persona injection)",
                   persona_position=pos, persona_depth=depth, persona_role=role, **kw)

    # A6: Author's Note
    for cid, note, pins in (
            ("an-chat-d2-system", {"depth": 2, "position": "chat", "role": "system"}, "in-chat at depth 2, system"),
            ("an-chat-d0-user", {"depth": 0, "position": "chat", "role": "user"}, "in-chat at depth 0, user"),
            ("an-before", {"depth": 4, "position": "before", "role": "system"}, "before main prompt"),
            ("an-after", {"depth": 4, "position": "after", "role": "system"}, "after main prompt")):
        yield base(cid, "A6", f"Author's Note {pins} (authors-note.js setFloatingPrompt, extension prompt placement)",
                   author_note={"content": "[Author's note: {{char}} is tired tonight.]", "interval": 1, **note})
    three = [a(greeting(SERA)), u("Hello."), a("\"Welcome.\""), u("Where am I?"), a("\"In my glade.\""), u("Thanks.")]
    four = [u("Hello?"), a("\"Welcome, traveller.\""), u("Where am I?"), a("\"In my glade.\""), u("Is it safe?"),
            a("\"Yes.\""), u("Thanks.")]
    for cid, chat, pins in (("an-interval2-3turns", three, "3 user turns: does not fire"),
                            ("an-interval2-4turns", four, "4 user turns: fires")):
        yield base(cid, "A6", f"Author's Note interval 2 with {pins} (setFloatingPrompt messagesTillInsertion)",
                   chat=chat, author_note={"content": "[Author's note: every second turn.]", "interval": 2,
                                           "depth": 1, "position": "chat", "role": "system"})

    # A7: world info
    for cpath in ("cards/lide-ai.v3.json", "cards/mvu-qingkong-li.v3.json", "cards/zhanguo.v3.json"):
        cref = card(cpath)
        yield base(f"wi-embedded-{stem(os.path.basename(cpath))}", "A7",
                   f"embedded character_book of {cpath} imported and linked, default preset (context 4095): the 25% "
                   "world-info budget cuts the constant entries (checkWorldInfo budget, getCharacterLore)",
                   card=cref, chat=generic_chat(cref), import_embedded_book=True)
        yield base(f"wi-embedded-{stem(os.path.basename(cpath))}-ctx128k", "A7",
                   f"embedded character_book of {cpath} imported and linked, max_context 128000: the constant "
                   "entries fire, each at its own position (checkWorldInfo, getCharacterLore)",
                   card=cref, chat=generic_chat(cref), import_embedded_book=True, max_context=128000)
    eld_chat = [a(greeting(SERA)), u("Tell me about Eldoria and the Shadowfangs."),
                a("\"The beasts came from the north.\""), u("Is there any magic that can stop them?")]
    yield base("wi-global-eldoria", "A7", "global book (worldbooks/st-default-eldoria.json) activated by keys in chat "
               "(getGlobalLore, worldInfoBefore)", card=SERA_NOWORLD, chat=eld_chat,
               book=corpus("worldbooks/st-default-eldoria.json"))
    for strat in (0, 1, 2):
        yield base(f"wi-strategy-{strat}", "A7",
                   f"world_info_character_strategy {strat} ({['evenly', 'character first', 'global first'][strat]}) "
                   "with the card's linked book Eldoria and a global inline book (sortFn in checkWorldInfo)",
                   book=GLOBAL_LANTERN, world_info={"world_info_character_strategy": strat})
    for strat in (0, 1, 2):
        yield base(f"wi-strategy-{strat}-budget10", "A7",
                   f"world_info_character_strategy {strat} with world_info_budget 10: which book's entries the budget "
                   "keeps depends on the strategy (sortFn and budget overflow in checkWorldInfo)",
                   book=GLOBAL_LANTERN, world_info={"world_info_character_strategy": strat, "world_info_budget": 10})
    yield base("wi-recursive-off", "A7", "world_info_recursive false with the setup of wi-strategy-2: the global "
               "entry that only Eldoria's content activates (order 50) is not sent (checkWorldInfo recursion)",
               book=GLOBAL_LANTERN, world_info={"world_info_character_strategy": 2, "world_info_recursive": False})
    depth_chat = [u("Hello."), a("\"Welcome.\""), u("Tell me about the beasts."),
                  a("\"They are a curse on this land.\""), u("Good night.")]
    for d in (1, 4):
        yield base(f"wi-depth-{d}", "A7", f"world_info_depth {d}: a key 3 messages back fires only with depth 4 "
                   "(WorldInfoBuffer scan depth)", card=SERA_NOWORLD, chat=depth_chat,
                   book=corpus("worldbooks/st-default-eldoria.json"), world_info={"world_info_depth": d})
    for inc in (True, False):
        yield base(f"wi-include-names-{'on' if inc else 'off'}", "A7",
                   f"world_info_include_names {inc}: a key matching only the user's name (WorldInfoBuffer name prefixes)",
                   card=SERA_NOWORLD, chat=[a(greeting(SERA)), u("Good morning."), a("\"Good morning to you.\""),
                                            u("I slept well.")],
                   book=NAME_BOOK, world_info={"world_info_include_names": inc})
    yield base("wi-budget-1", "A7", "world_info_budget 1 (% of context, ~40 tokens) with the Eldoria book: every "
               "activated entry is larger than the budget, none is sent (checkWorldInfo budget overflow)",
               card=SERA_NOWORLD, chat=eld_chat,
               book=corpus("worldbooks/st-default-eldoria.json"), world_info={"world_info_budget": 1})
    small = book(*(wi_entry(i, ["glade"], f"[Small lore {i}, order {o}: a short fact about the glade number {i}.]",
                            order=o) for i, o in ((0, 300), (1, 200), (2, 100), (3, 50))))
    yield base("wi-budget-1-cut", "A7", "world_info_budget 1 with four small entries: the budget keeps the "
               "highest-order entries and drops the rest (checkWorldInfo budget overflow)", card=SERA_NOWORLD,
               book=small, world_info={"world_info_budget": 1})

    # A8: card overrides and {{original}}
    ov_card = corpus("cards/st-default-seraphina.v2.json", patch={"data": {
        "system_prompt": "Card main prompt for {{char}}. Preset main was: {{original}}",
        "post_history_instructions": "{{original}} Card post-history: answer in two sentences."}})
    ov_preset = corpus("presets/st-default-openai.json", prompts_patch={
        "jailbreak": {"content": "Preset post-history: stay in character."}})
    yield base("card-overrides", "A8", "card system_prompt and post_history_instructions with {{original}} replace "
               "main and jailbreak (prefer_character_prompt/jailbreak true)", card=ov_card, preset=ov_preset)
    yield base("card-overrides-not-preferred", "A8", "the same with prefer_character_prompt=false and "
               "prefer_character_jailbreak=false: the preset's prompts stay", card=ov_card, preset=ov_preset,
               st_overrides={"power_user": {"prefer_character_prompt": False, "prefer_character_jailbreak": False}})

    # A9: depth prompt with an Author's Note at the same depth
    dp_card = corpus("cards/st-default-seraphina.v2.json", patch={"data": {"extensions": {"depth_prompt": {
        "prompt": "[Depth prompt: {{char}} speaks softly.]", "depth": 2, "role": "user"}}}})
    for role in ("system", "user"):
        yield base(f"depth-prompt-d2-user-an-d2-{role}", "A9",
                   f"card depth_prompt (depth 2, role user) and Author's Note (depth 2, role {role}) at the same depth "
                   "(injection order and merging of same-depth same-role injections, populateChatHistory)",
                   card=dp_card, author_note={"content": "[Author's note: rain is coming.]", "interval": 1,
                                              "depth": 2, "position": "chat", "role": role})

    # B: generation types
    ends_assistant = [a(greeting(SERA)), u("Where am I?"), a("*Seraphina smiles.* \"You are in my glade, and\"")]
    yield base("gen-continue", "B", "generation type continue, continue_prefill false: continue nudge with "
               "{{lastChatMessage}} (populateChatCompletion continue)", chat=ends_assistant, generation_type="continue")
    yield base("gen-continue-prefill", "B", "continue with continue_prefill true: last message sent as assistant "
               "prefill with continue_postfix", chat=ends_assistant, generation_type="continue",
               st_overrides={"oai_settings": {"continue_prefill": True}})
    yield base("gen-continue-prefill-names1", "B", "continue with continue_prefill and names_behavior 1: the "
               "continued message keeps its name field (populateChatCompletion continuePrefill)", chat=ends_assistant,
               generation_type="continue", st_overrides={"oai_settings": {"continue_prefill": True, "names_behavior": 1}})
    yield base("gen-continue-names2", "B", "continue without prefill and names_behavior 2: prefixes on the continued "
               "message and in the nudge's {{lastChatMessage}}", chat=ends_assistant, generation_type="continue",
               st_overrides={"oai_settings": {"names_behavior": 2}})
    yield base("gen-impersonate", "B", "impersonate: impersonation_prompt appended (populateChatCompletion)",
               chat=ends_assistant, generation_type="impersonate")
    yield base("gen-regenerate", "B", "regenerate: the last assistant message is not sent", chat=ends_assistant,
               generation_type="regenerate")
    yield base("gen-swipe", "B", "swipe: the last assistant message is not sent", chat=ends_assistant,
               generation_type="swipe")
    yield base("gen-quiet", "B", "quiet generation with a quiet prompt (generateQuietPrompt -> quietPrompt)",
               generation_type="quiet", quiet_prompt="Summarize the conversation so far in one sentence.")
    yield base("gen-send-if-empty", "B", "send_if_empty after a trailing assistant message (normal generation)",
               chat=ends_assistant, st_overrides={"oai_settings": {"send_if_empty": "[Go on.]"}})

    # B: budget trims history
    long_chat = [a(greeting(SERA))]
    for i in range(1, 40):
        if i % 2:
            long_chat.append(u(f"Message {i}: I walk further along the river bank and describe the stones, the moss, "
                               f"the reeds and the small fish I see in the water near bend number {i}."))
        else:
            long_chat.append(a(f"Message {i}: *Seraphina follows and names each plant for you, explaining which ones "
                               f"heal wounds and which ones are poisonous, pointing at cluster number {i}.*"))
    yield base("budget-trim-40", "B", "openai_max_context 1500, openai_max_tokens 300 on a 40-message chat: history "
               "filled newest to oldest while it fits (populateChatHistory, canAfford)", chat=long_chat,
               max_context=1500, max_tokens=300)

    yield base("budget-trim-40-injections", "B", "budget-trim-40 plus an Author's Note (depth 2, system) and the "
               "persona at depth 4 (user): in-chat injections in a trimmed history (populationInjectionPrompts, "
               "populateChatHistory)", chat=long_chat, max_context=1500, max_tokens=300,
               author_note={"content": "[Author's note: the river is rising.]", "interval": 1, "depth": 2,
                            "position": "chat", "role": "system"},
               persona_position="at_depth", persona_depth=4, persona_role="user")

    # B: examples cut partway (short description so the budget reaches the examples)
    many_examples = "\n".join(
        f"<START>\n{{{{user}}}}: Question {k}: what grows by the stream number {k}?\n"
        f"{{{{char}}}}: *Seraphina kneels.* \"Answer {k}: moonpetals and silverleaf, both good for healing.\"\n"
        f"{{{{user}}}}: Follow-up {k}: and are they safe to eat?\n"
        f"{{{{char}}}}: \"Reply {k}: only the leaves, never the roots.\""
        for k in range(1, 9))
    ex_card = corpus("cards/st-default-seraphina.v2.json", patch={"data": {
        "description": "{{char}} is a gentle forest guardian.", "mes_example": many_examples,
        "extensions": {"world": ""}}})
    short_chat = [a("\"You are awake.\""), u("Where am I?"), a("\"In my glade.\""), u("What grows here?")]
    for cid, ov, pins in (
            ("examples-cut-normal", {"pin_examples": False, "strip_examples": False},
             "example behaviour normal: examples fill what history leaves; a dialogue is added only whole, with its "
             "separator (canAffordAll), so the 4th and later are dropped"),
            ("examples-cut-pinned", {"pin_examples": True, "strip_examples": False},
             "pin_examples true (keep): examples before history; same request as normal while history fits"),
            ("examples-strip", {"pin_examples": False, "strip_examples": True},
             "strip_examples true (disabled): no examples sent")):
        yield base(cid, "B", pins + " (populateDialogueExamples, max_context 700 / max_tokens 300)", card=ex_card,
                   chat=short_chat, max_context=700, max_tokens=300, st_overrides={"power_user": ov})
    for pinned in (False, True):
        yield base(f"budget-trim-40-examples-{'pinned' if pinned else 'normal'}", "B",
                   f"40-message chat, 8 example dialogues, max_context 1000 / max_tokens 300, pin_examples {pinned} "
                   "(populateDialogueExamples and populateChatHistory sharing the budget)", card=ex_card,
                   chat=long_chat, max_context=1000, max_tokens=300,
                   st_overrides={"power_user": {"pin_examples": pinned, "strip_examples": False}})
    long_turns = [a("\"You are awake at last. Rest; the fever has broken and the wounds are closing.\""),
                  u("Where am I? I remember the river, the wolves, and then nothing at all after that."),
                  a("\"In my glade, deep in the forest. I carried you here when the beasts left you bleeding.\""),
                  u("Thank you. How long was I asleep, and did you find my maps and my compass?"),
                  a("\"Three days. Your satchel is by the door; the maps are damp but whole, the compass too.\""),
                  u("Good. What grows here that could help me walk again before the next full moon?")]
    for pinned in (False, True):
        yield base(f"examples-vs-history-{'pinned' if pinned else 'normal'}", "B",
                   f"pin_examples {pinned} when history and examples compete for 400 tokens: "
                   + ("examples first, history trimmed to what is left" if pinned else
                      "history first, examples get what is left") +
                   " (populateChatCompletion order of populateDialogueExamples / populateChatHistory)",
                   card=ex_card, chat=long_turns, max_context=700, max_tokens=300,
                   st_overrides={"power_user": {"pin_examples": pinned, "strip_examples": False}})

    # B: injection_trigger
    trig_preset = corpus("presets/st-default-openai.json", add_prompts=[
        {"order_after": "jailbreak", "prompt": {"identifier": "trigContinue", "name": "Only on continue",
                                                "role": "system", "content": "[Trigger: continue only]",
                                                "system_prompt": False, "marker": False, "injection_position": 0,
                                                "injection_depth": 4, "injection_order": 100,
                                                "injection_trigger": ["continue"]}},
        {"order_after": "jailbreak", "prompt": {"identifier": "trigNormal", "name": "Only on normal",
                                                "role": "system", "content": "[Trigger: normal only]",
                                                "system_prompt": False, "marker": False, "injection_position": 1,
                                                "injection_depth": 1, "injection_order": 100,
                                                "injection_trigger": ["normal"]}},
        {"order_after": "jailbreak", "prompt": {"identifier": "trigImpersonate", "name": "Only on impersonate",
                                                "role": "user", "content": "[Trigger: impersonate only]",
                                                "system_prompt": False, "marker": False, "injection_position": 0,
                                                "injection_depth": 4, "injection_order": 100,
                                                "injection_trigger": ["impersonate", "quiet"]}},
    ])
    for gt in ("normal", "continue", "impersonate"):
        yield base(f"trigger-{gt}", "B", f"prompts with injection_trigger on generation type {gt} "
                   "(PromptManager injection_trigger filter)", preset=trig_preset,
                   chat=ends_assistant if gt != "normal" else sera_chat(), generation_type=gt)

    # B: macros in chat messages are substituted
    yield base("chat-macros", "B", "macros inside chat messages are substituted in the request ({{char}}, {{user}})",
               chat=[a(greeting(SERA)), u("My name is {{user}}, and you are {{char}}?"),
                     a("\"Yes, {{user}}, I am {{char}}.\""), u("Nice to meet you.")])

    # B: the chat macros in a preset prompt read the chat as stored (chat-macros.js getLastMessage...:
    # chat[mid].mes), not the history messages as sent (names, expanded macros, the continued message)
    probe = {"identifier": "chatProbe", "name": "Chat macro probe", "role": "system", "system_prompt": False,
             "marker": False, "content": "LM=[{{lastMessage}}] LU=[{{lastUserMessage}}] LC=[{{lastCharMessage}}] "
                                         "ID=[{{lastMessageId}}] R=[{{allChatRange}}]"}
    probe_preset = corpus("presets/st-default-openai.json", add_prompts=[{"order_after": "main", "prompt": probe}])
    macro_chat = [a(greeting(SERA)), u("Where am I, {{char}}?"),
                  a("*Seraphina smiles.* \"You are in my glade, {{user}}.\""), u("Thank you, {{char}}. Who are you?")]
    macro_ends_assistant = macro_chat[:3]
    probe_case = functools.partial(base, card=SERA_NOWORLD)  # no linked world: only the macros differ
    for nb in (0, 1, 2):
        yield probe_case(f"chat-macros-preset-names{nb}", "B", f"{{{{lastMessage}}}}, {{{{lastUserMessage}}}}, "
                   f"{{{{lastCharMessage}}}}, {{{{lastMessageId}}}}, {{{{allChatRange}}}} in a preset prompt under "
                   f"names_behavior {nb}, stored messages holding {{{{char}}}} / {{{{user}}}}: the stored text, no "
                   "name prefix, macros inside left as stored (chat-macros.js getLastMessage: chat[mid].mes)",
                   preset=probe_preset, chat=macro_chat, st_overrides={"oai_settings": {"names_behavior": nb}})
    yield probe_case("chat-macros-preset-continue-prefill", "B", "the chat macros in a preset prompt on continue with "
               "continue_prefill: the continued message is still the chat's last (Generate leaves chat whole)",
               preset=probe_preset, chat=macro_ends_assistant, generation_type="continue",
               st_overrides={"oai_settings": {"continue_prefill": True, "names_behavior": 2}})
    yield probe_case("chat-macros-preset-no-history", "B", "the chat macros in a preset prompt when chatHistory is "
               "disabled: no history is sent but the macros still read the chat",
               preset=corpus("presets/st-default-openai.json", add_prompts=[{"order_after": "main", "prompt": probe}],
                             disable_prompts=["chatHistory"]), chat=macro_chat)
    why = {"swipe": "the message being swiped holds an unfinished swipe, which getLastMessageId skips; "
                    "chat.length still counts it",
           "regenerate": "the replaced message is deleted before Generate reads the chat",
           "impersonate": "the chat is left as it is", "quiet": "the chat is left as it is"}
    for gt in ("swipe", "regenerate", "impersonate", "quiet"):
        yield probe_case(f"chat-macros-preset-{gt}", "B", f"the chat macros in a preset prompt on {gt}: {why[gt]}",
                   preset=probe_preset, chat=macro_ends_assistant, generation_type=gt,
                   **({"quiet_prompt": "Summarize {{lastMessage}} in one line."} if gt == "quiet" else {}))
    yield probe_case("chat-macros-preset-first-message", "B", "the chat macros in a preset prompt when the chat's "
                     "first message holds macros: Generate substitutes chat[0].mes in place before building the "
                     "prompts, the others stay as stored", preset=probe_preset,
                     chat=[u("Hi {{char}}, I am {{user}}."), a("Welcome, {{user}}. I am {{char}}.")])
    yield probe_case("chat-macros-preset-regenerate-narrator", "B", "regenerate when the chat ends with a narrator "
                     "message: Generate deletes the last message unless it is the user's, so the narrator message is "
                     "neither sent nor read", preset=probe_preset,
                     chat=macro_chat + [s("The wind rises over {{char}}'s glade.", name="Narrator")],
                     generation_type="regenerate")
    yield probe_case("chat-macros-preset-narrator", "B", "the chat macros in a preset prompt when the chat ends with a "
               "narrator message (is_user and is_system false: a character message to getLastCharMessage)",
               preset=probe_preset, chat=macro_chat + [s("The wind rises over {{char}}'s glade.", name="Narrator")])


# ---------------------------------------------------------------- running

ORACLE_FIELDS = {"id", "preset", "card", "book", "chat", "user_name", "persona_description", "generation_type",
                 "quiet_prompt", "post_processing", "max_context", "max_tokens", "st_overrides", "world_info",
                 "author_note", "persona_position", "persona_depth", "persona_role", "import_embedded_book"}


def stored(sc: dict) -> dict:
    """The scenario as kept in requests.jsonl: oracle fields with corpus references."""
    return {k: v for k, v in sc.items() if k in ORACLE_FIELDS and k != "id"}


def inline(sc: dict) -> dict:
    out = {k: v for k, v in sc.items() if k in ORACLE_FIELDS}
    for k in ("preset", "card", "book"):
        if k in out:
            out[k] = resolve(out[k])
    return out


def strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def volatile_macros(sc: dict) -> list:
    """Volatile macros in anything that can reach the request: enabled preset prompts, card, books, chat, notes."""
    found = set()
    inl = inline(sc)
    preset = inl["preset"]
    enabled = set()
    orders = preset.get("prompt_order") or []
    used = [po for po in orders if str(po.get("character_id")) == "100001"] or orders  # the global order ST uses
    for po in used:
        enabled |= {o["identifier"] for o in po.get("order", []) if o.get("enabled")}
    texts = [p.get("content") or "" for p in preset.get("prompts", []) if p.get("identifier") in enabled]
    texts += [v for k, v in preset.items() if isinstance(v, str)]
    texts += list(strings(inl.get("card"))) + list(strings(inl.get("book"))) + list(strings(sc.get("chat")))
    texts += list(strings(sc.get("author_note"))) + [sc.get("quiet_prompt") or "", sc.get("persona_description") or ""]
    for t in texts:
        for m in VOLATILE_RE.finditer(t):
            found.add(m.group(1).lower().replace("idleduration", "idle_duration"))
    return sorted(found)


def linked_world(sc: dict) -> Any:
    """The card's extensions.world when SillyTavern's own data has that world (Eldoria ships with ST)."""
    card = resolve(sc["card"])
    w = ((card.get("data") or {}).get("extensions") or {}).get("world")
    if w and os.path.exists(os.path.join(ST_HOME, "data.pristine", "default-user", "worlds", w + ".json")):
        return {"name": w, "st_data_file": f"worlds/{w}.json",
                "corpus": "worldbooks/st-default-eldoria.json" if w == "Eldoria" else None}
    return None


REQ_FIELD_RE = re.compile(r"prefill|stop|continue|impersonat|quiet", re.I)


def request_fields(body: dict) -> dict:
    out = {k: body[k] for k in ("model", "max_tokens", "stream") if k in body}
    out.update({k: v for k, v in body.items() if k != "messages" and REQ_FIELD_RE.search(k)})
    return out


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read().decode())


def clean_worlds() -> list:
    """Remove the worlds earlier cases left in SillyTavern's data folder (the oracle restores only settings.json):
    an imported embedded book would otherwise be found by name by any later card linking a world of that name.
    Within one batch the generator's order keeps such cards (A1) before the imports (A7)."""
    data = os.path.join(ST_HOME, "data", "default-user", "worlds")
    pristine = os.path.join(ST_HOME, "data.pristine", "default-user", "worlds")
    keep = set(os.listdir(pristine)) if os.path.isdir(pristine) else set()
    removed = []
    for f in sorted(os.listdir(data)) if os.path.isdir(data) else []:
        if f not in keep:
            os.remove(os.path.join(data, f))
            removed.append(f)
    return removed


def run_batch(cases: list) -> dict:
    """Run cases through oracle.py --batch; return {id: (result, recorded_at)}."""
    results = {}
    print("removed worlds left by earlier cases:", clean_worlds(), flush=True)
    with tempfile.TemporaryDirectory(prefix="st-oracle-batch-") as tmp:
        src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            for sc in cases:
                f.write(json.dumps(inline(sc), ensure_ascii=False) + "\n")
        env = dict(os.environ)
        env.setdefault("CHROMIUM", "/usr/bin/chromium")
        proc = subprocess.Popen([sys.executable, ORACLE, "--batch", src, dst], stdout=subprocess.PIPE, text=True, env=env)
        stamps = {}
        t_last = time.time()
        for line in proc.stdout:
            cid = line.split(" ", 1)[0]
            when = None
            if line.split(" ", 1)[1:] and line.split(" ", 1)[1].startswith("ok"):
                try:  # the stub keeps the request (with its arrival time) until the next case clears it
                    reqs = http_json(STUB_URL + "/_requests")
                    when = reqs[0]["time"] if reqs else None
                except Exception:
                    when = None
            stamps[cid] = (when, time.time() - t_last)
            t_last = time.time()
            print(time.strftime("%H:%M:%S"), line.rstrip()[:300], f"({stamps[cid][1]:.0f}s)", flush=True)
        proc.wait()
        for line in open(dst, encoding="utf-8"):
            res = json.loads(line)
            when, secs = stamps.get(res.get("id"), (None, None))
            res["_recorded_at"] = (dt.datetime.fromtimestamp(when, dt.timezone.utc).isoformat(timespec="seconds")
                                   .replace("+00:00", "Z") if when else None)
            res["_seconds"] = secs
            results[res["id"]] = res
    return results


def record(sc: dict, res: dict) -> dict:
    body = res["request"]
    rec = {"id": sc["id"], "group": sc["group"], "pins": sc["pins"], "scenario": stored(sc),
           "recorded_at": res["_recorded_at"], "st_version": res.get("st_version"),
           "messages": body.get("messages"), "request_fields": request_fields(body), "snapshot": res["snapshot"]}
    page = res.get("browser_body_messages")
    if page is not None and page != body.get("messages"):
        rec["page_messages"] = page  # what the page posted, before SillyTavern's server post-processed it
    lw = linked_world(sc)
    if lw:
        rec["linked_world"] = lw
    if res.get("n_requests", 1) != 1:
        rec["n_requests"] = res["n_requests"]
    vol = volatile_macros(sc)
    if vol:
        rec["volatile"] = vol
    return rec


def load_jsonl(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    return {r["id"]: r for r in (json.loads(line) for line in open(path, encoding="utf-8") if line.strip())}


def main(argv: list) -> int:
    all_sc = list(scenarios())
    ids = [sc["id"] for sc in all_sc]
    assert len(ids) == len(set(ids)), "duplicate scenario ids"
    if not argv or argv[0] == "list":
        for sc in all_sc:
            print(f"{sc['group']:3} {sc['id']:40} {sc['pins'][:100]}")
        return 0
    if argv[0] == "show":
        sc = next(x for x in all_sc if x["id"] == argv[1])
        print(json.dumps(stored(sc), ensure_ascii=False, indent=1))
        return 0
    if argv[0] == "table":  # the per-case table of README.md
        done, failed = load_jsonl(OUT), load_jsonl(FAILED)
        print("| group | id | status | pins |\n| --- | --- | --- | --- |")
        for sc in all_sc:
            st = "ok" if sc["id"] in done else ("FAILED" if sc["id"] in failed else "not run")
            vol = done.get(sc["id"], {}).get("volatile")
            pins = sc["pins"].replace("|", "\\|") + (f" (volatile: {', '.join(vol)})" if vol else "")
            print(f"| {sc['group']} | `{sc['id']}` | {st} | {pins} |")
        return 0
    if argv[0] == "refresh":  # recompute the derived fields (pins, volatile, linked_world) without re-running
        done = load_jsonl(OUT)
        by_id = {sc["id"]: sc for sc in all_sc}
        with open(OUT, "w", encoding="utf-8") as f:
            for cid in ids:
                if cid in done:
                    rec, sc = done[cid], by_id[cid]
                    rec.update(group=sc["group"], pins=sc["pins"])
                    rec.pop("volatile", None)
                    vol = volatile_macros(sc)
                    if vol:
                        rec["volatile"] = vol
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return 0
    if argv[0] != "run":
        print(__doc__)
        return 2
    sel = all_sc
    if "--only" in argv:
        want = set(argv[argv.index("--only") + 1].split(","))
        sel = [sc for sc in sel if sc["id"] in want]
    if "--group" in argv:
        want = set(argv[argv.index("--group") + 1].split(","))
        sel = [sc for sc in sel if sc["group"] in want]
    done = load_jsonl(OUT)
    failed = load_jsonl(FAILED)
    res = run_batch(sel)
    retry = [sc for sc in sel if not res.get(sc["id"], {}).get("ok")]
    if retry:
        print("retrying", [sc["id"] for sc in retry], flush=True)
        res.update(run_batch(retry))
    for sc in sel:
        r = res.get(sc["id"]) or {"ok": False, "error": "no result"}
        if r.get("ok"):
            done[sc["id"]] = record(sc, r)
            failed.pop(sc["id"], None)
        else:
            failed[sc["id"]] = {"id": sc["id"], "error": r.get("error", "")[:2000]}
            done.pop(sc["id"], None)
    with open(OUT, "w", encoding="utf-8") as f:
        for cid in ids:
            if cid in done:
                f.write(json.dumps(done[cid], ensure_ascii=False) + "\n")
    with open(FAILED, "w", encoding="utf-8") as f:
        for cid in ids:
            if cid in failed:
                f.write(json.dumps(failed[cid], ensure_ascii=False) + "\n")
    print(f"{len(done)} recorded, {len(failed)} failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Scenarios with ST-Prompt-Template (EJS) and Tavern Helper (variable macros) installed: build, run, keep.

Why: SillyTavern's users run most template cards with these two extensions, and what reaches the model then is not
what SillyTavern alone sends: SillyTavern's macros run first, then Tavern Helper's variable macros over the final
messages (`GENERATE_AFTER_DATA`), then ST-Prompt-Template evaluates the `<% %>` of every final message in order
(`CHAT_COMPLETION_SETTINGS_READY`). The recordings here pin that order, errors, variables of the three scopes
(global, chat, message), world-info decorators and special entries, and the corpus template cards.

  ext_scenarios.py list
  ext_scenarios.py show ID
  ext_scenarios.py run [--group X|G] [--only ID,ID]

`run` drives SillyTavern 1.18.0 through `../shared/tools/st-oracle/oracle.py` with both extensions installed
(`setup.py --install-extension`); ST_ORACLE_HOME, ST_URL and STUB_URL choose the oracle (a copy on other ports
works). The results are kept beside this file, in the format of `requests.jsonl` plus the scenario's extension
fields and what SillyTavern held after generating (`after_generation`: the variables the templates wrote): group X
(`ext-*`) in `ext_requests.jsonl`, group G (`gen-*`: the `[GENERATE:*]` / `@@generate_*` special entries and
`@@preprocessing`) in `ext_generate_requests.jsonl`, group V (`vars-*`: per-message scopes, SillyTavern's own
variable macros) in `ext_variables_requests.jsonl`, each group with its own failure file.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any
from collections.abc import Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "ext_requests.jsonl")
FAILED = os.path.join(HERE, "ext_failed.jsonl")
#: where each group's recordings and failures are kept
FILES = {"X": (OUT, FAILED),
         "G": (os.path.join(HERE, "ext_generate_requests.jsonl"), os.path.join(HERE, "ext_generate_failed.jsonl")),
         "V": (os.path.join(HERE, "ext_variables_requests.jsonl"), os.path.join(HERE, "ext_variables_failed.jsonl"))}


def _module(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ms = _module("st_oracle_make_scenarios", os.path.join(HERE, "make_scenarios.py"))
USER, PERSONA, DEFAULT_PRESET = ms.USER, ms.PERSONA, ms.DEFAULT_PRESET
u, a, corpus, wi_entry, book = ms.u, ms.a, ms.corpus, ms.wi_entry, ms.book

EXT_FIELDS = {"extensions", "global_variables", "chat_variables", "regex"}
BOTH = {"prompt_template": True, "tavern_helper": True}


def small_card(name: str, description: str, personality: str = "", scenario: str = "", first_mes: str = "") -> dict:
    data = {"name": name, "description": description, "personality": personality, "scenario": scenario,
            "first_mes": first_mes or f"*{name} looks up.* \"You came back.\"", "mes_example": "",
            "creator_notes": "", "system_prompt": "", "post_history_instructions": "", "alternate_greetings": [],
            "tags": [], "creator": "tavernbox-tests", "character_version": "1",
            "extensions": {"talkativeness": "0.5", "fav": False, "world": "",
                           "depth_prompt": {"prompt": "", "depth": 4, "role": "system"}}}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def chat(*extra: dict) -> list:
    return [a("*Mira wipes salt from the lamp glass.* \"You made it before the rain.\""),
            u("Any ships tonight?"), *extra]


def sc(cid: str, pins: str, card: dict, **kw: Any) -> dict:
    out = {"id": cid, "group": "X", "pins": pins, "preset": DEFAULT_PRESET, "card": card, "chat": chat(),
           "user_name": USER, "persona_description": PERSONA, "extensions": BOTH}
    out.update(kw)
    return out


STAT = {"stat_data": {"hp": 80, "name": "Mira", "bag": ["rope", "lamp"], "mood": {"now": "calm", "$meta": "hidden"},
                      "note": "line one\nline two"}}

ORDER_DESC = (
    "Order probe for {{char}}.\n"
    "A: <%- \"{{char}}\" %>\n"
    "B: <%- \"{{get_chat_variable::cv}}\" %>\n"
    "C: <%- '{{' + 'user}}' %>\n"
    "D: <%- '{{get_chat_' + 'variable::cv}}' %>\n"
    "E: {{get_global_variable::gv}} / {{get_message_variable::stat_data.hp}} / {{get_message_variable::stat_data.bag}}\n"
    "F: {{get_message_variable::stat_data}} | {{get_chat_variable::missing}} | {{GET_CHAT_VARIABLE::cv}}\n"
    "G:   {{format_message_variable::stat_data}}\n"
    "H: {{format_chat_variable::cv}} {{format_global_variable::nested}}\n"
    "I: <%- getvar('cv') %>/<%- getvar('gv') %>/<%- getvar('stat_data.hp') %>/<%- variables.cv %>/<%- variables.gv %>\n"
    "J: <%- getvar('cv', {scope: 'local'}) %>/<%- getvar('gv', {scope: 'global'}) %>/"
    "<%- getvar('stat_data.hp', {scope: 'message'}) %>/<%- getvar('nope', {defaults: 'dflt'}) %>\n"
    "K: <%- JSON.stringify(getvar('stat_data.mood')) %> <%- typeof getvar('stat_data.hp') %>\n"
    "L: <%= '<b>&' %> <%- userName %> <%- charName %> <%- lastUserMessage %>")

FAIL_CARD = small_card(
    "Mira", "Desc {{char}}: <% throw new Error('boom') %> tail <%- 1 + 1 %>",
    personality="Pers: <%- 'P' + 1 %>", scenario="Scen {{user}}: <% if ( %> bad")

CHAT_OWN = [a("*Mira wipes salt from the lamp glass.* Lamp <%- 2 + 3 %>."),
            u("Count: <% setvar('from_chat', 'yes') %><%- 10 * 2 %> and {{char}}"),
            a("<%- getvar('from_chat') %> said the chat."), u("Any ships tonight?")]
CHAT_OWN_CARD = small_card("Mira", "Seen from the card: <%- getvar('from_chat') %>.")

VARS_BOOK = book(
    wi_entry(0, [], "<% setvar('counter', 1); setvar('g_written', 'G', {scope: 'global'}); "
                    "define('greet', (n) => 'Hi ' + n); define('CONST_A', 41) %>Entry one.", constant=True, order=10),
    wi_entry(1, [], "Entry two sees <%- getvar('counter') %> and <%- CONST_A + 1 %>.", constant=True, order=20))
VARS_CARD = small_card(
    "Mira", "<% incvar('counter'); setvar('msgvar', 'M', {scope: 'message'}) %>counter=<%- getvar('counter') %> "
            "<%- greet('Ash') %> local=<%- getvar('counter', {scope: 'local'}) %>",
    personality="<% decvar('counter', 5) %>after dec <%- getvar('counter') %>; <% delvar('cv') %>cv=<%- getvar('cv') %>",
    scenario="<% insvar('list', 'c') %><%- JSON.stringify(getvar('list')) %> <%- getvar('g_written') %>")

GETWI_NAME = "oracle-getwi-world"


def card_entry(uid: int, comment: str, content: str, *, enabled: bool = True, constant: bool = False,
               keys: tuple[str, ...] = ("zzzz-never",), order: int = 100) -> dict:
    return {"id": uid, "keys": list(keys), "secondary_keys": [], "comment": comment, "content": content,
            "constant": constant, "selective": True, "insertion_order": order, "enabled": enabled,
            "position": "before_char", "use_regex": True, "extensions": {"position": 0, "depth": 4, "probability": 100,
                                                                          "useProbability": True}}


GETWI_CARD = small_card("Mira", "Card reads: <%- await getwi('" + GETWI_NAME + "', 'nested') %>",
                        personality="Unawaited: <%- getwi('" + GETWI_NAME + "', 'secret lore') %>")
GETWI_CARD["data"]["extensions"]["world"] = GETWI_NAME
GETWI_CARD["data"]["character_book"] = {"name": GETWI_NAME, "entries": [
    card_entry(0, "main", "Main lore: <%- await getwi('" + GETWI_NAME + "', 'secret lore') %> | by uid: <%- await "
               "getwi('" + GETWI_NAME + "', 1) %> | null book: <%- await getwi(null, 'secret') %> | missing: [<%- "
               "await getwi('" + GETWI_NAME + "', 'no such') %>]", constant=True, keys=()),
    card_entry(1, "secret lore", "The secret is {{char}}'s <%- 6 * 7 %> <%- world_info.comment %>", enabled=False),
    card_entry(2, "nested", "Nested: <%- await getwi('secret lore') %> in <%- world_info.world %>")]}

DECO_BOOK = book(
    wi_entry(0, ["zzzz-never"], "@@activate\nForced by decorator.", order=1),
    wi_entry(1, [], "@@dont_activate\nNever sent.", constant=True, order=2),
    wi_entry(2, [], "@@if getvar('flag') === 1\nFlag one is on.", constant=True, order=3),
    wi_entry(3, [], "@@if getvar('flag') === 2\nFlag two is on.", constant=True, order=4),
    wi_entry(4, [], "@@private\n<% const x = 'first' %>Private <%- x %>.", constant=True, order=5),
    wi_entry(5, [], "@@private\n<% const x = 'second' %>Private <%- x %>.", constant=True, order=6),
    wi_entry(6, [], "GEN-BEFORE <%- 1 + 1 %>\n", comment="[GENERATE:BEFORE]", disable=True, constant=True, order=7),
    wi_entry(7, [], "\nGEN-AFTER <%- 2 + 2 %>", comment="[GENERATE:AFTER]", disable=True, constant=True, order=8),
    wi_entry(8, [], " [after message 1]", comment="[GENERATE:1:AFTER]", disable=True, constant=True, order=9),
    wi_entry(9, [], "@@generate_before 2\n[before message 2] ", disable=True, constant=True, order=10),
    wi_entry(10, [], "@@preprocessing\nPre <%- 'processed' %> {{char}}.", constant=True, order=11),
    wi_entry(11, [], "Escaped: <#escape-ejs><%= 'kept' %><#/escape-ejs> done <%- 3 * 3 %>", constant=True, order=12),
    wi_entry(12, [], "@@generate_after\n[decorated after]", disable=True, constant=True, order=13),
    wi_entry(13, [], "[GENERATE enabled, so not special-active] <%- 5 %>", comment="[GENERATE:AFTER] on",
             disable=False, constant=True, order=14))
DECO_CARD = small_card("Mira", "Decorator probe for {{char}}.")

INIT_BOOK = book(
    wi_entry(0, [], '{"init": {"a": 1, "list": ["x"]}, "hp": 5}', comment="[InitialVariables]", disable=True),
    wi_entry(1, [], '@@initial_variables\n{"more": {"b": 2}}', disable=True, order=2))
INIT_CARD = small_card("Mira", "init.a=<%- getvar('init.a') %> hp=<%- getvar('hp') %> more.b=<%- getvar('more.b') %>"
                               " fmt={{get_message_variable::init}}")

INJECT_BOOK = book(
    wi_entry(0, [], "<% injectPrompt('CoT', 'Think step by step.') %>", constant=True, order=1),
    wi_entry(1, [], "Injected at 1 by <%- 'INJECT' %>.", comment="@INJECT pos=1,role=system", disable=True),
    wi_entry(2, [], "After the last user.", comment="@INJECT target=user,index=-1,at=after,role=assistant",
             disable=True))
INJECT_CARD = small_card("Mira", "CoT: [<%- getPromptsInjected('CoT') %>] has=<%- hasPromptsInjected('CoT') %>")

API_CARD = small_card(
    "Mira",
    "msgs=<%- getChatMessages(0).length %>/<%- JSON.stringify(getChatMessages(-2).map(m => m.role)) %>\n"
    "last=<%- JSON.stringify(getChatMessages(-1)[0]) %>\n"
    "match=<%- JSON.stringify(matchChatMessages('ships')) %> / <%- JSON.stringify(matchChatMessages(/^nothing$/)) %>\n"
    "ids=<%- lastUserMessageId %>/<%- lastCharMessageId %>/<%- lastMessageId %>",
    personality="char=<%- (await getchar()).length > 0 %> preset=[<%- await getpreset('Main Prompt') %>]",
    scenario="eval=<%- await evalTemplate('<%- 7 * 6 %' + '>') %> parsed=<%- JSON.stringify(parseJSON('{a: 1,}')) %> "
             "print=<% print('P1'); print('P2') %>")


def corpus_card_case(cid: str, path: str, initvar_comment: str, user_text: str, reply: str) -> dict:
    """A corpus card with its embedded book imported and a chat whose last message carries stat_data built from the
    card's own initial-variable entry."""
    import yaml

    card = ms.resolve(ms.card(path))
    entries = (card["data"].get("character_book") or {}).get("entries") or []
    raw = next(e["content"] for e in entries if (e.get("comment") or "") == initvar_comment)
    stat = yaml.safe_load(raw)
    card_ref = ms.card(path)
    return sc(cid, f"corpus card {path} with its embedded book, initial variables as the last message's stat_data, "
                   "both extensions with their defaults", card_ref, import_embedded_book=True,
              chat=[a(ms.greeting(card_ref)), u(user_text), a(reply, variables={"stat_data": stat})])


def gen_entry(uid: int, keys: list, content: str, comment: str, **kw: Any) -> dict:
    """A special entry as SillyTavern's editor saves it (``vectorized`` false: the extension only activates such
    entries) and, by default, disabled (the extension's default takes special entries only when disabled)."""
    return wi_entry(uid, keys, content, comment=comment, vectorized=False, **{"disable": True, **kw})


GEN_BOOK = book(
    gen_entry(0, [], "GB-const <%- 1 + 1 %> <%- world_info.comment %>\n", "[GENERATE:BEFORE] const", constant=True,
              order=5),
    gen_entry(1, ["ships"], "GB-keyed (never: the start has no text to match)\n", "[GENERATE:BEFORE] keyed"),
    gen_entry(2, [], "@@generate_before\n<% setvar('gb', 7) %>DB-const gb=<%- getvar('gb') %>\n", "deco before",
              constant=True, order=1),
    gen_entry(3, ["ships"], "\n[GA-keyed sees gb=<%- getvar('gb') %> len>0=<%- generateBuffer.length > 0 %>]",
              "[GENERATE:AFTER] keyed"),
    gen_entry(4, ["zzzz-never"], "\n[GA-unmatched]", "[GENERATE:AFTER] unmatched"),
    gen_entry(5, ["lamp glass"], "@@generate_after\n\n[DA-keyed {{char}}]", "deco after keyed", order=50),
    gen_entry(6, ["ships"], "\n[GA-enabled: not taken]", "[GENERATE:AFTER] enabled", disable=False),
    gen_entry(7, ["ships"], "@@always_enabled\n\n[GA-always-enabled]", "[GENERATE:AFTER] always", disable=False,
              order=200),
    gen_entry(8, [], "\n[GA-const-failing <% throw new Error('gen boom') %>]", "[GENERATE:AFTER] failing",
              constant=True, order=300),
    gen_entry(9, ["ships"], "Plain keyed entry sees gb=<%- getvar('gb') %>.", "plain", disable=False))
GEN_CARD = small_card("Mira", "Generate probe for {{char}}: gb=<%- getvar('gb') %>.")

GEN_INDEX_BOOK = book(
    gen_entry(0, [], "[0-before] ", "[GENERATE:0:BEFORE]", constant=True),
    gen_entry(1, [], "@@generate_before 3\n[3-before, message fails] ", "deco 3 before", constant=True),
    gen_entry(2, ["ships"], " [6-after keyed, sees <%- getvar('seen') %>]", "[GENERATE:6:AFTER]"),
    gen_entry(3, ["lamp"], " [6-after unmatched]", "[GENERATE:6:AFTER] other"),
    gen_entry(4, ["lamp"], " [5-after keyed]", "[GENERATE:5:AFTER]"),
    gen_entry(5, [], "@@generate_after 2\n [2-after by decorator]", "deco 2 after", constant=True),
    gen_entry(6, [], " [2-after order 20]", "[GENERATE:2:AFTER] b", constant=True, order=20),
    gen_entry(7, [], " [2-after order 10]", "[GENERATE:2:AFTER] a", constant=True, order=10),
    gen_entry(8, [], " [2-after at depth 0]", "[GENERATE:2:AFTER] depth", constant=True, order=30, position=4,
              depth=0),
    gen_entry(9, [], " [40-after: no such message]", "[GENERATE:40:AFTER]", constant=True),
    gen_entry(10, [], " [3-after, message fails]", "[GENERATE:3:AFTER]", constant=True),
    gen_entry(11, [], "[1-before] ", "[GENERATE:1:BEFORE]", constant=True))
GEN_INDEX_CARD = small_card("Mira", "Index probe <% setvar('seen', 'desc') %>for {{char}}.",
                            personality="Broken <% if ( %> personality")

GEN_REGEX_BOOK = book(
    gen_entry(0, [], "[regex ships: <%- typeof matched_message %>]", "[GENERATE:REGEX:ships]", constant=True),
    gen_entry(1, ["ships"], "[regex keyed]", "[GENERATE:REGEX:Any]"),
    gen_entry(2, [], "[regex enabled]", "[GENERATE:REGEX:tonight]", disable=False, constant=True))
GEN_REGEX_CARD = small_card("Mira", "Regex probe for {{char}}.")

PRE_BOOK = book(
    wi_entry(0, [], "@@preprocessing\n<% setvar('pre', 'P') %>The bell says <%- 'beacon' + 'word' %> for {{char}}. "
                    "<%- '<' + '%- 6 * 7 %' + '>' %>", constant=True, order=1, vectorized=False),
    wi_entry(1, ["beaconword"], "Woken by the preprocessed keyword (pre=<%- getvar('pre') %>).", order=2,
             vectorized=False),
    wi_entry(2, ["ships"], "@@preprocessing\nKeyed preprocessing <%- 'entry' %>.", order=3, vectorized=False),
    wi_entry(3, ["ships"], "[Preprocessing] by title <%- 'T' %>.", comment="[Preprocessing] title", order=4,
             vectorized=False),
    wi_entry(4, [], "@@preprocessing\nships", comment="content is a chat word", order=5, vectorized=False,
             key=["zzzz-never"]),
    wi_entry(5, [], "@@preprocessing\nDisabled <%- 'pre' %>.", order=6, vectorized=False, disable=True,
             constant=True))
PRE_CARD = small_card("Mira", "Preprocess probe for {{char}}: pre=<%- getvar('pre') %>.")

PRE_NOCONST_BOOK = book(
    wi_entry(0, ["ships"], "@@preprocessing\nThe bell says <%- 'beacon' + 'word' %>.", order=1, vectorized=False),
    wi_entry(1, ["beaconword"], "Woken by the keyword.", order=2, vectorized=False),
    wi_entry(2, ["zzzz-never"], "@@preprocessing\n<%- 'Any' + ' ships' %>", order=3, vectorized=False))


GEN_CARD_BOOK_NAME = "oracle-gen-card-world"
GEN_CARD_BOOK_CARD = small_card("Mira", "Card-book generate probe for {{char}}.")
GEN_CARD_BOOK_CARD["data"]["extensions"]["world"] = GEN_CARD_BOOK_NAME
GEN_CARD_BOOK_CARD["data"]["character_book"] = {"name": GEN_CARD_BOOK_NAME, "entries": [
    card_entry(0, "[GENERATE:AFTER] card", "\n[card after <%- 1 %>]", enabled=False, constant=True, order=10),
    card_entry(1, "[GENERATE:1:BEFORE] card", "[card 1-before] ", enabled=False, constant=True),
    card_entry(2, "[GENERATE:AFTER] gated off", "@@always_enabled\n@@if getvar('flag') === 2\n\n[gated off]",
               constant=True, order=20),
    card_entry(3, "[GENERATE:AFTER] gated on", "@@always_enabled\n@@if getvar('flag') === 1\n\n[gated on]",
               constant=True, order=30),
    card_entry(4, "pre", "@@preprocessing\nCard pre <%- 'X' + getvar('flag') %>.", constant=True, keys=()),
    {**card_entry(5, "[GENERATE:AFTER] group a", "\n[group a]", enabled=False, constant=True, order=40),
     "extensions": {"position": 0, "depth": 4, "probability": 100, "useProbability": True, "group": "g",
                    "group_override": True}},
    {**card_entry(6, "[GENERATE:AFTER] group b", "\n[group b]", enabled=False, constant=True, order=50),
     "extensions": {"position": 0, "depth": 4, "probability": 100, "useProbability": True, "group": "g",
                    "group_override": True}}]}

GEN_INVERT_BOOK = book(
    gen_entry(0, [], "\n[enabled after]", "[GENERATE:AFTER] enabled", constant=True, disable=False),
    gen_entry(1, [], "\n[disabled after]", "[GENERATE:AFTER] disabled", constant=True),
    gen_entry(2, [], "[enabled before] ", "[GENERATE:BEFORE] enabled", constant=True, disable=False))


GEN_ACTIVEWI_BOOK = book(
    gen_entry(0, [], "<% await activewi('oracle-gen-activewi', 'target forced', true); await activewi("
                     "'oracle-gen-activewi', 'target keyed'); await activewi('oracle-gen-activewi', 'target plain'); "
                     "await activewi('oracle-gen-activewi', 'target dont', true); await activewi('oracle-gen-activewi', "
                     "'no such entry', true) %>", "[GENERATE:BEFORE] activator", constant=True),
    gen_entry(1, ["zzzz-never"], "Forced target.", "target forced", order=10),
    gen_entry(2, ["ships"], "Keyed target.", "target keyed", order=20),
    gen_entry(3, ["zzzz-never"], "Plain target (never).", "target plain", order=30, disable=False),
    gen_entry(4, ["zzzz-never"], "@@dont_activate\nForced through dont_activate.", "target dont", order=40,
              disable=False))


def gen_scenarios() -> Iterator[dict]:
    yield sc("gen-before-after", "[GENERATE:BEFORE]/[GENERATE:AFTER] and @@generate_before/@@generate_after: "
             "constant and keyed, matched and not, enabled (not taken) and @@always_enabled, a failing one; one VM "
             "with the messages", GEN_CARD, book=GEN_BOOK, group="G")
    yield sc("gen-index", "[GENERATE:n:BEFORE]/[GENERATE:n:AFTER] and @@generate_before/after n: keyed against the "
             "message, order and depth, an index past the end, a message whose template fails", GEN_INDEX_CARD,
             book=GEN_INDEX_BOOK, group="G")
    yield sc("gen-regex", "[GENERATE:REGEX:...] entries (documented; what 1.17.4.1 does with them)",
             GEN_REGEX_CARD, book=GEN_REGEX_BOOK, group="G")
    yield sc("gen-preprocess", "@@preprocessing / [Preprocessing] evaluated before the world-info scan: a constant "
             "entry writes a keyword another entry waits for; keyed, disabled; keys after preprocessing",
             PRE_CARD, book=PRE_BOOK, group="G")
    yield sc("gen-card-book", "the card's embedded book (imported: vectorized false): [GENERATE:*] entries, "
             "@@always_enabled with @@if, an inclusion group with override, @@preprocessing", GEN_CARD_BOOK_CARD,
             import_embedded_book=True, chat_variables={"flag": 1}, group="G")
    yield sc("gen-invert-off", "invert_enabled off: enabled special entries are the loader's, disabled ones not",
             small_card("Mira", "Invert probe for {{char}}."), book=GEN_INVERT_BOOK, group="G",
             extensions={"prompt_template": {"enabled": True, "settings": {"invert_enabled": False}},
                         "tavern_helper": True})
    yield sc("gen-activewi", "activewi from a [GENERATE:BEFORE] entry: forced, keyed, plain, through "
             "@@dont_activate, a missing entry", small_card("Mira", "Activewi probe for {{char}}."),
             book=GEN_ACTIVEWI_BOOK, group="G")
    yield sc("gen-preprocess-keyed", "@@preprocessing without the constant flag: what its keys become and what the "
             "scan then activates", small_card("Mira", "Keyed preprocess probe for {{char}}."),
             book=PRE_NOCONST_BOOK, group="G")


def scenarios() -> Iterator[dict]:
    yield sc("ext-order", "evaluation order: ST macros, then Tavern Helper's macros, then EJS over the final messages; "
             "getvar of the three scopes; format/get variable macros", small_card("Mira", ORDER_DESC),
             chat=chat(a("*She nods.*", variables=STAT), u("And now?")), chat_variables={"cv": "chatval", "n": 3},
             global_variables={"gv": "globalval", "nested": {"k": [1, {"deep": True}], "s": "x: y"}})
    yield sc("ext-order-th-off", "the same with Tavern Helper disabled: its macros stay as written",
             small_card("Mira", ORDER_DESC), extensions={"prompt_template": True, "tavern_helper": False},
             chat=chat(a("*She nods.*", variables=STAT), u("And now?")), chat_variables={"cv": "chatval", "n": 3},
             global_variables={"gv": "globalval", "nested": {"k": [1, {"deep": True}], "s": "x: y"}})
    yield sc("ext-order-pt-off", "the same with ST-Prompt-Template disabled: <% %> sent as written",
             small_card("Mira", ORDER_DESC), extensions={"prompt_template": False, "tavern_helper": True},
             chat=chat(a("*She nods.*", variables=STAT), u("And now?")), chat_variables={"cv": "chatval", "n": 3},
             global_variables={"gv": "globalval", "nested": {"k": [1, {"deep": True}], "s": "x: y"}})
    yield sc("ext-failing", "a template that throws and one with a syntax error are sent raw; the others evaluated",
             FAIL_CARD)
    yield sc("ext-chat-own", "the chat's own <% %> with the extension's defaults (evaluated at load, filtered)",
             CHAT_OWN_CARD, chat=CHAT_OWN)
    yield sc("ext-chat-own-raw", "the chat's own <% %> with raw-message evaluation and the message filter off",
             CHAT_OWN_CARD, chat=CHAT_OWN, extensions={"prompt_template": {"enabled": True, "settings": {
                 "raw_message_evaluation_enabled": False, "filter_message_enabled": False}}, "tavern_helper": True})
    yield sc("ext-vars", "setvar/incvar/decvar/delvar/insvar and define across templates of one request",
             VARS_CARD, book=VARS_BOOK, chat_variables={"cv": "chatval", "list": ["a", "b"]})
    yield sc("ext-getwi", "getwi by comment and uid, nested getwi, a missing entry, in the card's own book",
             GETWI_CARD, import_embedded_book=True)
    yield sc("ext-decorators", "@@activate, @@dont_activate, @@if, @@private, [GENERATE:*] and @@generate_* special "
             "entries, @@preprocessing, <#escape-ejs>", DECO_CARD, book=DECO_BOOK, chat_variables={"flag": 1})
    yield sc("ext-initvars", "[InitialVariables] and @@initial_variables entries", INIT_CARD, book=INIT_BOOK)
    yield sc("ext-inject", "injectPrompt/getPromptsInjected, @INJECT entries with the inject loader on", INJECT_CARD,
             book=INJECT_BOOK, extensions={"prompt_template": {"enabled": True, "settings": {
                 "inject_loader_enabled": True}}, "tavern_helper": True})
    yield sc("ext-api", "getChatMessages, matchChatMessages, getchar, getpreset, evalTemplate, parseJSON, print",
             API_CARD)
    yield corpus_card_case("ext-card-zhanguo", "cards/zhanguo.v3.json", "[initvar]变量初始化勿开",
                           "我叫李牧，二十岁，赵国士人。", "（李牧整理衣冠，准备入邯郸。）")
    yield corpus_card_case("ext-card-de-quoc", "cards/de-quoc-la-ma-than-thanh.vi.v3.json",
                           "[initvar]Khởi tạo biến đừng mở", "Ta là Friedrich, hai mươi tuổi.", "Friedrich bước vào.")
    yield corpus_card_case("ext-card-qingkong", "cards/mvu-qingkong-li.v3.json", "[InitVar]1st",
                           "早上好。", "（理微微点头。）")
    yield corpus_card_case("ext-card-lide", "cards/lide-ai.v3.json", "[InitVar]请勿打开", "你好。", "（沈念笑了笑。）")
    yield from variables_scenarios()


# ---------------------------------------------------------------- group V: per-message scopes, SillyTavern's writes
# (ids prefixed ``vars-``; their results go to ``ext_variables_requests.jsonl``)

#: a chat whose messages carry different variables, each reading and writing its own message scope at load
DEPTHS_CHAT = [
    a("Greeting x=<%- getvar('x') %> only0=<%- getvar('only0') %><% setvar('w0', 'from0') %>.",
      variables={"x": "m0", "only0": "zero"}),
    u("U1 x=<%- getvar('x') %> w0=<%- getvar('w0') %> msg=<%- getMessageVar('x') %><% incvar('n') %> n=<%- getvar('n') %>"),
    a("A2 x=<%- getvar('x') %> only0=<%- getvar('only0') %> w0=<%- getvar('w0') %> n=<%- getvar('n') %>"
      "<% setvar('w2', getvar('y') + 1); setvar('cv', 'chat-from-2', {scope: 'local'}); "
      "setvar('gw', 'global-from-2', {scope: 'global'}) %>.", variables={"x": "m2", "y": 2}),
    u("U3 x=<%- getvar('x') %> w2=<%- getvar('w2') %> y=<%- getvar('y') %> cv=<%- getvar('cv') %>"
      "<% incvar('n') %> n=<%- getvar('n') %>", variables={"x": "m3"}),
    a("A4 plain, no template."),
    u("Last x=<%- getvar('x') %> n=<%- getvar('n') %><% setvar('w5', 'five') %>"),
]
DEPTHS_CARD = small_card(
    "Mira", "Gen: x=<%- getvar('x') %> w0=<%- getvar('w0') %> w2=<%- getvar('w2') %> w5=<%- getvar('w5') %> "
            "n=<%- getvar('n') %> cv=<%- getvar('cv') %> gw=<%- getvar('gw') %> y=<%- getvar('y') %> "
            "only0=<%- getvar('only0') %> msg.x=<%- getvar('x', {scope: 'message'}) %>"
            "<% setvar('wg', 'gen') %>\nTH: {{get_message_variable::x}} {{get_message_variable::w2}} "
            "{{get_chat_variable::cv}} {{get_global_variable::gw}}")

#: SillyTavern's own variable macros in the preset, the card and the chat, then templates and Tavern Helper. The
#: page builds the prompt in dry runs too (its prompt manager's token counts: after the chat opens, racing the
#: generation), which run the macros once more: every block here sets what it counts from first, so a dry run changes
#: nothing sent; the order of the blocks shows in what the last writer of a name left (``who``: the main prompt, then
#: the post-history instructions; ``order``: the history newest first). The card's fields, which SillyTavern expands
#: before the prompts and tavernbox in prompt order, write nothing another block reads (DEVIATIONS).
MACROS_MAIN = ("Main. {{setvar::pv::from-main}}{{setvar::cnt::5}}{{incvar::cnt}}{{incvar::cnt}}{{setglobalvar::pg::G1}}"
               "{{setvar::lst::[\"a\"]}}{{addvar::lst::x}}{{setvar::dn::0}}{{decvar::dn}}{{flushvar::old}}"
               "{{setvar::dropped::d}}{{deletevar::dropped}}{{setvar::who::main}}"
               "main reads pv={{getvar::pv}} cnt={{getvar::cnt}} has={{hasvar::pv}} dropped={{hasvar::dropped}}")
MACROS_PHI = ("PHI {{setvar::late::L}}{{setvar::who::phi}} T: <%- getvar('late') %>/<%- getvar('pv') %>/"
              "<%- getvar('fromchat') %>/<%- getvar('gn') %>/<%- getvar('who') %>/<%- getvar('order') %>")
MACROS_PRESET = ms.corpus("presets/st-default-openai.json", prompts_patch={
    "main": {"content": MACROS_MAIN}, "jailbreak": {"content": MACROS_PHI}})
MACROS_CARD = small_card(
    "Mira", "Desc T: pv=<%- getvar('pv') %> cnt=<%- getvar('cnt') %> lst=<%- JSON.stringify(getvar('lst')) %> "
            "local.pv=<%- getvar('pv', {scope: 'local'}) %> g=<%- getvar('pg', {scope: 'global'}) %>/<%- getvar('gn') %>/"
            "<%- getvar('ga') %>/<%- getvar('gd') %> old=<%- getvar('old') %> late=<%- getvar('late') %> "
            "dn=<%- getvar('dn') %> fromchat=<%- getvar('fromchat') %> dropped=<%- getvar('dropped') %>"
            "<% setvar('cnt', getvar('cnt') + 10, {scope: 'local'}); setvar('tg', 'T', {scope: 'global'}) %>\n"
            "TH: {{get_chat_variable::pv}} {{get_global_variable::pg}} {{get_chat_variable::cnt}} "
            "{{get_global_variable::gn}} {{get_chat_variable::order}}",
    personality="Pers {{setvar::pers::P}}{{getvar::pers}} T: <%- getvar('pers') %> cnt=<%- getvar('cnt') %>")
MACROS_CHAT = chat(a("*She nods.*{{setvar::fromchat::c1}}{{setvar::order::2}}"),
                   u("And now? {{setvar::order::3}}{{setglobalvar::gn::10}}{{incglobalvar::gn}}{{incglobalvar::gn}}"
                     "{{setglobalvar::ga::5}}{{addglobalvar::ga::5}}{{setglobalvar::gd::3}}{{decglobalvar::gd}} "
                     "cv={{getvar::cv}}"))


def variables_scenarios() -> Iterator[dict]:
    yield sc("vars-chat-depths", "each chat message's templates read and write its own message's variables at load "
             "(cloned from the message before), generation reads and writes the last message's; defaults",
             DEPTHS_CARD, chat=DEPTHS_CHAT, chat_variables={"cv": "chatval"}, global_variables={"gv": "g"})
    yield sc("vars-chat-depths-raw-off", "the same with raw-message evaluation and the message filter off: load "
             "evaluates for display, generation evaluates the chat's templates again",
             DEPTHS_CARD, chat=DEPTHS_CHAT, chat_variables={"cv": "chatval"}, global_variables={"gv": "g"},
             extensions={"prompt_template": {"enabled": True, "settings": {
                 "raw_message_evaluation_enabled": False, "filter_message_enabled": False}}, "tavern_helper": True})
    yield sc("vars-chat-depths-limit", "the same with depth_limit 1: only the last two messages are evaluated at load",
             DEPTHS_CARD, chat=DEPTHS_CHAT, chat_variables={"cv": "chatval"}, global_variables={"gv": "g"},
             extensions={"prompt_template": {"enabled": True, "settings": {"depth_limit": 1}}, "tavern_helper": True})
    yield sc("vars-chat-depths-no-preload", "the same with preload_worldinfo_enabled off: nothing is evaluated when "
             "the chat loads", DEPTHS_CARD, chat=DEPTHS_CHAT, chat_variables={"cv": "chatval"},
             global_variables={"gv": "g"}, extensions={"prompt_template": {"enabled": True, "settings": {
                 "preload_worldinfo_enabled": False}}, "tavern_helper": True})
    yield sc("vars-st-macros", "SillyTavern's setvar/incvar/addvar/decvar/flushvar/deletevar and their global twins "
             "in the preset, card and chat (the history newest first), then the templates and Tavern Helper reading "
             "them; after_generation", MACROS_CARD, preset=MACROS_PRESET, chat=MACROS_CHAT,
             chat_variables={"cnt": 5, "old": "gone", "lst": "[\"a\"]", "cv": "C"}, global_variables={"gd": 3, "gn": 10})
    yield sc("vars-st-macros-pt-off", "the same with ST-Prompt-Template off: what SillyTavern's macros alone hold",
             MACROS_CARD, preset=MACROS_PRESET, chat=MACROS_CHAT,
             chat_variables={"cnt": 5, "old": "gone", "lst": "[\"a\"]", "cv": "C"}, global_variables={"gd": 3, "gn": 10},
             extensions={"prompt_template": False, "tavern_helper": True})

# ---------------------------------------------------------------- running (make_scenarios' machinery)

ms.ORACLE_FIELDS |= EXT_FIELDS
ms.OUT, ms.FAILED = OUT, FAILED


def record(s: dict, res: dict) -> dict:
    rec = ms.record(s, res)
    rec["after_generation"] = res.get("after_generation")
    if res.get("console_tail"):
        rec["console_tail"] = res["console_tail"]
    return rec


def main(argv: list) -> int:
    all_sc = list(scenarios()) + list(gen_scenarios())
    for s in all_sc:
        if s["id"].startswith("vars-"):
            s["group"] = "V"
    ids = [s["id"] for s in all_sc]
    assert len(ids) == len(set(ids)), "duplicate scenario ids"
    if not argv or argv[0] == "list":
        for s in all_sc:
            print(f"{s['id']:24} {s['pins'][:100]}")
        return 0
    if argv[0] == "show":
        s = next(x for x in all_sc if x["id"] == argv[1])
        print(json.dumps(ms.stored(s), ensure_ascii=False, indent=1))
        return 0
    if argv[0] != "run":
        print(__doc__)
        return 2
    sel = all_sc
    if "--group" in argv:
        sel = [s for s in sel if s["group"] == argv[argv.index("--group") + 1]]
    if "--only" in argv:
        want = set(argv[argv.index("--only") + 1].split(","))
        sel = [s for s in sel if s["id"] in want]
    res = ms.run_batch(sel)
    for group in sorted({s["group"] for s in sel}):
        keep(group, [s for s in sel if s["group"] == group], [s["id"] for s in all_sc if s["group"] == group], res)
    return 0


def keep(group: str, sel: list, ids: list, res: dict) -> None:
    """Merge one group's results by id into its own files."""
    out, failed_path = FILES[group]
    done, failed = ms.load_jsonl(out), ms.load_jsonl(failed_path)
    for s in sel:
        r = res.get(s["id"]) or {"ok": False, "error": "no result"}
        if r.get("ok"):
            done[s["id"]] = record(s, r)
            failed.pop(s["id"], None)
        else:
            failed[s["id"]] = {"id": s["id"], "error": r.get("error", "")[:2000]}
            done.pop(s["id"], None)
    with open(out, "w", encoding="utf-8") as f:
        for cid in ids:
            if cid in done:
                f.write(json.dumps(done[cid], ensure_ascii=False) + "\n")
    with open(failed_path, "w", encoding="utf-8") as f:
        for cid in ids:
            if cid in failed:
                f.write(json.dumps(failed[cid], ensure_ascii=False) + "\n")
    print(f"group {group}: {len(done)} recorded, {len(failed)} failed", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

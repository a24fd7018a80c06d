#!/usr/bin/env python3
"""Regex-script scenarios for the SillyTavern oracle: build them, drive SillyTavern, keep what it sent.

Why: SillyTavern's regex extension rewrites the texts of a request at prompt time (chat messages by placement and
depth, world-info entry contents, a message's reasoning). The only trustworthy reference for where and when is
SillyTavern 1.18.0 itself, driven by `../shared/tools/st-oracle/oracle.py` with its `regex` scenario field (global
scripts, the preset's and the card's allow-lists) and chat messages carrying `reasoning` (`extra.reasoning`).

  regex_scenarios.py list
  regex_scenarios.py show ID
  regex_scenarios.py run [--only ID,ID]       # needs ST on 127.0.0.1:8123 and stub.py on 127.0.0.1:8124

Results are merged by id into `regex_requests.jsonl` (same record format as `requests.jsonl`, group `R` for the
hand-made cases and `RC` for the corpus assets); the stored scenario keeps corpus references.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "regex_requests.jsonl")


def _module(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ms = _module("st_oracle_make_scenarios", os.path.join(HERE, "make_scenarios.py"))
ms.ORACLE_FIELDS = ms.ORACLE_FIELDS | {"regex"}  # the oracle's regex field travels with the scenario
USER, PERSONA, DEFAULT_PRESET = ms.USER, ms.PERSONA, ms.DEFAULT_PRESET
u, a, corpus = ms.u, ms.a, ms.corpus
SERA = ms.SERA_NOWORLD  # no linked world: only what a case adds is active


def script(find: str, replace: str = "", placement: tuple = (2,), name: str = "", **kw: Any) -> dict:
    """A regex script with SillyTavern's field names and the values its editor gives a new script."""
    sc = {"id": name or find, "scriptName": name or find, "findRegex": find, "replaceString": replace,
          "trimStrings": [], "placement": list(placement), "disabled": False, "markdownOnly": False,
          "promptOnly": True, "runOnEdit": True, "substituteRegex": 0, "minDepth": None, "maxDepth": None}
    sc.update(kw)
    return sc


def chat6() -> list:
    """Six messages, depth 5 (the greeting) to 0 (the last user message); each names its own depth."""
    return [a("d5 apple from the greeting. Apple pie."), u("d4 apple said the user."),
            a("d3 apple and another apple."), u("d2 APPLE in capitals."),
            a("d1 apple, the character's last word."), u("d0 apple, the user's last word.")]


def base(cid: str, pins: str, scripts: list | None = None, group: str = "R", **kw: Any) -> dict:
    sc = {"id": cid, "group": group, "pins": pins, "preset": DEFAULT_PRESET, "card": SERA, "chat": chat6(),
          "user_name": USER, "persona_description": PERSONA,
          "regex": {"global": scripts or [], "preset_allowed": True, "card_allowed": True}}
    sc.update(kw)
    return sc


def preset_with(scripts: list) -> dict:
    return corpus("presets/st-default-openai.json", patch={"extensions": {"regex_scripts": scripts}})


def card_with(scripts: list) -> dict:
    return corpus("cards/st-default-seraphina.v2.json",
                  patch={"data": {"extensions": {"world": "", "regex_scripts": scripts}}})


REASONING_ON = {"name": "DeepSeek", "auto_parse": False, "add_to_prompts": True, "auto_expand": False,
                "show_hidden": False, "prefix": "<think>\n", "suffix": "\n</think>", "separator": "\n\n",
                "max_additions": 1}


def reasoning_chat() -> list:
    return [a("d5 greeting, no reasoning."), u("d4 question one."),
            a("d3 answer one.", reasoning="r3 thought about apple one."), u("d2 question two."),
            a("d1 answer two.", reasoning="r1 thought about apple two."), u("d0 question three.")]


def placement_cases() -> Iterator[dict]:
    apple = "/apple/g"
    yield base("rx-ai-output", "promptOnly, placement AI output: every non-user message in coreChat "
               "(script.js coreChat map, getRegexedString)", [script(apple, "pear")])
    yield base("rx-user-input", "promptOnly, placement user input: only is_user messages",
               [script(apple, "pear", placement=(1,))])
    yield base("rx-both-placements", "placement [1, 2]: every chat message", [script(apple, "pear", placement=(1, 2))])
    yield base("rx-neither-flag", "neither promptOnly nor markdownOnly: ran when stored, not at prompt time",
               [script(apple, "pear", placement=(1, 2), promptOnly=False)])
    yield base("rx-markdown-only", "markdownOnly: display only, the prompt keeps the text",
               [script(apple, "pear", placement=(1, 2), promptOnly=False, markdownOnly=True)])
    yield base("rx-both-flags", "promptOnly and markdownOnly together: promptOnly applies at prompt time",
               [script(apple, "pear", placement=(1, 2), markdownOnly=True)])
    yield base("rx-disabled", "disabled: skipped", [script(apple, "pear", placement=(1, 2), disabled=True)])
    yield base("rx-slash-placement", "placements 3 (slash command) and 0 (markdown display): not used at prompt time",
               [script(apple, "pear", placement=(0, 3))])
    yield base("rx-empties-message", "a script that empties a message: what the history does with an empty message",
               [script("/^d3[\\s\\S]*$/", "")])


def depth_cases() -> Iterator[dict]:
    tag = "/(d\\d)/g"
    for lo, hi in ((2, None), (None, 2), (1, 3), (-1, None), (0, 0)):
        name = f"rx-depth-min{lo}-max{hi}".replace("None", "x")
        for gen in ("normal", "continue"):
            yield base(name + ("-continue" if gen == "continue" else ""),
                       f"minDepth {lo} maxDepth {hi}, {gen} generation: depth = coreChat.length - index - "
                       f"{2 if gen == 'continue' else 1}", [script(tag, "[$1 hit]", placement=(1, 2), minDepth=lo,
                                                                 maxDepth=hi)],
                       generation_type=gen)
    yield base("rx-depth-strings", "minDepth/maxDepth given as strings and -2 (the editor's inputs): isNaN checks",
               [script("/d1/g", "[d1 s]", placement=(1, 2), minDepth="1", maxDepth="2"),
                script("/d4/g", "[d4 m2]", placement=(1, 2), minDepth=-2, maxDepth=-1)])
    yield base("rx-depth-swipe", "swipe: the swiped message is popped from coreChat before depths are counted",
               [script(tag, "[$1 hit]", placement=(1, 2), maxDepth=1)], generation_type="swipe",
               chat=chat6()[:-1])


def order_cases() -> Iterator[dict]:
    g = script("/apple/g", "banana", name="global A->B")
    p = script("/banana/g", "cherry", name="preset B->C")
    c = script("/cherry/g", "date", name="card C->D")
    for pa, ca in ((True, True), (False, True), (True, False), (False, False)):
        yield base(f"rx-order-preset{int(pa)}-card{int(ca)}",
                   f"global, then preset, then card scripts chained; preset allowed {pa}, card allowed {ca} "
                   "(getRegexScripts order, allowedOnly)", [g], preset=preset_with([p]), card=card_with([c]),
                   regex={"global": [g], "preset_allowed": pa, "card_allowed": ca})


def substitution_cases() -> Iterator[dict]:
    chat = chat6()
    chat[2] = a("d3 {{char}} met {{user}}. Ash.K and AshxK were here.")
    yield base("rx-substitute-none", "substituteRegex 0: the pattern {{char}} is taken literally (Annex B braces)",
               [script("/{{char}}/g", "<C>")], chat=chat, user_name="Ash.K")
    yield base("rx-substitute-raw", "substituteRegex 1: macros in the pattern expanded raw (the dot stays a wildcard)",
               [script("/{{user}}/g", "<U>", substituteRegex=1)], chat=chat, user_name="Ash.K")
    yield base("rx-substitute-escaped", "substituteRegex 2: macros expanded and escaped (sanitizeRegexMacro)",
               [script("/{{user}}/g", "<U>", substituteRegex=2)], chat=chat, user_name="Ash.K")


def replacement_cases() -> Iterator[dict]:
    chat = chat6()
    chat[2] = a("d3 <b>xbolx</b> and <b>kept</b>; key=value; Apple.")
    chat[4] = a("d1 name: Mira Lane; cost $5.")
    yield base("rx-replacement", "{{match}}, $0, $1, $<name>, $&, $$, a missing group, $2 beyond the groups, "
               "macros in the replacement, trimStrings with a macro (runRegexScript, filterString)",
               [script("/<b>(.*?)<\\/b>/g", "[{{match}}|$1]", trimStrings=["x", "{{user}}"]),
                script("/(?<k>key)=(?<v>value)/", "$<v>=$<k> ($& $$ $9 $<nope>) {{user}}/{{char}}"),
                script("/name: (\\w+) (\\w+)?/", "$2, $1 [$3]"),
                script("/cost/", "price{{match}}$0")], chat=chat)
    yield base("rx-trim-strings", "trimStrings remove text from captured groups only, not from the literal "
               "replacement", [script("/(apple)/gi", "{{match}}/$1 APPLE", trimStrings=["pp", "A"])])


def flag_cases() -> Iterator[dict]:
    chat = [a("d5 Apple apple APPLE."), u("d4 line one\nline two\nline three"),
            a("d3 😀 smile 😀 and café"), u("d2 start-middle-start"),
            a("d1 price: 10 dollars, cost: 20 dollars"), u("d0 ok")]
    yield base("rx-flags", "flags g, i, m, s, u, y, none (first match only), lookbehind, \\p{L}, an unknown flag x "
               "(cannot compile: skipped), repeated flags gg (the whole /.../gg taken as the pattern)",
               [script("/apple/i", "[i1]"), script("/apple/gi", "[gi]"),
                script("/^line/gm", "[m]", placement=(1,)), script("/one.line/s", "[s]", placement=(1,)),
                script("/one.line/", "[no-s]", placement=(1,)),
                script("/\\u{1F600}/gu", "[u]"), script("/\\p{L}+é/u", "[pL]"),
                script("/start/y", "[y]", placement=(1,)), script("/middle/y", "[y2]", placement=(1,)),
                script("/(?<=cost: )\\d+/g", "[lb]"), script("/dollars/x", "[x]"),
                script("/price/gg", "[gg]"), script("/\\/d1\\//", "[esc]")], chat=chat)
    yield base("rx-bad-patterns", "patterns SillyTavern cannot compile are skipped, the next scripts still run; a "
               "pattern without slashes is the whole string with no flags",
               [script("/(unclosed/g", "[bad]"), script("/a{2,1}/", "[bad2]", placement=(1, 2)),
                script("apple", "[noslash]", placement=(1, 2)), script("/d\\d/g", "[ok]", placement=(1, 2))])


def wi_cases() -> Iterator[dict]:
    entries = ms.book(
        ms.wi_entry(0, ["x"], "WI before: apple in the lore.", constant=True, position=0, order=10),
        ms.wi_entry(1, ["x"], "WI after: apple again.", constant=True, position=1, order=20),
        ms.wi_entry(2, ["x"], "WI depth 1: apple at depth.", constant=True, position=4, depth=1, order=30),
        ms.wi_entry(3, ["x"], "WI depth 3: apple deeper.", constant=True, position=4, depth=3, order=40),
        ms.wi_entry(4, ["x"], "apple", constant=True, position=0, order=50))
    yield base("rx-world-info", "placement world info on entry contents (checkWorldInfo: depth = the entry's depth "
               "when at depth, none otherwise); an entry emptied by a script is not sent",
               [script("/apple/g", "pear", placement=(5,)), script("/^pear$/", "", placement=(5,)),
                script("/lore/g", "LORE", placement=(5,), maxDepth=2)], book=entries)
    yield base("rx-world-info-not-prompt-only", "a world-info script without promptOnly does not touch entries",
               [script("/apple/g", "pear", placement=(5,), promptOnly=False)], book=entries)
    keyed = ms.book(ms.wi_entry(0, ["apple"], "[Lore: apples grow in the glade.]"))
    yield base("rx-wi-scan-after-regex", "the world-info scan reads the chat after the prompt scripts ran: a key "
               "the scripts remove does not activate its entry",
               [script("/apple/gi", "pear", placement=(1, 2))], book=keyed)


def reasoning_cases() -> Iterator[dict]:
    rs = script("/apple/g", "PEAR", placement=(6,))
    yield base("rx-reasoning-default", "reasoning in extra.reasoning with SillyTavern's default settings "
               "(add_to_prompts false): not sent", [rs], chat=reasoning_chat())
    yield base("rx-reasoning-add", "add_to_prompts with max_additions 1: the newest reasoning only, prefix, suffix, "
               "separator; the reasoning placement's scripts applied (PromptReasoning.addToMessage)", [rs],
               chat=reasoning_chat(), st_overrides={"power_user": {"reasoning": REASONING_ON}})
    yield base("rx-reasoning-add-2", "max_additions 2, custom prefix/suffix/separator with macros, a reasoning "
               "script limited by maxDepth", [rs, script("/thought/g", "idea", placement=(6,), maxDepth=1)],
               chat=reasoning_chat(), st_overrides={"power_user": {"reasoning": dict(
                   REASONING_ON, max_additions=2, prefix="[{{char}} thinks: ", suffix="]", separator=" | ")}})
    chat = reasoning_chat()[:-1]
    yield base("rx-reasoning-continue", "continue on a message with reasoning, add_to_prompts false: the continued "
               "message still gets its reasoning as a prefix (isPrefix)", [rs], chat=chat,
               generation_type="continue")
    yield base("rx-reasoning-continue-add", "continue with add_to_prompts: the continued message counts as an "
               "addition", [rs], chat=chat, generation_type="continue",
               st_overrides={"power_user": {"reasoning": REASONING_ON}})
    yield base("rx-reasoning-user", "reasoning on a user message and an AI-output script: placements kept apart",
               [rs, script("/apple/g", "AIO", placement=(2,))],
               chat=[a("d3 greeting."), u("d2 question.", reasoning="apple user thought"),
                     a("d1 apple answer.", reasoning="apple ai thought"), u("d0 last.")],
               st_overrides={"power_user": {"reasoning": dict(REASONING_ON, max_additions=5)}})


def more_cases() -> Iterator[dict]:
    yield base("rx-reasoning-add-defaults", "add_to_prompts with SillyTavern's other reasoning defaults (the Think XML "
               "template: <think>, </think>, a newline separator, max_additions 1)",
               [script("/apple/g", "PEAR", placement=(6,))], chat=reasoning_chat(),
               st_overrides={"power_user": {"reasoning": dict(REASONING_ON, name="Think XML", prefix="<think>",
                                                              suffix="</think>", separator="\n")}})
    yield base("rx-continue-prefill", "continue with continue_prefill: the continued message, sent as the prefill, "
               "as the scripts leave it (depth -1)", [script("/(d\\d)/g", "[$1 hit]", placement=(1, 2), maxDepth=0)],
               chat=chat6()[:-1], generation_type="continue",
               st_overrides={"oai_settings": {"continue_prefill": True}})
    yield base("rx-names-behavior-2", "names_behavior 2 (content prefixes): the scripts see the stored text, the "
               "name prefix comes after", [script("/^d/g", "D", placement=(1, 2))],
               st_overrides={"oai_settings": {"names_behavior": 2}})
    chat = chat6()
    chat[0] = a("d5 greeting for {{user}} from {{char}}.")
    chat[2] = a("d3 {{user}} again, and {{char}}.")
    yield base("rx-first-message-macros", "the first message's macros are substituted before the scripts run, the "
               "others' after", [script("/Ash|Seraphina/g", "<N>", placement=(1, 2))], chat=chat)
    chat = reasoning_chat()[:-1]
    chat[-1] = a("", reasoning="r1 thought about apple two.")
    yield base("rx-reasoning-continue-empty", "continue on a message with reasoning and no text yet: the prefix and "
               "the reasoning only (prefixIncomplete)", [script("/apple/g", "PEAR", placement=(6,))], chat=chat,
               generation_type="continue")


def corpus_cases() -> Iterator[dict]:
    html = "<!-- HTML_START --><div class='panel'>HP 10</div><!-- HTML_END -->"
    nemo_chat = [a("d9 greeting " + html), u("d8 hello"),
                 a("d7 <think>old plan</think>reply " + html + " <vexnote>old note</vexnote> "
                   "<st-tracker-mini>t7</st-tracker-mini>"), u("d6 next"),
                 a("d5 reply " + html + " <vexnote>note5</vexnote>"), u("d4 more"),
                 a("d3 <thinking>recent plan</thinking>\nreply " + html + " <vexnote>note3</vexnote> "
                   "<st-tracker>t3</st-tracker>"), u("d2 go on"), a("d1 reply " + html), u("d0 last")]
    for allowed in (True, False):
        yield base(f"rxc-nemo-engine-v10-{'allowed' if allowed else 'denied'}",
                   "nemo-engine-v10 preset's 118 scripts (4 enabled promptOnly: HTML and trackers beyond depth 5, "
                   "thinking cleanup, vex notes) over a chat with what they target",
                   group="RC", preset=corpus("presets/nemo-engine-v10.json"), chat=nemo_chat,
                   regex={"global": [], "preset_allowed": allowed, "card_allowed": True})
    status = "<StatusPlaceHolderImpl/>"
    lide = [a("d5 greeting " + status), u("d4 hi"),
            a("d3 text <VariableUpdateImpl>_.set('a', 1);</VariableUpdateImpl> " + status), u("d2 ok"),
            a("d1 text <VariableUpdateImpl>_.set('b', 2);</VariableUpdateImpl>\n" + status), u("d0 next")]
    mvu = [a("d13 greeting " + status)]
    for d in range(12, -1, -1):
        if d % 2:
            mvu.append(a(f"d{d} story {d}. <UpdateVariable>_.set('hp', {d});</UpdateVariable>"
                         f"<summary>sum {d}</summary> tail {d} " + status))
        else:
            mvu.append(u(f"d{d} user {d}"))
    zhanguo = [a("d9 greeting " + status)]
    for d in range(8, -1, -1):
        zhanguo.append(a(f"d{d} <Analysis>plan {d}</Analysis>story {d}<UpdateVariable>_.set('x', {d});"
                         f"</UpdateVariable>{status}") if d % 2 else u(f"d{d} user {d}"))
    for name, chat in (("lide-ai", lide), ("mvu-qingkong-li", mvu), ("zhanguo", zhanguo)):
        for allowed in (True, False):
            yield base(f"rxc-{name}-{'allowed' if allowed else 'denied'}",
                       f"cards/{name}.v3.json's own promptOnly scripts (status bar hidden from the AI, variable "
                       "updates only within a depth, summaries by depth) over a chat with what they target",
                       group="RC", card=corpus(f"cards/{name}.v3.json"), chat=chat,
                       regex={"global": [], "preset_allowed": True, "card_allowed": allowed})
    tawa = [a("d5 greeting <ink>jp</ink>"), u("d4 hello <ink>x</ink>"),
            a("d3 <thinking>[metacognition] plan\n</thinking>\n<content>story</content> <safe>s</safe>"),
            u("d2 go"), a("d1 <meow_FM>seeds: 1 2 3\nseri: no.5</meow_FM> <calendar_widget>c</calendar_widget>"),
            u("d0 last")]
    yield base("rxc-tawa-delta-allowed", "tawa-delta.vi preset's promptOnly scripts, user input and AI output, "
               "lookbehind, whole-message wraps", group="RC", preset=corpus("presets/tawa-delta.vi.json"),
               chat=tawa)


def scenarios() -> Iterator[dict]:
    yield from placement_cases()
    yield from depth_cases()
    yield from order_cases()
    yield from substitution_cases()
    yield from replacement_cases()
    yield from flag_cases()
    yield from wi_cases()
    yield from reasoning_cases()
    yield from more_cases()
    yield from corpus_cases()


def main(argv: list) -> int:
    all_sc = list(scenarios())
    ids = [sc["id"] for sc in all_sc]
    assert len(ids) == len(set(ids)), "duplicate scenario ids"
    if not argv or argv[0] == "list":
        for sc in all_sc:
            print(f"{sc['group']:3} {sc['id']:36} {sc['pins'][:100]}")
        return 0
    if argv[0] == "show":
        print(json.dumps(ms.stored(next(x for x in all_sc if x["id"] == argv[1])), ensure_ascii=False, indent=1))
        return 0
    if argv[0] != "run":
        print(__doc__)
        return 2
    sel = all_sc
    if "--only" in argv:
        want = set(argv[argv.index("--only") + 1].split(","))
        sel = [sc for sc in sel if sc["id"] in want]
    done = ms.load_jsonl(OUT)
    res = ms.run_batch(sel)
    retry = [sc for sc in sel if not res.get(sc["id"], {}).get("ok")]
    if retry:
        res.update(ms.run_batch(retry))
    for sc in sel:
        if res.get(sc["id"], {}).get("ok"):
            done[sc["id"]] = ms.record(sc, res[sc["id"]])
    with open(OUT, "w", encoding="utf-8") as f:
        for cid in ids:
            if cid in done:
                f.write(json.dumps(done[cid], ensure_ascii=False) + "\n")
    failed = [sc["id"] for sc in sel if not res.get(sc["id"], {}).get("ok")]
    print(f"{len(done)} recorded; failed: {failed}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

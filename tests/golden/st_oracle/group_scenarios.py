#!/usr/bin/env python3
"""Group-chat scenarios for the SillyTavern oracle: build them, drive SillyTavern, keep what it sent.

Why: the shared oracle (`../shared/tools/st-oracle/oracle.py`) records one-character chats only. Group chats have
behaviour of their own (SillyTavern's generation modes "swap", "join character cards" and "join, including muted",
the join prefix and suffix, the members' depth prompts, whose lorebook is read), so this script drives SillyTavern
1.18.0 through its own group API the same way: import the members' cards, create the group with
`/api/groups/create` (members by avatar, `generation_mode`, `generation_mode_join_prefix/suffix`,
`disabled_members`), open it, put the chat in place, and press generate for a chosen member
(`generate('normal', {force_chid})`, what the member's "trigger" button does). The stub's recorded body is the fact
kept in `group_requests.jsonl`.

  group_scenarios.py list
  group_scenarios.py show ID
  group_scenarios.py run [--only ID,ID]       # needs ST on 127.0.0.1:8123 and stub.py on 127.0.0.1:8124

Scenario fields (besides the oracle's `preset`, `chat`, `user_name`, `persona_description`):
  members           [card, ...] in group order (cards inline or corpus references)
  speaker           index into members: who is asked to reply
  generation_mode   0 swap (SillyTavern's default), 1 append ("join character cards"), 2 append_disabled
  join_prefix / join_suffix   the group's generation_mode_join_prefix / _suffix
  disabled          member indexes that are muted (disabled_members)
  worlds            {name: book}: world files written before the cards are imported (a card links one through
                    data.extensions.world)
  global_worlds     names among worlds selected as global world info (`/world`)
  generation_type   normal (default) or another type generate() takes (impersonate, ...)
  chat_scenario / chat_mes_example   the chat's overrides (chat_metadata.scenario / mes_example, what a group's
                    "scenario override" writes), set on the opened chat before generating
"""
from __future__ import annotations

import asyncio
import datetime as dt
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "group_requests.jsonl")


def _module(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ms = _module("st_oracle_make_scenarios", os.path.join(HERE, "make_scenarios.py"))
USER, PERSONA, DEFAULT_PRESET = ms.USER, ms.PERSONA, ms.DEFAULT_PRESET
u, a = ms.u, ms.a


# ---------------------------------------------------------------- assets

def member(name: str, description: str, personality: str, scenario: str, mes_example: str, first_mes: str,
           depth_prompt: dict | None = None, world: str = "") -> dict:
    """A small v2 card (inline: group cases need members whose every field is known)."""
    ext: dict[str, Any] = {"talkativeness": "0.5", "fav": False, "world": world,
                           "depth_prompt": depth_prompt or {"prompt": "", "depth": 4, "role": "system"}}
    data = {"name": name, "description": description, "personality": personality, "scenario": scenario,
            "first_mes": first_mes, "mes_example": mes_example, "creator_notes": "", "system_prompt": "",
            "post_history_instructions": "", "alternate_greetings": [], "tags": [], "creator": "tavernbox-tests",
            "character_version": "1", "extensions": ext}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


MIRA = member(
    "Mira", "{{char}} keeps the lighthouse on Gull Point and talks to the gulls. {{user}} visits her often.",
    "Patient, dry humour, hates waste.",
    "A storm is rolling over {{char}}'s lighthouse.",
    "<START>\n{{user}}: Any ships tonight?\n{{char}}: \"Only the stubborn ones.\"",
    "*Mira wipes salt from the lamp glass.* \"You made it before the rain.\"")
BO = member(
    "Bo", "  {{char}} is a smuggler with a soft spot for cats.\n\n", "",
    "{{char}} hides crates in the lighthouse cellar.",
    "{{user}}: What is in the crates?\n{{char}}: \"Cats. Mostly.\"\n{{user}}: Mostly?\n{{char}}: *shrugs*",
    "*Bo tips his hat.* \"Evening.\"",
    depth_prompt={"prompt": "{{char}} never admits to smuggling.", "depth": 2, "role": "system"})
CASS = member(
    "Cass", "{{char}} is the harbour master's daughter, who listens at doors.", "Curious, quick, a little reckless.",
    "", "<START>\n{{char}}: \"I heard nothing. Nothing at all.\"",
    "*Cass peeks in from the stairs.*",
    depth_prompt={"prompt": "{{char}} is listening from the stairs.", "depth": 1, "role": "user"})
# the same three with a depth prompt for Mira at Bo's depth and role (two members' prompts meet at one depth)
MIRA_DP = json.loads(json.dumps(MIRA))
MIRA_DP["data"]["extensions"]["depth_prompt"] = {"prompt": "{{char}} counts the seconds between lightning and "
                                                           "thunder.", "depth": 2, "role": "system"}


def with_world(card: dict, world: str) -> dict:
    out = json.loads(json.dumps(card))
    out["data"]["extensions"]["world"] = world
    return out


MIRA_LORE = ms.book(ms.wi_entry(0, ["lamp"], "[Mira's lore: the lamp was lit by her grandmother in 1911.]",
                                constant=True))
BO_LORE = ms.book(ms.wi_entry(0, ["crates"], "[Bo's lore: the cellar has a tunnel to the harbour.]", constant=True),
                  ms.wi_entry(1, ["Cats"], "[Bo's lore: the cats are Siamese and worth a fortune.]"))


def group_chat() -> list:
    return [a("*Mira wipes salt from the lamp glass.* \"You made it before the rain.\"", name="Mira"),
            u("Evening, Mira. Is Bo here too?"),
            a("*Bo tips his hat from the cellar door.* \"Evening.\"", name="Bo"),
            u("What are you two hiding down there?")]


def base(cid: str, pins: str, **kw: Any) -> dict:
    sc = {"id": cid, "group": "G", "pins": pins, "preset": DEFAULT_PRESET, "members": [MIRA, BO, CASS],
          "speaker": 1, "generation_mode": 0, "join_prefix": "", "join_suffix": "", "disabled": [],
          "chat": group_chat(), "user_name": USER, "persona_description": PERSONA}
    sc.update(kw)
    return sc


PREFIX = "[{{char}}'s <FIELDNAME>]\n"
SUFFIX = "\n[end of <fieldname>]"


def scenarios() -> Iterator[dict]:
    yield base("group-swap", "swap mode (SillyTavern's default): the card is the speaking member's; examples and "
               "history prefixed with names; {{group}} in the group new-chat prompt; the group nudge "
               "(getCharacterCardFieldsLazy without group cards, parseExampleIntoIndividual appendNamesForGroup)")
    yield base("group-swap-muted-speaker", "swap mode, the muted member asked to reply: its own card "
               "(generateGroupWrapper force_chid)", speaker=2, disabled=[2])
    yield base("group-append-affixes", "append mode with a join prefix and suffix using {{char}} and <FIELDNAME> "
               "(any case), a muted member left out, an empty personality skipped, examples given <START> "
               "(getGroupCharacterCardsLazy, getGroupDepthPrompts)",
               generation_mode=1, join_prefix=PREFIX, join_suffix=SUFFIX, disabled=[2], speaker=0)
    yield base("group-append-plain", "append mode without prefix or suffix, every member enabled, Bo replying: "
               "fields joined by newlines, depth prompts of every member (getGroupCharacterCardsLazy, "
               "getGroupDepthPrompts)", generation_mode=1, speaker=1)
    yield base("group-append-disabled", "append_disabled mode: the muted member's fields are joined too, but not "
               "its depth prompt (getGroupCharacterCardsLazy APPEND_DISABLED, getGroupDepthPrompts)",
               generation_mode=2, join_prefix=PREFIX, join_suffix=SUFFIX, disabled=[2], speaker=0)
    yield base("group-append-muted-speaker", "append mode, the muted member asked to reply: its fields and depth "
               "prompt are included because it speaks (characterId === index)",
               generation_mode=1, join_prefix=PREFIX, disabled=[2], speaker=2)
    yield base("group-append-depth-prompts", "append mode, two members' depth prompts at the same depth and role: "
               "one in-chat message, member order (DEPTH_PROMPT_<index> extension prompts)",
               generation_mode=1, members=[MIRA_DP, BO, CASS], speaker=1)
    yield base("group-swap-depth-prompts", "swap mode with the same members: only the speaker's depth prompt "
               "(getGroupDepthPrompts returns nothing in swap mode)",
               generation_mode=0, members=[MIRA_DP, BO, CASS], speaker=0)
    lore = {"oracle-g-mira-lore": MIRA_LORE, "oracle-g-bo-lore": BO_LORE}
    yield base("group-append-lorebooks", "append mode, members linking their own lorebooks: only the speaking "
               "member's lorebook is scanned, its keys matched in the chat (getCharacterLore reads this_chid)",
               generation_mode=1, speaker=1, worlds=lore,
               members=[with_world(MIRA, "oracle-g-mira-lore"), with_world(BO, "oracle-g-bo-lore"), CASS])
    yield base("group-swap-lorebooks", "swap mode, members linking their own lorebooks, Mira replying: only Mira's "
               "book (getCharacterLore)", generation_mode=0, speaker=0, worlds=lore,
               members=[with_world(MIRA, "oracle-g-mira-lore"), with_world(BO, "oracle-g-bo-lore"), CASS])

    macros = ms.corpus("presets/st-default-openai.json", prompts_patch={"main": {"content": (
        "Write {{char}}'s next reply. Group: {{group}}. Not muted: {{groupNotMuted}}. Others: {{notChar}}. "
        "If not group: {{charIfNotGroup}}.")}})
    yield base("group-name-macros", "{{group}}, {{groupNotMuted}}, {{notChar}} and {{charIfNotGroup}} in a group "
               "with a muted member (MacroEnvBuilder getGroupValue)", preset=macros, disabled=[2], speaker=1)
    common = {"oracle-g-common": ms.book(ms.wi_entry(
        0, ["smuggler"], "[Common lore: the coastguard pays well for the names of smugglers.]",
        matchCharacterDescription=True))}
    yield base("group-append-wi-description", "append mode, a global entry that matches character descriptions: the "
               "joined description is scanned, so a key only in another member's description fires "
               "(globalScanData.characterDescription from getCharacterCardFields)",
               generation_mode=1, speaker=0, worlds=common, global_worlds=["oracle-g-common"])
    yield base("group-swap-wi-description", "swap mode, the same entry: only the replying member's description is "
               "scanned, the entry stays out", generation_mode=0, speaker=0, worlds=common,
               global_worlds=["oracle-g-common"])

    sera_chat = [a(ms.greeting(ms.SERA), name="Seraphina"), u("Is it safe in this forest, Seraphina?"),
                 a("*Mira shrugs from the doorway.* \"Safer than the sea tonight.\"", name="Mira"),
                 u("Then we wait out the storm here, in your forest.")]
    yield base("group-append-corpus-card", "append mode with a corpus card (Seraphina, linking SillyTavern's shipped "
               "world Eldoria) replying: her long description joined with the others, her world scanned "
               "(getGroupCharacterCardsLazy, getCharacterLore)", members=[ms.SERA, MIRA, BO], speaker=0,
               generation_mode=1, join_prefix=PREFIX, join_suffix=SUFFIX, chat=sera_chat)
    yield base("group-append-corpus-card-other", "the same group with Mira replying: Seraphina's fields are joined, "
               "her world Eldoria is not scanned (getCharacterLore reads the replying member only)",
               members=[ms.SERA, MIRA, BO], speaker=1, generation_mode=1, join_prefix=PREFIX, join_suffix=SUFFIX,
               chat=sera_chat)
    yield base("group-swap-names-completion", "swap mode with names_behavior 1 (completion): every chat message "
               "carries its speaker's name field (setOpenAIMessages)",
               preset=ms.corpus("presets/st-default-openai.json", patch={"names_behavior": 1}))
    yield base("group-swap-impersonate", "swap mode, impersonation: no group nudge (populateChatHistory "
               "noGroupNudgeTypes)", generation_type="impersonate")

    yield base("group-append-continue", "append mode, continuing the replying member's last message: the group nudge, "
               "then the continued message, then the continue nudge (populateChatHistory, continue in a group)", generation_mode=1,
               speaker=1, generation_type="continue",
               chat=group_chat() + [a("*Bo glances at the cellar door.* \"Nothing. Just", name="Bo")])
    overrides = {"chat_scenario": "The storm has passed; {{char}} counts the broken panes.",
                 "chat_mes_example": "{{user}}: Well?\n{{char}}: \"Well.\""}
    yield base("group-append-chat-overrides", "append mode with the chat's scenario and example overrides: they "
               "replace the joined fields, {{char}} the replying member (getGroupCharacterCardsLazy "
               "scenarioOverride / mesExamplesOverride)", generation_mode=1, join_prefix=PREFIX, join_suffix=SUFFIX,
               speaker=0, **overrides)
    yield base("group-swap-chat-overrides", "swap mode with the same overrides: they replace the replying member's "
               "fields (getCharacterCardFieldsLazy chat_metadata.scenario || character.scenario)", speaker=1,
               **overrides)
    yield base("group-append-blank-override", "append mode with a scenario override of spaces: trimmed to nothing, "
               "so the joined scenario is sent", generation_mode=1, speaker=0, chat_scenario="   ")
    yield base("group-swap-blank-override", "swap mode with a scenario override of spaces: it wins over the card "
               "and is trimmed to nothing, so no scenario is sent", speaker=1, chat_scenario="   ")


FIELDS = ("preset", "members", "speaker", "generation_mode", "join_prefix", "join_suffix", "disabled", "worlds",
          "global_worlds", "chat", "user_name", "persona_description", "generation_type", "chat_scenario",
          "chat_mes_example")


def stored(sc: dict) -> dict:
    return {k: v for k, v in sc.items() if k in FIELDS}


# ---------------------------------------------------------------- driving SillyTavern

GROUP_JS = r"""
async ([avatars, mode, prefix, suffix, disabled, name]) => {
  const c = SillyTavern.getContext();
  const r = await fetch('/api/groups/create', { method: 'POST', headers: c.getRequestHeaders(), body: JSON.stringify({
      name, members: avatars, avatar_url: '', allow_self_responses: false, activation_strategy: 1,
      generation_mode: mode, disabled_members: disabled, fav: false, chat_metadata: {}, chats: [],
      generation_mode_join_prefix: prefix, generation_mode_join_suffix: suffix }) });
  if (!r.ok) throw new Error('group create failed ' + r.status);
  const group = await r.json();
  await c.getCharacters();              // reloads the groups too
  const G = await import('/scripts/group-chats.js');
  const opened = await G.openGroupById(group.id);
  if (!opened) throw new Error('group not opened');
  return group.id;
}
"""

CHAT_JS = r"""
async ([msgs, avatars]) => {
  const c = SillyTavern.getContext();
  const byName = Object.fromEntries(avatars.map(av => [c.characters.find(x => x.avatar === av).name, av]));
  const out = msgs.map((m, i) => {
      const base = { send_date: 'January 1, 2025 12:0' + (i % 10) + 'am', extra: {} };
      if (m.role === 'user') return { ...base, name: c.name1, is_user: true, is_system: false, mes: m.content };
      const av = byName[m.name];
      return { ...base, name: m.name, is_user: false, is_system: false, mes: m.content,
               original_avatar: av, force_avatar: 'characters/' + av };
  });
  c.chat.splice(0, c.chat.length, ...out);
  await c.saveChat();
  await c.reloadCurrentChat();
}
"""


async def run_case(oracle: Any, browser: Any, sc: dict, workdir: str) -> dict:
    cid = sc["id"]
    oracle.restore_settings()
    ctx = await browser.new_context()
    page = await ctx.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("dialog", lambda d: asyncio.ensure_future(d.dismiss()))
    try:
        await page.goto(oracle.ST_URL, wait_until="load")
        await oracle.wait_ready(page)
        preset = dict(ms.resolve(sc["preset"]))
        for f in oracle.SENSITIVE:
            preset.pop(f, None)
        stamp = int(time.time() * 1000) % 100000
        pname = f"oracle-{cid}-{stamp}"
        ppath = os.path.join(workdir, pname + ".json")
        json.dump(preset, open(ppath, "w", encoding="utf-8"), ensure_ascii=False)
        await page.set_input_files("#openai_preset_import_file", ppath)
        await page.wait_for_function("(n) => SillyTavern.getContext().chatCompletionSettings.preset_settings_openai "
                                     "=== n", arg=pname, timeout=30000)
        await asyncio.sleep(1.5)
        for wname, wbook in (sc.get("worlds") or {}).items():
            await page.evaluate("""async ([name, data]) => {
                const c = SillyTavern.getContext();
                const r = await fetch('/api/worldinfo/edit', { method: 'POST', headers: c.getRequestHeaders(),
                                      body: JSON.stringify({ name, data }) });
                if (!r.ok) throw new Error('worldinfo edit failed ' + r.status);
                const W = await import('/scripts/world-info.js');
                await W.updateWorldInfoList();
            }""", [wname, wbook])
        for wname in sc.get("global_worlds") or []:
            await page.evaluate("""async (name) => { await SillyTavern.getContext()
                .executeSlashCommandsWithOptions('/world silent=true "' + name + '"'); }""", wname)
        avatars = []
        for i, card in enumerate(sc["members"]):
            file_name = await page.evaluate("""async ([cardJson, fname]) => {
                const c = SillyTavern.getContext();
                const fd = new FormData();
                fd.append('avatar', new File([cardJson], fname + '.json', { type: 'application/json' }));
                fd.append('file_type', 'json');
                const h = c.getRequestHeaders(); delete h['Content-Type'];
                const r = await fetch('/api/characters/import', { method: 'POST', headers: h, body: fd });
                const j = await r.json();
                if (j.error) throw new Error('import failed ' + JSON.stringify(j));
                return j.file_name;
            }""", [json.dumps(ms.resolve(card), ensure_ascii=False), f"oracle-{cid}-{stamp}-{i}"])
            avatars.append(file_name + ".png")
        await page.evaluate("""async ([name, desc]) => {
            const S = await import('/script.js');
            S.setUserName(name, { toastPersonaNameChange: false });
            SillyTavern.getContext().powerUserSettings.persona_description = desc;
        }""", [sc.get("user_name") or "User", sc.get("persona_description") or ""])
        disabled = [avatars[i] for i in sc.get("disabled") or []]
        gid = await page.evaluate(GROUP_JS, [avatars, int(sc.get("generation_mode") or 0), sc.get("join_prefix") or "",
                                             sc.get("join_suffix") or "", disabled, f"oracle-{cid}-{stamp}"])
        await page.wait_for_function("(g) => SillyTavern.getContext().groupId === g", arg=gid, timeout=30000)
        await asyncio.sleep(1.0)
        await page.evaluate(CHAT_JS, [sc["chat"], avatars])
        await page.wait_for_function("(n) => SillyTavern.getContext().chat.length === n", arg=len(sc["chat"]),
                                     timeout=30000)
        await asyncio.sleep(0.5)
        if sc.get("chat_scenario") is not None or sc.get("chat_mes_example") is not None:
            await page.evaluate("""async ([s, e]) => { const c = SillyTavern.getContext();
                if (s !== null) c.chatMetadata.scenario = s;
                if (e !== null) c.chatMetadata.mes_example = e;
                await c.saveMetadata(); }""", [sc.get("chat_scenario"), sc.get("chat_mes_example")])
        snapshot = await page.evaluate(oracle.SNAPSHOT_JS)
        snapshot["group"] = await page.evaluate("""(g) => { const c = SillyTavern.getContext();
            const x = c.groups.find(y => y.id === g);
            return { chat_scenario: c.chatMetadata.scenario ?? null, chat_mes_example: c.chatMetadata.mes_example ?? null,
                     members: x.members.map(av => c.characters.find(ch => ch.avatar === av)?.name),
                     generation_mode: x.generation_mode, disabled_members: x.disabled_members.map(av =>
                     c.characters.find(ch => ch.avatar === av)?.name), generation_mode_join_prefix:
                     x.generation_mode_join_prefix, generation_mode_join_suffix: x.generation_mode_join_suffix }; }""",
                                                gid)
        oracle.http("POST", oracle.STUB_URL + "/_clear", {})
        await page.evaluate("""([av, t]) => { const c = SillyTavern.getContext();
            const chid = c.characters.findIndex(x => x.avatar === av);
            window.__oracleGen = c.generate(t, { force_chid: chid }).then(() => 'done', e => 'error: ' + e);
            return 1; }""", [avatars[int(sc["speaker"])], sc.get("generation_type") or "normal"])
        t0 = time.time()
        reqs: list = []
        while time.time() - t0 < 60:
            reqs = oracle.http("GET", oracle.STUB_URL + "/_requests")
            if reqs:
                break
            await asyncio.sleep(0.3)
        if not reqs:
            raise RuntimeError("no request reached the stub; console tail:\n" + "\n".join(console[-40:]))
        await asyncio.sleep(1.0)
        reqs = oracle.http("GET", oracle.STUB_URL + "/_requests")
        return {"ok": True, "request": reqs[0]["body"], "time": reqs[0].get("time"), "n_requests": len(reqs),
                "snapshot": snapshot, "st_version": oracle.st_version()}
    finally:
        await ctx.close()


def record(sc: dict, res: dict) -> dict:
    body = res["request"]
    when = res.get("time")
    rec = {"id": sc["id"], "group": sc["group"], "pins": sc["pins"], "scenario": stored(sc),
           "recorded_at": (dt.datetime.fromtimestamp(when, dt.timezone.utc).isoformat(timespec="seconds")
                           .replace("+00:00", "Z") if when else None),
           "st_version": res.get("st_version"), "messages": body.get("messages"),
           "request_fields": ms.request_fields(body), "snapshot": res["snapshot"]}
    if res.get("n_requests", 1) != 1:
        rec["n_requests"] = res["n_requests"]
    return rec


async def run(cases: list) -> dict:
    from playwright.async_api import async_playwright

    oracle = _module("st_oracle_driver", ms.ORACLE)
    results: dict = {}
    print("removed worlds left by earlier cases:", ms.clean_worlds(), flush=True)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                          args=["--no-sandbox"])
        workdir = tempfile.mkdtemp(prefix="st-oracle-group-")
        try:
            for sc in cases:
                t0 = time.time()
                try:
                    results[sc["id"]] = await run_case(oracle, browser, sc, workdir)
                except Exception as exc:  # keep going; reported and left out of the goldens
                    results[sc["id"]] = {"ok": False, "error": str(exc)[:3000]}
                r = results[sc["id"]]
                print(sc["id"], "ok" if r["ok"] else r["error"][:400], f"({time.time() - t0:.0f}s)", flush=True)
        finally:
            await browser.close()
            shutil.rmtree(workdir, ignore_errors=True)
    return results


def main(argv: list) -> int:
    all_sc = list(scenarios())
    ids = [sc["id"] for sc in all_sc]
    if not argv or argv[0] == "list":
        for sc in all_sc:
            print(f"{sc['id']:32} {sc['pins'][:100]}")
        return 0
    if argv[0] == "show":
        print(json.dumps(stored(next(x for x in all_sc if x["id"] == argv[1])), ensure_ascii=False, indent=1))
        return 0
    if argv[0] != "run":
        print(__doc__)
        return 2
    sel = all_sc
    if "--only" in argv:
        want = set(argv[argv.index("--only") + 1].split(","))
        sel = [sc for sc in sel if sc["id"] in want]
    done = ms.load_jsonl(OUT)
    res = asyncio.run(run(sel))
    for sc in sel:
        if res[sc["id"]].get("ok"):
            done[sc["id"]] = record(sc, res[sc["id"]])
    with open(OUT, "w", encoding="utf-8") as f:
        for cid in ids:
            if cid in done:
                f.write(json.dumps(done[cid], ensure_ascii=False) + "\n")
    failed = [sc["id"] for sc in sel if not res[sc["id"]].get("ok")]
    print(f"{len(done)} recorded; failed: {failed}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

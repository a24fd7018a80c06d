"""One test per lint code: a minimal asset set that triggers it, and a near twin that does not.

``CASES`` must cover the whole catalogue (``LINT_CODES``), so a new code cannot land without its
pair of assets; ``docs/LINT.md`` must list exactly the catalogue, with the same severity and text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tavernbox.lint import LINT_CODES, lint_files

DOCS = Path(__file__).resolve().parents[1] / "docs" / "LINT.md"


def preset(prompts: list[dict[str, Any]], order: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A chat-completion preset; ``order`` defaults to every prompt enabled, plus chatHistory."""
    if order is None:
        order = [{"identifier": p["identifier"], "enabled": True} for p in prompts]
    if not any(p["identifier"] == "chatHistory" for p in prompts):
        prompts = [*prompts, {"identifier": "chatHistory", "name": "Chat History", "marker": True}]
        order = [*order, {"identifier": "chatHistory", "enabled": True}]
    return {"temperature": 1, "prompts": prompts, "prompt_order": [{"character_id": 100001, "order": order}], **extra}


def book(*entries: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for i, e in enumerate(entries):
        entry = {"uid": i, "key": ["dragon"], "keysecondary": [], "comment": f"entry {i}", "content": "text",
                 "constant": False, "selective": True, "selectiveLogic": 0, "disable": False, "position": 0,
                 "depth": 4, "order": 100}
        entry.update(e)
        out[str(entry.pop("_key", i))] = entry
    return {"entries": out}


def card(**fields: Any) -> dict[str, Any]:
    data = {"name": "Ash", "description": "A ranger.", "first_mes": "Hello {{user}}.", **fields}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def text(body: str) -> str:
    return body


def rx(find: str, **fields: Any) -> dict[str, Any]:
    """A SillyTavern regex script (an export holds one or a list)."""
    return {"scriptName": "s", "findRegex": find, "replaceString": "", "placement": [2], "promptOnly": True,
            **fields}


CHAT_JSONL = "\n".join(json.dumps(x) for x in ({"user_name": "Ash"},
                                               {"name": "Mira", "is_user": False, "mes": "an apple", "extra": {}}))


#: code -> (files that trigger it, files that do not); a dict value is written as JSON
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "FILE_UNREADABLE": ({"bad.json": "{\"prompts\": ["}, {"good.json": preset([{"identifier": "main", "content": "x"}])}),
    "TEMPLATE_RESOURCE_INVALID": (
        {"res.json": {"id": "prompt-template:a b", "name": "T", "content": "hi"}},
        {"res.json": {"id": "prompt-template:ab", "name": "T", "content": "hi"}},
    ),
    "MACRO_UNKNOWN": ({"t.txt": "Hello {{usr}}"}, {"t.txt": "Hello {{user}}"}),
    "MACRO_ARITY": ({"t.txt": "{{user::extra}}"}, {"t.txt": "{{user}}"}),
    "MACRO_ARGUMENT_TYPE": ({"t.txt": "{{newline::many}}"}, {"t.txt": "{{newline::2}}"}),
    "MACRO_UNCLOSED_SCOPE": ({"t.txt": "{{if {{char}}}}shown"}, {"t.txt": "{{if {{char}}}}shown{{/if}}"}),
    "MACRO_ELSE_OUTSIDE_IF": ({"t.txt": "a {{else}} b"}, {"t.txt": "{{if {{char}}}}a{{else}}b{{/if}}"}),
    "MACRO_NESTING_LIMIT": ({"t.txt": "{{noop::" * 70 + "}}" * 70}, {"t.txt": "{{noop::" * 5 + "}}" * 5}),
    # distinct malformed macros up to the input limit: ~9 s to recover, stopped at the budget
    "MACRO_TIME_LIMIT": ({"t.txt": "".join(f"{{{{a{i}:}}}}" for i in range(170_000))},
                         {"t.txt": "".join(f"{{{{a{i}:}}}}" for i in range(200))}),
    "MACRO_INPUT_LIMIT": ({"t.txt": "{{user}} " + "a" * (2 * 1024 * 1024)}, {"t.txt": "{{user}} " + "a" * 1000}),
    "MACRO_LEGACY_SYNTAX": ({"t.txt": "Hello <USER>"}, {"t.txt": "Hello {{user}}"}),
    "VARIABLE_NEVER_SET": (
        {"t.txt": "hp: {{getvar::hp}}"},
        {"t.txt": "hp: {{getvar::hp}}", "init.txt": "{{setvar::hp::10}}"},
    ),
    "VARIABLE_NEVER_READ": (
        {"t.txt": "{{setvar::mood::calm}}"},
        {"t.txt": "{{setvar::mood::calm}}", "use.txt": "{{getvar::mood}}"},
    ),
    "TEMPLATE_SYNTAX": ({"t.txt": "<% if (x { %>a<% } %>"}, {"t.txt": "<% if (x) { %>a<% } %>"}),
    "TEMPLATE_TOO_LARGE": ({"t.txt": "<%= 1 %>" + "a" * 131072}, {"t.txt": "<%= 1 %>" + "a" * 1000}),
    "TEMPLATE_WRITE_REFUSED": ({"t.txt": "<% setvar('a', 1) %>"}, {"t.txt": "<%= getvar('a') %>"}),
    "TEMPLATE_READ_UNAVAILABLE": ({"t.txt": "<% getChatMessages(2) %>"}, {"t.txt": "<%= getvar('a') %>"}),
    "TEMPLATE_WORLD_INFO_UNKNOWN": (
        {"t.txt": "<%- await getwi(null, 'Castle') %>", "lore.json": book({"comment": "Dragon"})},
        {"t.txt": "<%- await getwi(null, 'Dragon') %>", "lore.json": book({"comment": "Dragon"})},
    ),
    "TEMPLATE_PRESET_PROMPT_UNKNOWN": (
        {"t.txt": "<%- await getpreset('Guide') %>", "p.json": preset([{"identifier": "main", "name": "Main", "content": "x"}])},
        {"t.txt": "<%- await getpreset('Main') %>", "p.json": preset([{"identifier": "main", "name": "Main", "content": "x"}])},
    ),
    "TEMPLATE_LIFECYCLE_UNSUPPORTED": ({"hook [RENDER:AFTER].txt": "<%= 1 %>"}, {"hook [GENERATE:BEFORE].txt": "<%= 1 %>"}),
    "WI_REGEX_INVALID": ({"lore.json": book({"key": ["/dra(gon/"]})}, {"lore.json": book({"key": ["/dra(gon)/"]})}),
    "WI_REGEX_REFUSED": ({"lore.json": book({"key": ["/(?i:ab)/"]})}, {"lore.json": book({"key": ["/ab/"]})}),
    "REGEX_SCRIPT_INVALID": ({"rx.json": [rx("/a/", placement=2)]}, {"rx.json": [rx("/a/")]}),
    "REGEX_PATTERN_INVALID": ({"rx.json": rx("/(a/")}, {"rx.json": rx("/(a)/")}),
    "REGEX_NO_MATCH": ({"rx.json": rx("/zebra/"), "chat.jsonl": CHAT_JSONL},
                       {"rx.json": rx("/apple/"), "chat.jsonl": CHAT_JSONL}),
    "REGEX_SLOW": ({"rx.json": rx("/(a+)+$/")}, {"rx.json": rx("/a+$/")}),
    "WI_KEY_EMPTY": ({"lore.json": book({"key": ["dragon", "  "]})}, {"lore.json": book({"key": ["dragon"]})}),
    "WI_ENTRY_UNREACHABLE": ({"lore.json": book({"key": []})}, {"lore.json": book({"key": [], "constant": True})}),
    "WI_LOGIC_UNSATISFIABLE": (
        {"lore.json": book({"key": ["dragon"], "keysecondary": ["Dragon"], "selectiveLogic": 2})},
        {"lore.json": book({"key": ["dragon"], "keysecondary": ["knight"], "selectiveLogic": 2})},
    ),
    "WI_RECURSION_ONLY": (
        {"lore.json": book({"delayUntilRecursion": True}), "settings": {"world_info_recursive": False}},
        {"lore.json": book({"delayUntilRecursion": True}), "settings": {"world_info_recursive": True}},
    ),
    "WI_RECURSION_CYCLE": (
        {"lore.json": book({"key": ["dragon"], "content": "The castle burns."},
                           {"key": ["castle"], "content": "A dragon sleeps."})},
        {"lore.json": book({"key": ["dragon"], "content": "The castle burns."},
                           {"key": ["castle"], "content": "A dragon sleeps.", "preventRecursion": True})},
    ),
    "WI_DUPLICATE_UID": (
        {"lore.json": book({"_key": "a", "uid": 7}, {"_key": "b", "uid": 7})},
        {"lore.json": book({"_key": "a", "uid": 7}, {"_key": "b", "uid": 8})},
    ),
    "WI_GROUP_DUPLICATE_KEY": (
        {"lore.json": book({"group": "weather"}, {"group": "weather"})},
        {"lore.json": book({"group": "weather"}, {"group": "weather", "key": ["storm"]})},
    ),
    "WI_BUDGET_OVERFLOW": (
        {"lore.json": book({"constant": True, "content": "word " * 1500})},
        {"lore.json": book({"constant": True, "content": "word " * 1500, "ignoreBudget": True})},
    ),
    "WI_DEPTH_UNREACHABLE": (
        {"lore.json": book({"position": 4, "depth": 20000})},
        {"lore.json": book({"position": 4, "depth": 2})},
    ),
    "PRESET_PROMPT_UNUSED": (
        {"p.json": preset([{"identifier": "main", "content": "x"}, {"identifier": "extra", "content": "y"}],
                          [{"identifier": "main", "enabled": True}])},
        {"p.json": preset([{"identifier": "main", "content": "x"}, {"identifier": "extra", "content": "y"}])},
    ),
    "PRESET_ORDER_UNKNOWN_PROMPT": (
        {"p.json": preset([{"identifier": "main", "content": "x"}], [{"identifier": "main"}, {"identifier": "gone"}])},
        {"p.json": preset([{"identifier": "main", "content": "x"}], [{"identifier": "main"}])},
    ),
    "PRESET_DUPLICATE_IDENTIFIER": (
        {"p.json": preset([{"identifier": "main", "content": "x"}, {"identifier": "main", "content": "y"}])},
        {"p.json": preset([{"identifier": "main", "content": "x"}, {"identifier": "main2", "content": "y"}])},
    ),
    "PRESET_INJECTION_DEPTH": (
        {"p.json": preset([{"identifier": "note", "content": "x", "injection_position": 1, "injection_depth": 10001}])},
        {"p.json": preset([{"identifier": "note", "content": "x", "injection_position": 1, "injection_depth": 4}])},
    ),
    "PRESET_MARKER_MISSING": (
        {"p.json": preset([{"identifier": "main", "content": "x"}, {"identifier": "chatHistory", "marker": True}],
                          [{"identifier": "main"}, {"identifier": "chatHistory", "enabled": False}])},
        {"p.json": preset([{"identifier": "main", "content": "x"}, {"identifier": "chatHistory", "marker": True}],
                          [{"identifier": "main"}, {"identifier": "chatHistory", "enabled": True}])},
    ),
    "PRESET_OVERRIDE_REPLACED": (
        {"p.json": preset([{"identifier": "jailbreak", "content": "Stay in character."}]),
         "c.json": card(post_history_instructions="Be brief.")},
        {"p.json": preset([{"identifier": "jailbreak", "content": "Stay in character.", "forbid_overrides": True}]),
         "c.json": card(post_history_instructions="Be brief.")},
    ),
}


def run(tmp_path: Path, files: dict[str, Any]) -> list[str]:
    """Write ``files`` (the ``settings`` key is world-info settings, not a file) and lint them."""
    from tavernbox.worldinfo.settings import WorldInfoSettings

    paths = []
    settings = None
    for name, content in files.items():
        if name == "settings":
            settings = WorldInfoSettings.from_mapping(content)
            continue
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
        paths.append(path)
    return [f.code for f in lint_files(paths, settings=settings).findings]


def test_every_code_has_a_case() -> None:
    assert set(CASES) == set(LINT_CODES)


@pytest.mark.parametrize("code", sorted(CASES))
def test_code_triggers_and_twin_does_not(code: str, tmp_path: Path) -> None:
    trigger, clean = CASES[code]
    (tmp_path / "hit").mkdir()
    (tmp_path / "clean").mkdir()
    assert code in run(tmp_path / "hit", trigger)
    assert code not in run(tmp_path / "clean", clean)


def test_docs_table_is_the_catalogue() -> None:
    rows = re.findall(r"^\| `([A-Z_]+)` \| (\w+) \| (\w+) \| (.*) \|$", DOCS.read_text(encoding="utf-8"), re.MULTILINE)
    assert {code: (family, severity, meaning) for code, family, severity, meaning in rows} == {
        code: (c.family, c.severity, c.meaning.replace("|", "/")) for code, c in LINT_CODES.items()
    }

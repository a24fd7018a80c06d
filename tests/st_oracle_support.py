"""Turn a recorded SillyTavern-oracle scenario into a tavernbox request file.

The oracle (``../shared/tools/st-oracle``) drove SillyTavern 1.18.0 itself for each scenario of
``tests/golden/st_oracle/requests.jsonl`` and kept the ``messages`` it sent. This module maps the
scenario's fields onto the request file a user would write, so the golden test checks the product
path end to end: the same preset, card, book, chat, persona, Author's Note and settings in, the
same messages out.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "st_oracle"
REQUESTS = GOLDEN / "requests.jsonl"
REGEX_REQUESTS = GOLDEN / "regex_requests.jsonl"

#: power_user settings that are request options
_OPTION_OVERRIDES = ("prefer_character_prompt", "prefer_character_jailbreak")


MARK = "\u27e6volatile\u27e7"
_VOLATILE = re.compile(r"\{\{\s*(?:random|roll|pick)\b(?:(?!\{\{|\}\}).)*\}\}", re.I | re.S)


def mask_volatile(value: Any) -> Any:
    """Every random macro in the preset's texts replaced by the marker (innermost first)."""
    if isinstance(value, str):
        previous = None
        while previous != value:
            previous, value = value, _VOLATILE.sub(MARK, value)
        return value
    if isinstance(value, list):
        return [mask_volatile(v) for v in value]
    if isinstance(value, dict):
        return {k: mask_volatile(v) for k, v in value.items()}
    return value


def matches_volatile(got: str, expected: str) -> bool:
    if MARK not in got:
        return got == expected
    pattern = "(?s)" + ".*?".join(re.escape(part) for part in got.split(MARK))
    return re.fullmatch(pattern, expected) is not None


def assert_sends_the_recorded_messages(case: dict[str, Any], request: dict[str, Any]) -> None:
    """``assemble_request(request)`` sends the messages the case recorded: roles, names and contents byte for byte,
    except that each random macro the case masked (``volatile``) matches any text."""
    import copy

    from tavernbox import assemble_request

    if case.get("volatile"):
        request = copy.deepcopy(request)
        request["preset"] = mask_volatile(request["preset"])
    got = assemble_request(request).messages
    expected = case["messages"]
    assert [(m["role"], m.get("name")) for m in got] == [(m["role"], m.get("name")) for m in expected]
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert matches_volatile(g["content"], e["content"]), f"message {i} differs"


def scenarios_module() -> ModuleType:
    """The scenario generator (it resolves corpus references the same way the recording did)."""
    spec = importlib.util.spec_from_file_location("st_oracle_make_scenarios", GOLDEN / "make_scenarios.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_cases(path: Path = REQUESTS) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def to_request(case: dict[str, Any], resolve: Any) -> dict[str, Any]:
    """The request file for a recorded case (``resolve`` inlines corpus references)."""
    sc = case["scenario"]
    preset = dict(resolve(sc["preset"]))
    if sc.get("max_context") is not None:
        preset["openai_max_context"] = sc["max_context"]
    if sc.get("max_tokens") is not None:
        preset["openai_max_tokens"] = sc["max_tokens"]
    overrides = sc.get("st_overrides") or {}
    preset.update(overrides.get("oai_settings") or {})
    options: dict[str, Any] = {"now": case.get("recorded_at")} if case.get("recorded_at") else {}
    for key in _OPTION_OVERRIDES:
        if key in (overrides.get("power_user") or {}):
            options[key] = overrides["power_user"][key]
    power_user = overrides.get("power_user") or {}
    budget: dict[str, Any] = {}
    if power_user.get("strip_examples"):
        budget["examples"] = "disabled"
    elif power_user.get("pin_examples"):
        budget["examples"] = "keep"
    if sc.get("post_processing") is not None:
        options["post_processing"] = sc["post_processing"]
    card = resolve(sc["card"])
    options["scan_embedded_book"] = bool(sc.get("import_embedded_book"))
    persona: dict[str, Any] = {"description": sc.get("persona_description") or ""}
    if sc.get("persona_position"):
        persona.update(position=sc["persona_position"], depth=int(sc.get("persona_depth", 2)),
                       role=sc.get("persona_role", "system"))
    # the oracle presses Generate with an empty send box
    generation: dict[str, Any] = {"type": sc.get("generation_type") or "normal", "input": ""}
    if sc.get("quiet_prompt"):
        generation["quiet_prompt"] = sc["quiet_prompt"]
    request: dict[str, Any] = {
        "generation": generation,
        "preset": preset,
        "card": card,
        "chat": {"messages": [{k: v for k, v in m.items()
                               if k in ("role", "content", "name", "force_avatar", "reasoning")}
                              for m in sc["chat"]]},
        "user": {"name": sc.get("user_name") or "User", "persona": persona},
        "options": options,
        # recorded in a SillyTavern without its template extensions (ext_scenarios.py records with them)
        "extensions": {"prompt_template": False, "tavern_helper": False},
    }
    if power_user.get("reasoning"):
        options["reasoning"] = {k: power_user["reasoning"][k] for k in
                                ("add_to_prompts", "prefix", "suffix", "separator", "max_additions")}
    # the regex extension as the oracle set it up: a case without a ``regex`` field ran before the oracle
    # could allow a preset's or a card's scripts, so none of them ran
    regex = sc.get("regex") or {}
    request["extensions"]["regex"] = {"scripts": regex.get("global") or [],
                                      "preset_scripts": bool(regex.get("preset_allowed")),
                                      "card_scripts": bool(regex.get("card_allowed"))}
    books: list[Any] = []
    if budget:
        request["budget"] = budget
    if sc.get("book"):
        books.append({"book": {**resolve(sc["book"]), "name": f"oracle-{case['id']}"}, "source": "global"})
    linked = ((card.get("data") or card).get("extensions") or {}).get("world")
    if linked == "Eldoria" and not sc.get("import_embedded_book"):
        # a fresh SillyTavern ships the world "Eldoria" (the corpus copy), so a card linking it finds it
        books.append({"book": {**resolve({"corpus": "worldbooks/st-default-eldoria.json"}), "name": "Eldoria"}})
    if books:
        request["books"] = books
    if sc.get("author_note"):
        request["author_note"] = dict(sc["author_note"])
    if sc.get("world_info"):
        request["world_info"] = dict(sc["world_info"])
    return request

"""Recorded SillyTavern requests with ST-Prompt-Template and Tavern Helper installed, as request files.

``golden/st_oracle/ext_requests.jsonl`` was recorded by ``golden/st_oracle/ext_scenarios.py``. A case becomes the
request file a user would write (:func:`st_oracle_support.to_request`) plus what the extensions changed in
SillyTavern: Tavern Helper's defaults raise the context to 2,000,000 tokens and force world-info settings, which
the recording's snapshot holds, so the request carries them as ``budget`` and ``world_info`` (what the README tells
a Tavern Helper user to put there). Nothing here reads a file at import time.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from st_oracle_support import to_request

from tavernbox.macros.st_variables import StVariables

GOLDEN = Path(__file__).resolve().parent / "golden" / "st_oracle"
EXT_REQUESTS = GOLDEN / "ext_requests.jsonl"
#: the variables group (``vars-`` ids): per-message scopes, SillyTavern's own variable macros
EXT_VARIABLES_REQUESTS = GOLDEN / "ext_variables_requests.jsonl"
#: the generate loader's recordings (``[GENERATE:*]``, ``@@generate_*``, ``@@preprocessing``: group G, ``gen-*``)
EXT_GENERATE_REQUESTS = GOLDEN / "ext_generate_requests.jsonl"

#: world-info settings a request may carry (the snapshot holds more: list selections, alerts)
_WORLD_INFO_KEYS = ("world_info_depth", "world_info_min_activations", "world_info_min_activations_depth_max",
                    "world_info_budget", "world_info_include_names", "world_info_recursive",
                    "world_info_case_sensitive", "world_info_match_whole_words", "world_info_character_strategy",
                    "world_info_budget_cap", "world_info_use_group_scoring", "world_info_max_recursion_steps")


@functools.cache
def ext_cases() -> dict[str, dict[str, Any]]:
    """Every recorded case of the three files, by id."""
    cases: dict[str, dict[str, Any]] = {}
    for path in (EXT_REQUESTS, EXT_GENERATE_REQUESTS, EXT_VARIABLES_REQUESTS):
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            cases.update((case["id"], case) for case in (json.loads(line) for line in lines if line.strip()))
    return cases


@functools.cache
def ext_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("st_oracle_ext_scenarios", GOLDEN / "ext_scenarios.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ext_request(case: dict[str, Any]) -> dict[str, Any]:
    """The request file for a recorded case, with the settings the extensions forced in SillyTavern."""
    module = ext_module()
    request = to_request(case, module.ms.resolve)
    snapshot = case["snapshot"]
    request.setdefault("budget", {})["max_context"] = snapshot["oai_settings"]["openai_max_context"]
    request["world_info"] = {k: snapshot["world_info"][k] for k in _WORLD_INFO_KEYS if k in snapshot["world_info"]}
    sc = case["scenario"]
    pt_on, th_on = extensions_of(case)
    pt = (sc.get("extensions") or {}).get("prompt_template")
    settings = pt.get("settings") if isinstance(pt, dict) else None
    request["extensions"] = {"prompt_template": {"enabled": pt_on, **(settings or {})}, "tavern_helper": {"enabled": th_on}}
    if sc.get("global_variables") is not None:
        request["global_variables"] = sc["global_variables"]
    if sc.get("chat_variables") is not None:
        request["chat"]["variables"] = sc["chat_variables"]
    for message, given in zip(request["chat"]["messages"], sc["chat"], strict=True):
        if given.get("variables") is not None:
            message["variables"] = given["variables"]
    if case["scenario"].get("book"):
        # the oracle stores a scenario's book as the world "oracle-<id>" (templates name it in getwi)
        for book in request.get("books", []):
            if book.get("source") == "global":
                book["book"]["name"] = f"oracle-{case['id']}"
    return request


def ext_variables(case: dict[str, Any]) -> StVariables:
    """The variables SillyTavern held when it generated: the scenario's global and chat variables and each
    message's (swipe 0)."""
    sc = case["scenario"]
    return StVariables.build(global_vars=sc.get("global_variables") or {}, chat=sc.get("chat_variables") or {},
                             messages=[m.get("variables") for m in sc["chat"]],
                             card=module_resolve(sc["card"]), preset=module_resolve(sc["preset"]))


def module_resolve(ref: Any) -> Any:
    return ext_module().ms.resolve(ref)


def extensions_of(case: dict[str, Any]) -> tuple[bool, bool]:
    """(ST-Prompt-Template on, Tavern Helper on) in the recording."""
    ext = case["scenario"].get("extensions") or {}

    def on(key: str) -> bool:
        cfg = ext.get(key)
        return bool(cfg.get("enabled", True)) if isinstance(cfg, dict) else bool(cfg)

    return on("prompt_template"), on("tavern_helper")


def assert_sends_as_recorded(case: dict[str, Any]) -> None:
    """The request path's messages for a recorded case equal what SillyTavern with the extensions sent, message by
    message."""
    from tavernbox import assemble_request

    got = assemble_request(ext_request(case)).messages
    expected = case["messages"]
    assert [m["role"] for m in got] == [m["role"] for m in expected]
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g["content"] == e["content"], f"message {i}"

"""The request path's shared caches change nothing: a warm assembly equals a cold one, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernbox import assemble_request
from tavernbox.sillytavern.cache import clear_scan_books, shared_frozen

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
PRESET = CORPORA / "presets" / "hoxilo-it-takes-two-v5.2.vi.json"
CARD = CORPORA / "cards" / "de-quoc-la-ma-than-thanh.vi.v3.json"
BOOK = CORPORA / "worldbooks" / "prolix-zzz-lorebook-vector.json"


def _clear_everything() -> None:
    from tavernbox.assembler import registry
    from tavernbox.assembler.blocks import VALIDATED_OUTPUTS
    from tavernbox.assembler.render import COMPILED_TEMPLATES

    clear_scan_books()
    COMPILED_TEMPLATES.clear()
    VALIDATED_OUTPUTS.clear()
    registry.ASSET_CACHE.clear()  # the frozen assets, and what sources keep on them
    with registry._VIEW_LOCK:
        registry._VIEW_CACHE.clear()


def _request(n: int, budget: dict[str, Any] | None = None) -> dict[str, Any]:
    messages = [{"role": "user" if (n - i) % 2 else "assistant",
                 "content": f"Message {i}: the king walks to the city gate and talks about the war."} for i in range(n)]
    req: dict[str, Any] = {"preset": str(PRESET), "card": str(CARD), "books": [str(BOOK)], "chat": {"messages": messages}}
    if budget:
        req["budget"] = budget
    return req


@pytest.mark.skipif(not PRESET.exists(), reason="the corpora live in ../shared beside the repository")
@pytest.mark.parametrize("budget", [None, {"max_context": 120_000, "max_tokens": 300},
                                    {"max_context": 60_000, "max_tokens": 300}])
def test_the_corpus_request_is_the_same_cold_and_warm(budget: dict[str, Any] | None) -> None:
    # the default budget fits everything uncounted; the smaller ones make world info and the
    # chat history count and cut near their limits
    _clear_everything()
    cold = json.dumps(assemble_request(_request(200, budget)).to_dict(), ensure_ascii=False, sort_keys=True)
    warm = [json.dumps(assemble_request(_request(200, budget)).to_dict(), ensure_ascii=False, sort_keys=True)
            for _ in range(3)]
    assert warm == [cold] * 3


def test_shared_frozen_values_are_one_object_per_content() -> None:
    a = shared_frozen([{"uid": 1, "content": "x", "order": 1.0}])
    assert shared_frozen([{"uid": 1, "content": "x", "order": 1.0}]) is a
    assert shared_frozen([{"uid": 1, "content": "x", "order": 1}]) is not a  # 1.0 and 1 differ in JSON
    assert shared_frozen([{"uid": True, "content": "x", "order": 1.0}]) is not a
    assert json.loads(json.dumps(list(map(dict, a)))) == [{"uid": 1, "content": "x", "order": 1.0}]


@pytest.mark.skipif(not PRESET.exists(), reason="the corpora live in ../shared beside the repository")
@pytest.mark.parametrize("max_context", [120_000, 690_000, 700_000, 2_000_000])
def test_world_info_bounded_by_bytes_equals_counting_every_time(max_context: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``_wi_counter``'s promise (counts never above bytes) changes no decision, near the budget
    or far from it: the same request with a counter that counts every text gives the same result."""
    import tavernbox.sillytavern.lore as st
    from tavernbox.tokenizers import get_tokenizer

    budget = {"max_context": max_context, "max_tokens": 300}
    bounded = json.dumps(assemble_request(_request(20, budget)).to_dict(), ensure_ascii=False, sort_keys=True)
    count = get_tokenizer("o200k").count
    monkeypatch.setattr(st, "_wi_counter", lambda name: (lambda text: count(text)))
    counted = json.dumps(assemble_request(_request(20, budget)).to_dict(), ensure_ascii=False, sort_keys=True)
    assert bounded == counted


@pytest.mark.skipif(not PRESET.exists(), reason="the corpora live in ../shared beside the repository")
def test_a_json_request_far_from_its_budget_imports_no_tokenizer_yaml_or_regex_engine() -> None:
    """What only some requests need is imported when one does: the o200k tokenizer (a count near
    the budget), PyYAML (a YAML file), the ``regex`` package and QuickJS (a regex key)."""
    import subprocess
    import sys

    code = ("import json, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from test_st_fixed_costs import _request\n"
            "from tavernbox import assemble_request\n"
            "assemble_request(_request(20))\n"
            "from tavernbox.tokenizers import get_tokenizer\n"
            "print(json.dumps([m for m in ('tiktoken', 'yaml', 'regex', 'quickjs') if m in sys.modules]"
            " + (['o200k built'] if get_tokenizer('o200k')._encoding is not None else [])))")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.skipif(not PRESET.exists(), reason="the corpora live in ../shared beside the repository")
def test_the_cached_preset_is_read_not_changed() -> None:
    """The chat-history check parses the cached preset's own plain data (no copy): it must only read it."""
    from tavernbox.assets.cache import load_cached
    from tavernbox.assets.frozen import json_text

    _clear_everything()
    cached = load_cached(PRESET, kind="preset").model_dump(mode="json", exclude_none=True)
    before = json_text(cached)
    for gen in ("normal", "impersonate", "continue", "quiet"):
        req = _request(6)
        req["generation"] = {"type": gen, **({"quiet_prompt": "q"} if gen == "quiet" else {})}
        assemble_request(req)
    assert json_text(load_cached(PRESET, kind="preset").model_dump(mode="json", exclude_none=True)) == before


@pytest.mark.parametrize("mode", [[], ["--messages"], ["--messages", "--target", "claude"], ["--json"]])
def test_the_cli_checks_what_it_prints_for_lone_surrogates(tmp_path: Path, mode: list[str]) -> None:
    """Each output mode refuses a lone surrogate in what it would print, printing nothing first
    (the readable and ``--messages`` modes check the messages and warnings they print, not the
    whole result)."""
    from click.testing import CliRunner

    from tavernbox.cli.main import main

    lone = "x\ud800y"
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": lone}]}), encoding="utf-8")
    preset = tmp_path / "p.json"
    preset.write_text(json.dumps({
        "prompts": [{"identifier": "main", "name": "Main", "system_prompt": True, "role": "system", "content": "M"},
                    {"identifier": "chatHistory", "name": "Chat History", "marker": True, "system_prompt": True}],
        "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                            {"identifier": "chatHistory", "enabled": True}]}]}),
        encoding="utf-8")
    result = CliRunner().invoke(main, ["assemble", "--chat", str(chat), "--preset", str(preset), *mode])
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and json.loads(lines[0])["error"]["code"] == "TEXT_SURROGATE"


@pytest.mark.skipif(not PRESET.exists(), reason="the corpora live in ../shared beside the repository")
def test_each_generation_type_is_the_same_cold_and_after_the_others() -> None:
    """What the preset source keeps per preset (its parse, its prompt sequence per generation
    type) gives every generation type its own answer, whatever ran before."""
    def run(gen: str) -> str:
        req = _request(12)
        req["generation"] = {"type": gen, **({"quiet_prompt": "Say hi."} if gen == "quiet" else {})}
        return json.dumps(assemble_request(req).to_dict(), ensure_ascii=False, sort_keys=True)

    gens = ["normal", "impersonate", "continue", "quiet", "swipe"]
    cold = {}
    for gen in gens:
        _clear_everything()
        cold[gen] = run(gen)
    for gen in [*gens, *reversed(gens)]:
        assert run(gen) == cold[gen], gen

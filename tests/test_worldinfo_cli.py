"""``tavernbox activate`` and the real-world books of the shared corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tavernbox.cli.activate import command
from tavernbox.worldinfo import activate_world_info

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"

BOOK = {"entries": {
    "0": {"uid": 0, "key": ["alice"], "content": "Alice is {{char}}'s friend", "order": 100},
    "1": {"uid": 1, "key": ["/bob/i"], "content": "Bob", "position": 4, "depth": 2, "role": 2},
    "2": {"uid": 2, "key": ["zzz"], "content": "never"},
}}
CHAT = [{"role": "user", "name": "User", "content": "hi alice"}, "and BOB"]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {"book": tmp_path / "lore.json", "chat": tmp_path / "chat.json", "settings": tmp_path / "s.json"}
    paths["book"].write_text(json.dumps(BOOK), encoding="utf-8")
    paths["chat"].write_text(json.dumps(CHAT), encoding="utf-8")
    paths["settings"].write_text(json.dumps({"world_info_depth": 3}), encoding="utf-8")
    return {k: str(v) for k, v in paths.items()}


def invoke(*args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(command, list(args), input=stdin, catch_exceptions=False)


def test_cli_json_shape(files: dict[str, str]) -> None:
    result = invoke("--book", files["book"], "--chat", files["chat"], "--settings", files["settings"], "--json",
                    "--no-macros")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert list(out) == ["before", "after", "an_top", "an_bottom", "at_depth", "em_top", "em_bottom", "outlets",
                         "activated", "trace", "state"]
    assert out["before"] == "Alice is {{char}}'s friend"
    assert out["at_depth"] == [{"depth": 2, "role": "assistant", "content": "Bob"}]
    assert out["activated"] == [{"book": "lore", "uid": 0}, {"book": "lore", "uid": 1}]
    assert [t["reason"] for t in out["trace"]] == ["key", "key", "no_match"]


def test_cli_expands_macros_by_default(files: dict[str, str]) -> None:
    out = json.loads(invoke("--book", files["book"], "--chat", files["chat"], "--json").stdout)
    assert "{{char}}" not in out["before"]


def test_cli_human_output_explains_each_entry(files: dict[str, str]) -> None:
    result = invoke("--book", files["book"], "--chat", files["chat"])
    assert result.exit_code == 0
    assert "lore.2: skipped (no_match)" in result.stdout
    assert "== at depth 2 (assistant) ==" in result.stdout


def test_cli_jsonl_one_object_per_line_in_order() -> None:
    lines = [
        {"entries": [{"uid": 1, "key": ["x"], "content": "X"}], "chat": ["x"], "settings": {}, "max_context": 100},
        {"books": [{"name": "b", "entries": [{"uid": 1, "key": ["y"], "content": "Y"}]}], "chat": ["y"]},
    ]
    result = invoke("--jsonl", stdin="\n".join(json.dumps(line) for line in lines) + "\n")
    assert result.exit_code == 0
    outs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["before"] for o in outs] == ["X", "Y"]


def test_cli_jsonl_bad_line_is_an_error_object_and_exit_one() -> None:
    result = invoke("--jsonl", stdin='not json\n{"entries": 5, "chat": []}\n')
    assert result.exit_code == 1
    outs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["error"]["code"] for o in outs] == ["INPUT_INVALID", "INPUT_INVALID"]


@pytest.mark.needs_shared("conformance/st-worldinfo.jsonl")
def test_cli_jsonl_matches_the_conformance_format() -> None:
    row = json.loads((CORPORA.parent / "conformance" / "st-worldinfo.jsonl").read_text().splitlines()[1])
    out = json.loads(invoke("--jsonl", stdin=json.dumps(row)).stdout)
    assert out["before"] == row["expected"]["before"]
    assert sorted(a["uid"] for a in out["activated"]) == row["expected"]["uids"]


def test_cli_bad_settings_name_the_setting_without_a_traceback(files: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"world_info_depth": "deep"}', encoding="utf-8")
    result = invoke("--book", files["book"], "--chat", files["chat"], "--settings", str(bad))
    assert result.exit_code == 1
    assert "Traceback" not in result.output


def test_cli_missing_inputs_are_errors(files: dict[str, str], tmp_path: Path) -> None:
    assert invoke("--book", files["book"]).exit_code == 1
    assert invoke("--chat", files["chat"]).exit_code == 1
    assert invoke("--book", str(tmp_path / "nope.json"), "--chat", files["chat"]).exit_code == 1
    broken = tmp_path / "broken.json"
    broken.write_text("[1, 2", encoding="utf-8")
    assert invoke("--book", files["book"], "--chat", str(broken)).exit_code == 1


def test_cli_card_adds_its_book_and_texts(tmp_path: Path) -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Seraphina", "description": "guardian of the glade", "personality": "", "scenario": "",
        "first_mes": "", "mes_example": "",
        "character_book": {"entries": [
            {"keys": ["glade"], "content": "The glade is old", "enabled": True, "insertion_order": 10, "id": 3,
             "extensions": {"match_character_description": True}},
        ]}}}
    card_path = tmp_path / "sera.json"
    card_path.write_text(json.dumps(card), encoding="utf-8")
    chat = tmp_path / "chat.json"
    chat.write_text('["hello"]', encoding="utf-8")
    result = invoke("--card", str(card_path), "--chat", str(chat), "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["activated"] == [{"book": "Seraphina's Lorebook", "uid": 3}]


SAMPLE_CHATS = [
    ["Hello there.", "The king rides to the old city at night."],
    [{"role": "user", "name": "User", "content": "Tell me about the dragon and the magic sword."},
     {"role": "assistant", "name": "Char", "content": "Long ago, in Eldoria, a war began."}],
    ["Xin chào, bạn khỏe không?", "你好，今天天气很好。"],
]


def _corpus_books(shared: Any) -> list[Path]:
    return sorted(shared("corpora", "worldbooks").glob("*.json")) + sorted(shared("corpora", "cards").glob("*.json"))


@pytest.mark.cases("path", _corpus_books, ids=lambda p: p.name)
def test_corpus_books_activate_without_error(path: Path) -> None:
    from tavernbox.assets import load_asset

    asset = load_asset(path)
    if asset.kind == "card":
        book = asset.model.character_book
        if book is None:
            # No embedded book: the card really carries none (nothing was lost on import).
            import json

            raw = json.loads(path.read_text(encoding="utf-8-sig")).get("data", {})
            assert not (raw.get("character_book") or {}).get("entries")
            return
    else:
        book = asset.model
    data = {"name": book.name or path.stem, **book.to_st_dict()}
    for chat in SAMPLE_CHATS:
        a = activate_world_info(data, chat, {"world_info_budget": 100, "max_context": 8192}, seed=1)
        assert len(a.trace) == len(data["entries"])
        assert a.by_position.to_json()  # places without error


def test_cli_jsonl_errors_carry_the_lines_json_paths() -> None:
    lines = ['{"entries": [], "chat": [], "settings": {"world_info_depth": "deep"}}',
             '{"entries": [], "chat": [{"role": "user", "content": 5}]}',
             '{"books": [{"entries": 5}], "chat": []}',
             '{"entries": [], "chat": [], "settings": [1]}']
    result = invoke("--jsonl", stdin="\n".join(lines))
    paths = [json.loads(line)["error"]["path"] for line in result.stdout.splitlines()]
    assert paths == ["$.settings.world_info_depth", "$.chat[0].content", "$.books[0]", "$.settings"]

"""A forced ``kind`` (``load_asset(kind=...)``, ``--kind``, the CLIs' ``--card``) versus what the data is.

Forcing a kind is for data detection cannot place (an initvar without ``initvar`` in its name, a
card missing its greeting). It must not turn a file that is unmistakably another kind into an
empty asset: a world book asked for as a card used to load as a card with no description.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_assets_cards import png_card

from tavernbox import TemplateError
from tavernbox.assets import load_asset
from tavernbox.assets.detect import KINDS, clear_kind
from tavernbox.errors import CODES

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"

ST_BOOK = {"entries": {"0": {"uid": 0, "key": ["dragon"], "content": "Dragons sleep.", "comment": "Dragons"}}}
LIST_BOOK = {"name": "Lore", "entries": [{"keys": ["k"], "content": "c", "enabled": True}]}
CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "description": "A scout.", "first_mes": "Hello."}}
V1_CARD = {"name": "Old", "description": "d", "first_mes": "hi"}
PRESET = {"prompts": [{"identifier": "main", "role": "system", "content": "Be brief."}],
          "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}]}
MVU = {"stat_data": {"hp": [10, "health"]}}

SAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "st_book": ("world_book", ST_BOOK),
    "list_book": ("world_book", LIST_BOOK),
    "card_v2": ("card", CARD),
    "card_v1": ("card", V1_CARD),
    "preset": ("preset", PRESET),
    "mvu": ("mvu", MVU),
}


def _bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_the_code_is_catalogued() -> None:
    assert "ASSET_KIND_MISMATCH" in CODES


def test_a_world_book_asked_for_as_a_card_is_refused_naming_both_kinds() -> None:
    for book in (ST_BOOK, LIST_BOOK):
        with pytest.raises(TemplateError) as err:
            load_asset(_bytes(book), kind="card")
        assert err.value.code == "ASSET_KIND_MISMATCH" and err.value.path == "$"
        assert "'card' was asked for" in err.value.message and "is a world_book" in err.value.message
        assert "entries" in err.value.message  # the evidence, so the user sees why


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_every_clear_kind_refuses_every_other_kind_and_loads_as_itself(sample: str) -> None:
    kind, value = SAMPLES[sample]
    assert load_asset(_bytes(value)).kind == kind
    assert load_asset(_bytes(value), kind=kind).kind == kind
    for other in KINDS:
        if other == kind:
            continue
        with pytest.raises(TemplateError) as err:
            load_asset(_bytes(value), kind=other)
        assert err.value.code == "ASSET_KIND_MISMATCH", (sample, other)
        assert f"'{other}' was asked for" in err.value.message and f"is a {kind}" in err.value.message


def test_a_png_card_asked_for_as_another_kind_is_refused() -> None:
    png = png_card({"chara": CARD})
    assert load_asset(png, kind="card").model.name == "Mira"
    with pytest.raises(TemplateError) as err:
        load_asset(png, kind="world_book")
    assert err.value.code == "ASSET_KIND_MISMATCH" and "is a card" in err.value.message


def test_forcing_mvu_on_a_plain_yaml_tree_keeps_working() -> None:
    text = "世界:\n  时间: 15:44\n".encode()
    with pytest.raises(TemplateError) as err:
        load_asset(text)  # no name, no MVU markers: detection cannot tell
    assert err.value.code == "ASSET_KIND_UNKNOWN"
    assert load_asset(text, kind="mvu").model.stat_data == {"世界": {"时间": "15:44"}}


def test_weak_signs_of_another_kind_do_not_override_a_forced_kind() -> None:
    # an MVU tree may hold an 'entries' object of objects: detected as a world book, but not clearly one
    diary = b"entries:\n  day1: {mood: calm}\n  day2: {mood: tense}\n"
    assert load_asset(diary).kind == "world_book"
    assert clear_kind({"entries": {"day1": {"mood": "calm"}}}) is None
    assert load_asset(diary, kind="mvu").model.stat_data == {"entries": {"day1": {"mood": "calm"},
                                                                         "day2": {"mood": "tense"}}}
    # a card without a greeting is detected as a card but may still be forced as one (and only as one)
    no_greeting = {"data": {"name": "N", "description": "d"}}
    assert clear_kind(no_greeting) is None
    assert load_asset(_bytes(no_greeting), kind="card").model.name == "N"


def test_an_empty_object_forced_as_a_world_book_still_reports_its_missing_field() -> None:
    with pytest.raises(TemplateError) as err:
        load_asset(b'{"name": "x"}', kind="world_book")
    assert (err.value.code, err.value.path) == ("ASSET_FIELD_MISSING", "$.entries")


def test_the_import_cli_reports_the_mismatch_without_a_traceback(tmp_path: Path) -> None:
    from tavernbox.cli.importer import command

    book = tmp_path / "book.json"
    book.write_text(json.dumps(ST_BOOK), encoding="utf-8")
    result = CliRunner().invoke(command, ["--kind", "card", str(book), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)["files"][0]
    assert report["ok"] is False and report["error"]["code"] == "ASSET_KIND_MISMATCH"


def test_the_macros_cli_refuses_a_world_book_given_as_the_card(tmp_path: Path) -> None:
    from tavernbox.cli.macros import command

    book = tmp_path / "book.json"
    book.write_text(json.dumps(ST_BOOK), encoding="utf-8")
    text = tmp_path / "t.txt"
    text.write_text("{{description}}", encoding="utf-8")
    result = CliRunner().invoke(command, ["--card", str(book), str(text)])
    assert result.exit_code != 0 and "ASSET_KIND_MISMATCH" in result.output + (result.stderr or "")
    assert "Traceback" not in result.output


@pytest.mark.needs_shared("corpora")
def test_corpus_assets_load_as_their_own_kind_and_refuse_another() -> None:
    folders = {"cards": "card", "worldbooks": "world_book", "presets": "preset"}
    for folder, kind in folders.items():
        for path in sorted((CORPORA / folder).iterdir()):
            wrong = "card" if kind != "card" else "world_book"
            with pytest.raises(TemplateError) as err:
                load_asset(path, kind=wrong)
            assert err.value.code == "ASSET_KIND_MISMATCH", path.name
    # the MVU initvars in the corpus are plain YAML trees: forcing mvu keeps loading them
    for path in sorted((CORPORA / "mvu").glob("*initvar*")):
        assert load_asset(path, kind="mvu").kind == "mvu", path.name

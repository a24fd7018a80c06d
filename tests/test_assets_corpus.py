"""Every real file of the shared corpus loads, or fails with a clear ASSET_* diagnostic; none crashes.

The corpus (``../shared/corpora``, listed in MANIFEST.tsv) holds 74 real presets, cards, world books,
MVU files and EJS sources. Known kinds are asserted from the manifest categories; EJS sources, the
reference list and MVU files that are not initvars may be rejected, but only with a stable code.
"""

from __future__ import annotations

import csv
import json
from functools import cache
from typing import Any

import pytest
from conftest import SHARED, shared_path

from tavernbox.assets import LoadedAsset, load_asset
from tavernbox.errors import TemplateError

CORPUS = SHARED / "corpora"

pytestmark = pytest.mark.needs_shared("corpora/MANIFEST.tsv")


@cache
def manifest(shared: Any = shared_path) -> list[tuple[str, str]]:
    with shared("corpora", "MANIFEST.tsv").open(encoding="utf-8", newline="") as fh:
        return [(row["category"], row["file"]) for row in csv.DictReader(fh, delimiter="\t")]

EXPECTED_KIND = {"presets": "preset", "cards": "card", "worldbooks": "world_book"}
REJECTION_CODES = {"ASSET_KIND_UNKNOWN", "ASSET_JSON"}


def _load(category: str, file: str) -> LoadedAsset | TemplateError:
    try:
        return load_asset(CORPUS / category / file)
    except TemplateError as exc:
        return exc


def test_manifest_lists_74_files_that_exist() -> None:
    assert len(manifest()) == 74
    for category, file in manifest():
        assert (CORPUS / category / file).is_file(), file


@pytest.mark.cases(("category", "file"), lambda shared: [pytest.param(c, f, id=f) for c, f in manifest(shared)])
def test_corpus_file_loads_or_fails_clearly(category: str, file: str) -> None:
    result = _load(category, file)
    if category in EXPECTED_KIND:
        assert isinstance(result, LoadedAsset), f"{file}: {result}"
        assert result.kind == EXPECTED_KIND[category]
        assert all(d.code.startswith("ASSET_") for d in result.diagnostics)
        json.dumps(result.summary())  # the CLI's --json output must serialise
    elif category == "mvu" and "initvar" in file.lower():
        assert isinstance(result, LoadedAsset), f"{file}: {result}"
        assert result.kind == "mvu"
        assert result.counts["leaves"] > 0
    else:
        assert isinstance(result, TemplateError), f"{file} unexpectedly loaded as {result.kind}"
        assert result.code in REJECTION_CODES
        assert result.message
        assert result.path == "$" or result.line is not None


def _by_name(name: str) -> LoadedAsset:
    for category, file in manifest():
        if file == name:
            result = _load(category, file)
            assert isinstance(result, LoadedAsset)
            return result
    raise AssertionError(name)


def test_windows_1252_preset_loads_with_encoding_and_control_char_warnings() -> None:
    asset = _by_name("atelier-v5.cp1252.json")
    assert asset.encoding == "cp1252"
    assert {d.code for d in asset.diagnostics} == {"ASSET_ENCODING", "ASSET_CONTROL_CHAR"}
    assert asset.counts["prompts"] == 141


def test_empty_roles_in_nemo_atelier_are_reported() -> None:
    asset = _by_name("nemo-atelier-2.1.json")
    roles = [d for d in asset.diagnostics if d.code == "ASSET_VALUE_NORMALISED" and d.path and d.path.endswith(".role")]
    assert len(roles) == 7


def test_string_character_id_in_lucid_loom() -> None:
    asset = _by_name("prolix-lucid-loom-v3.2.json")
    [d] = [d for d in asset.diagnostics if d.path and d.path.endswith("character_id")]
    assert d.path == "$.prompt_order[0].character_id"
    assert asset.model.prompt_order[0].character_id == 100000


def test_huge_injection_order_in_hoxilo() -> None:
    asset = _by_name("hoxilo-it-takes-two-v5.2.vi.json")
    assert [d.code for d in asset.diagnostics] == ["ASSET_NUMBER_UNSAFE"]


def test_card_books_total_matches_the_research_count() -> None:
    total = sum(_by_name(f).counts["book_entries"] for c, f in manifest() if c == "cards")
    assert total == 766


def test_world_books_total_matches_the_manifest() -> None:
    expected = {"kho-kien-thuc-viet-card.vi.json": 31, "prolix-the-long-reclamation.json": 38, "prolix-zzz-lorebook-vector.json": 338,
                "st-default-eldoria.json": 4, "viet-the-tri-thuc-can-ban.json": 37, "zonde306-inject-test.json": 15}
    assert {f: _by_name(f).counts["entries"] for f in expected} == expected


def test_corpus_books_give_world_info_a_complete_sillytavern_dict() -> None:
    from tavernbox.assets import ST_ENTRY_DEFAULTS

    for category, file in manifest():
        if category not in ("cards", "worldbooks"):
            continue
        model: Any = _by_name(file).model
        book = model.character_book if category == "cards" else model
        if book is None:
            continue
        for uid, entry in book.to_st_dict()["entries"].items():
            missing = set(ST_ENTRY_DEFAULTS) - set(entry)
            assert not missing, (file, uid, missing)


def test_corpus_presets_cards_and_books_round_trip_unknown_fields() -> None:
    checked = 0
    for category, file in manifest():
        if category not in ("presets", "worldbooks", "cards"):
            continue
        asset = _by_name(file)
        if asset.diagnostics:
            continue  # normalised on purpose; covered by the tests above
        original = json.loads((CORPUS / category / file).read_bytes().decode("utf-8"))
        assert asset.model.model_dump(by_alias=True, exclude_unset=True) == original, file
        checked += 1
    assert checked >= 25

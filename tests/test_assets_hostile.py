"""Issue 14: wrong codes, quiet acceptance and import at scale.

- a preset repeating an identifier in ``prompt_order``: SillyTavern's reading (first entry counts),
  warned at ``$.prompt_order[i].order[j]`` by ``import`` and assembled without error;
- PNG cards whose text sits in ``zTXt``/``iTXt`` chunks, under the same decompression cap that
  rejects a 1 GiB zTXt bomb quickly;
- unknown keys in the macro context and the world-info settings, warned with the nearest known key;
- ``tavernbox import -`` reads standard input;
- a world book of 100,000 and 200,000 trivial entries imports in time linear in entries and
  memory <= 20x the file + 100 MB (asserted 5x looser, as the issue asks for a shared machine), with
  the printed output summarised and ``--json`` complete.
"""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tavernbox.assets import load_asset
from tavernbox.assets.cards import MAX_PNG_TEXT, read_png_card
from tavernbox.cli.main import main
from tavernbox.errors import TemplateError
from tavernbox.macros.context import MacroContext
from tavernbox.worldinfo import WorldInfoSettings

# -- prompt_order repeating an identifier ------------------------------------------------------------

DUP_PRESET = {
    "prompts": [
        {"identifier": "main", "name": "Main", "system_prompt": True, "role": "system", "content": "MAIN"},
        {"identifier": "extra", "name": "Extra", "role": "system", "content": "EXTRA"},
        {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
    ],
    "prompt_order": [{"character_id": 100001, "order": [
        {"identifier": "main", "enabled": True},
        {"identifier": "extra", "enabled": False},
        {"identifier": "chatHistory", "enabled": True},
        {"identifier": "main", "enabled": True},
        {"identifier": "extra", "enabled": True},
    ]}],
}


def test_duplicate_prompt_order_entries_keep_the_first_and_are_warned() -> None:
    asset = load_asset(json.dumps(DUP_PRESET).encode(), kind="preset")
    order = asset.model.order_for(100001)
    assert [(o.identifier, o.enabled) for o in order] == [("main", True), ("extra", False), ("chatHistory", True)]
    warned = [d for d in asset.diagnostics if d.code == "ASSET_DUPLICATE_ID"]
    assert [d.path for d in warned] == ["$.prompt_order[0].order[3]", "$.prompt_order[0].order[4]"]
    assert warned[0].data == {"identifier": "main", "first": 0}


def test_assemble_sends_a_repeated_prompt_once_where_it_first_stands(tmp_path: Path) -> None:
    preset = tmp_path / "dup.json"
    preset.write_text(json.dumps(DUP_PRESET))
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"id": "m1", "role": "user", "content": "hi"}]))
    imported = CliRunner().invoke(main, ["import", str(preset)])
    assert imported.exit_code == 0 and "$.prompt_order[0].order[3]" in imported.stderr
    result = CliRunner().invoke(main, ["assemble", "--strategy", "builtin-st", "--chat", str(chat), "--preset", str(preset)])
    assert result.exit_code == 0, result.output
    # "extra" is disabled by its first entry, as SillyTavern reads it; "main" is sent once, before the chat
    # (counted in the printed request, whatever form builtin-st prints it in)
    out = result.stdout
    assert out.count("MAIN") == 1 and "EXTRA" not in out and out.index("MAIN") < out.index("hi")


# -- PNG cards in compressed chunks ----------------------------------------------------------------

SIG = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(*chunks: bytes) -> bytes:
    return SIG + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)) + b"".join(chunks) + _chunk(b"IEND", b"")


CARD_TEXT = base64.b64encode(json.dumps({"spec": "chara_card_v2", "data": {"name": "Zed"}}).encode())


@pytest.mark.parametrize("chunk", [
    _chunk(b"zTXt", b"chara\x00\x00" + zlib.compress(CARD_TEXT)),
    _chunk(b"iTXt", b"chara\x00\x01\x00\x00\x00" + zlib.compress(CARD_TEXT)),
    _chunk(b"iTXt", b"ccv3\x00\x00\x00en\x00Card\x00" + CARD_TEXT),
])
def test_cards_in_compressed_or_international_chunks_are_read(chunk: bytes) -> None:
    asset = load_asset(_png(chunk))
    assert asset.kind == "card" and asset.model.name == "Zed"


def test_a_zTXt_bomb_is_refused_fast_and_the_other_chunk_still_read() -> None:
    deflate = zlib.compressobj(9)
    block = b"A" * (1 << 20)
    bomb = b"".join(deflate.compress(block) for _ in range(1024)) + deflate.flush()  # 1 GiB in about 1 MB
    start = time.perf_counter()
    with pytest.raises(TemplateError) as info:
        read_png_card(_png(_chunk(b"zTXt", b"chara\x00\x00" + bomb)))
    assert time.perf_counter() - start < 1.5  # 0.3 s target, 5x for a shared machine
    assert (info.value.code, info.value.path) == ("ASSET_PNG", "$png.chara")
    assert f"{MAX_PNG_TEXT // (1024 * 1024)} MiB" in info.value.message
    value, kw, diags = read_png_card(_png(_chunk(b"zTXt", b"ccv3\x00\x00" + bomb), _chunk(b"tEXt", b"chara\x00" + CARD_TEXT)))
    assert kw == "chara" and value["data"]["name"] == "Zed"
    assert any(d.code == "ASSET_PNG" and "decompresses" in d.message for d in diags)


def test_broken_compressed_chunks_are_coded() -> None:
    for chunk, code in ((_chunk(b"zTXt", b"chara\x00\x00not zlib"), "ASSET_PNG"),
                        (_chunk(b"zTXt", b"chara\x00\x07" + zlib.compress(CARD_TEXT)), "ASSET_PNG"),
                        (_chunk(b"iTXt", b"chara\x00\x00"), "ASSET_PNG"),
                        (_chunk(b"iTXt", b"chara\x00\x00\x00\x00\x00\xff\xfe"), "ASSET_ENCODING")):
        with pytest.raises(TemplateError) as info:
            load_asset(_png(chunk))
        assert info.value.code == code and info.value.path == "$png.chara"


# -- unknown keys ----------------------------------------------------------------------------------

def test_unknown_macro_context_keys_name_the_nearest_known_key() -> None:
    found = {d.path: d.data.get("nearest") for d in MacroContext.unknown_keys(
        {"card": {"name": "A"}, "usr": "B", "character": {"descripton": "x", "name": "A"}, "zzzzzz": 1, "user": "U"})}
    assert found == {"$.card": "character", "$.usr": "user", "$.character.descripton": "description", "$.zzzzzz": None}
    assert MacroContext.unknown_keys({"user": "U", "character": {"name": "A", "tags": []}, "now": None}) == []


def test_unknown_world_info_settings_name_the_nearest_setting() -> None:
    found = {d.path: d.data.get("nearest") for d in WorldInfoSettings.unknown_keys(
        {"depth": 3, "world_info_budgt": 5, "world_info_depth": 2, "max_context": 10}, path="$.settings")}
    assert found == {"$.settings.depth": "world_info_depth", "$.settings.world_info_budgt": "world_info_budget"}


def test_unknown_keys_reach_the_cli(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps({"card": {"name": "A"}}))
    result = CliRunner().invoke(main, ["macros", "--context", str(ctx)], input="{{char}}")
    assert result.exit_code == 0
    assert "INPUT_UNKNOWN_KEY" in result.stderr and "$.card" in result.stderr and "'character'" in result.stderr
    line = {"entries": [{"keys": ["a"], "content": "A"}], "chat": ["a"], "settings": {"depth": 1}}
    out = json.loads(CliRunner().invoke(main, ["activate", "--jsonl"], input=json.dumps(line) + "\n").stdout)
    assert [(d["code"], d["path"], d["data"]["nearest"]) for d in out["diagnostics"]] == [
        ("INPUT_UNKNOWN_KEY", "$.settings.depth", "world_info_depth")]
    book, chat, settings = tmp_path / "b.json", tmp_path / "c.json", tmp_path / "s.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["a"], "content": "A"}}}))
    chat.write_text(json.dumps(["a"]))
    settings.write_text(json.dumps({"world_info_recursiv": False}))
    result = CliRunner().invoke(main, ["activate", "--book", str(book), "--chat", str(chat), "--settings", str(settings)])
    assert result.exit_code == 0 and "world_info_recursive" in result.stderr


# -- import - ----------------------------------------------------------------------------------------

def test_import_dash_reads_standard_input() -> None:
    book = json.dumps({"entries": {"0": {"uid": 0, "key": ["a"], "content": "A"}}})
    result = CliRunner().invoke(main, ["import", "--json", "-"], input=book)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["files"][0]
    assert (report["file"], report["kind"], report["counts"]["entries"]) == ("-", "world_book", 1)
    png = _png(_chunk(b"tEXt", b"chara\x00" + CARD_TEXT))
    result = CliRunner().invoke(main, ["import", "-"], input=png)
    assert result.exit_code == 0 and "card 'Zed'" in result.stdout


# -- import at scale -------------------------------------------------------------------------------

def _trivial_book(path: Path, n: int) -> int:
    """A world book of ``n`` trivial entries without uids (one info diagnostic each); returns its size."""
    data = json.dumps({"entries": {str(i): {"key": ["a"], "content": "x", "comment": ""} for i in range(n)}},
                      separators=(",", ":")).encode()
    path.write_bytes(data)
    return len(data)


_CHILD = r"""
import json, sys, time
from tavernbox.testing.memory import peak_rss_kib
from click.testing import CliRunner
start = time.process_time()
from tavernbox.cli.importer import import_one
report = import_one(sys.argv[1])
cpu = time.process_time() - start
print(json.dumps({"ok": report["ok"], "entries": report["counts"]["entries"],
                  "diagnostics": sum(1 + d.get("data", {}).get("more_like_it", 0) for d in report["diagnostics"]),
                  "shown": len(report["diagnostics"]), "cpu": cpu,
                  "rss_mb": peak_rss_kib() / 1024}))
"""


def _import_in_child(path: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_world_book_of_100k_and_200k_entries_imports_in_linear_time_and_bounded_memory(tmp_path: Path) -> None:
    figures = {}
    for n in (100_000, 200_000):
        path = tmp_path / f"book{n}.json"
        size_mb = _trivial_book(path, n) / (1024 * 1024)
        got = _import_in_child(path)
        # one per entry, counted: three shown, the last saying how many more were like it (issue 28)
        assert got["ok"] and got["entries"] == n and got["diagnostics"] == n and got["shown"] == 3
        # target: 20x the file + 100 MB; asserted 5x looser for a shared CI machine
        assert got["rss_mb"] <= 5 * (20 * size_mb + 100), (n, got)
        figures[n] = got
    # linear: twice the entries, about twice the time (5x slack for a loaded machine)
    assert figures[200_000]["cpu"] <= 5 * 2 * figures[100_000]["cpu"], figures


def test_the_report_counts_identical_diagnostics_in_both_forms(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    _trivial_book(path, 5_000)
    human = CliRunner().invoke(main, ["import", str(path)])
    assert human.exit_code == 0
    lines = human.stderr.splitlines()
    assert len(lines) == 3 and lines[-1].endswith("(and 4,997 more like it)")
    full = json.loads(CliRunner().invoke(main, ["import", "--json", str(path)]).stdout)
    shown = full["files"][0]["diagnostics"]
    assert len(shown) == 3 and shown[-1]["data"]["more_like_it"] == 4_997


def test_bench_import_runs_and_reports_its_figures() -> None:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_import.py"
    done = subprocess.run([sys.executable, str(script), "--sizes", "2000,4000", "--json"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["entries"] for r in rows] == [2000, 4000]
    for row in rows:
        assert row["import_cpu_s"] > 0 and row["peak_rss_mb"] > 0
        assert abs(row["memory_target_mb"] - (20 * row["file_mb"] + 100)) < 1

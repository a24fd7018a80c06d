"""Diagnostics are bounded (issue 28): identical ones are counted and shown a few times with "and N more like it".

The speed and memory of the issue's 100,000-entry book against the same book without the mistake are measured by
``benchmarks/bench_diagnostics.py``; here, what is kept and said.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tavernbox import assemble_request
from tavernbox.assets import load_asset
from tavernbox.cli.main import main
from tavernbox.errors import SHOWN_PER_SHAPE, BoundedDiagnostics, Diagnostic, bound_diagnostics, message_shape

N = 5_000
#: every entry uses ``key`` and lacks ``enabled``: two warnings per entry
MISTAKEN = {"name": "Big", "entries": [{"key": [f"k{i}"], "content": f"c{i}"} for i in range(N)]}


def _diag(i: int, code: str = "ASSET_FIELD_MISSING") -> Diagnostic:
    return Diagnostic(code, f"entry {i} has no 'keys' ({i * 7} bytes)", path=f"$.entries[{i}].keys")


def test_the_shape_blanks_numbers_quotes_and_macros() -> None:
    assert message_shape("entry 12 has no 'keys' at 3:4") == message_shape("entry 7 has no 'enabled' at 1:1")
    assert message_shape("unknown macro {{a}}") == message_shape("unknown macro {{bcd}}")
    assert message_shape("entry has no keys") != message_shape("entry has no content")


def test_the_first_few_of_each_kind_are_kept_in_order_and_the_last_counts_the_rest() -> None:
    given = [_diag(i) for i in range(10)] + [_diag(0, "OTHER")] + [_diag(i) for i in range(10, 12)]
    kept = bound_diagnostics(given)
    assert [d.path for d in kept] == ["$.entries[0].keys", "$.entries[1].keys", "$.entries[2].keys", "$.entries[0].keys"]
    assert kept[2].message.endswith("(and 9 more like it)") and kept[2].data["more_like_it"] == 9
    assert kept[3].code == "OTHER" and "more like it" not in kept[3].message
    assert bound_diagnostics(given[:3]) == given[:3]  # nothing left out: nothing said


def test_a_bounded_collection_keeps_a_hundred_and_its_counts_add_up_when_bounded_again() -> None:
    collected = BoundedDiagnostics()
    collected.extend(_diag(i) for i in range(N))
    collected.append(_diag(0, "OTHER"))
    assert len(collected) == 101
    finished = collected.finished()
    assert finished[99].data["more_like_it"] == N - 100
    shown = bound_diagnostics(finished)
    assert len(shown) == SHOWN_PER_SHAPE + 1
    assert shown[SHOWN_PER_SHAPE - 1].data["more_like_it"] == N - SHOWN_PER_SHAPE
    assert shown[SHOWN_PER_SHAPE - 1].message.count("more like it") == 1


def test_a_book_repeating_a_mistake_keeps_bounded_diagnostics_and_says_how_many(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(MISTAKEN), encoding="utf-8")
    asset = load_asset(path)
    assert len(asset.diagnostics) <= 2 * 100 + 5
    enabled = [d for d in asset.diagnostics if d.path and d.path.endswith(".enabled")]
    assert sum(1 + d.data.get("more_like_it", 0) for d in enabled) == N
    plain = CliRunner().invoke(main, ["import", str(path)])
    assert plain.exit_code == 0
    lines = [line for line in plain.stderr.splitlines() if "ASSET_FIELD_MISSING" in line]
    assert len(lines) == 2 * SHOWN_PER_SHAPE
    assert f"(and {N - SHOWN_PER_SHAPE:,} more like it)" in plain.stderr
    as_json = CliRunner().invoke(main, ["import", "--json", str(path)])
    report = json.loads(as_json.stdout)["files"][0]
    assert len(report["diagnostics"]) <= 2 * SHOWN_PER_SHAPE + 2 and len(as_json.stdout) < 5_000
    assert {d.get("data", {}).get("more_like_it") for d in report["diagnostics"]} >= {N - SHOWN_PER_SHAPE}


def test_assemble_warnings_are_bounded_too(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(MISTAKEN), encoding="utf-8")
    preset = {"prompts": [{"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
              "prompt_order": [{"character_id": 100001, "order": [{"identifier": "chatHistory", "enabled": True}]}]}
    result = assemble_request({"preset": preset, "books": [str(path)],
                               "chat": {"messages": [{"role": "user", "content": "hi"}]}})
    missing = [w for w in result.warnings if w.code == "ASSET_FIELD_MISSING"]
    assert len(missing) == 2 * SHOWN_PER_SHAPE
    assert sum(1 + w.data.get("more_like_it", 0) for w in missing) == 2 * N

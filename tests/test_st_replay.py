"""A record of any SillyTavern-exact request replays to the same bytes (issue 28).

Every recorded SillyTavern request (``golden/st_oracle``: groups, budgets, generation types, post-processing)
goes through the product path, ``assemble_request`` -> its ``--json`` record -> ``replay``, and must come back
byte for byte: the messages and the body. The variations the goldens do not hold (targets, every
post-processing, a budget that drops history, squashing, continue with a prefill) are replayed too.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from st_oracle_support import load_cases, scenarios_module, to_request
from test_st_oracle_groups import group_cases, group_request

from tavernbox import assemble_request
from tavernbox.cli.main import main
from tavernbox.errors import TemplateError
from tavernbox.sillytavern.replay import RECORD_FORMAT, replay

ROOT = Path(__file__).resolve().parents[1]


def _bytes(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _round_trip(request: dict[str, Any]) -> None:
    """The request's record, written and read back as the CLI would, replays to the same messages and body."""
    sent = assemble_request(request)
    record = json.loads(json.dumps(sent.to_dict()["record"], ensure_ascii=False))
    assert record["format"] == RECORD_FORMAT
    again = replay(record)
    assert _bytes(again.messages) == _bytes(sent.messages)
    assert _bytes(again.body) == _bytes(sent.body)


@pytest.fixture(scope="module")
def resolve(shared: Any) -> Any:
    shared("corpora")  # the scenarios name their preset, card and books in ../shared/corpora
    return scenarios_module().resolve


@pytest.mark.cases("case", lambda shared: load_cases(), ids=lambda c: c["id"])
def test_every_recorded_request_replays_to_the_same_bytes(case: dict[str, Any], resolve: Any) -> None:
    _round_trip(to_request(case, resolve))


@pytest.mark.cases("case", group_cases, ids=lambda c: c["id"])
def test_every_recorded_group_request_replays_to_the_same_bytes(case: dict[str, Any], resolve: Any) -> None:
    _round_trip(group_request(case, resolve))


def _sample(**changes: Any) -> dict[str, Any]:
    request = json.loads((ROOT / "corpora" / "sample-request.json").read_text(encoding="utf-8"))
    for key, value in changes.items():
        request[key] = {**(request.get(key) or {}), **value} if isinstance(value, dict) else value
    return request


@pytest.mark.parametrize("changes", [
    {},
    {"options": {"target": "claude"}},
    {"options": {"target": "google"}},
    {"options": {"target": "claude", "post_processing": "strict"}},
    *({"options": {"post_processing": kind}} for kind in ("merge", "semi", "strict", "single")),
    {"options": {"squash_system_messages": True}},
    {"options": {"dry_run": True, "squash_system_messages": True}},
    {"budget": {"max_context": 1200, "max_tokens": 300}},
    {"budget": {"examples": "disabled"}},
    {"generation": {"type": "continue"}},
    {"generation": {"type": "continue"}, "options": {"target": "claude"}},
    {"generation": {"type": "impersonate"}},
    {"generation": {"type": "quiet", "quiet_prompt": "Summarise."}},
    {"generation": {"type": "regenerate"}},
], ids=lambda c: json.dumps(c, sort_keys=True))
def test_every_path_of_the_sample_request_replays_to_the_same_bytes(changes: dict[str, Any]) -> None:
    request = _sample(**changes)
    request["preset"] = str(ROOT / "corpora" / request["preset"])
    for key in ("card", "chat"):
        if isinstance(request.get(key), str):
            request[key] = str(ROOT / "corpora" / request[key])
    request["books"] = [str(ROOT / "corpora" / b) if isinstance(b, str) else b for b in request.get("books", [])]
    _round_trip(request)


def test_a_record_whose_steps_were_edited_is_refused() -> None:
    sent = assemble_request(_sample_paths())
    record = sent.to_dict()["record"]
    swapped = copy.deepcopy(record)
    swapped["sent"]["kept"][0], swapped["sent"]["kept"][1] = swapped["sent"]["kept"][1], swapped["sent"]["kept"][0]
    edited = copy.deepcopy(record)
    edited["sent"]["post_processing"] = "single"
    unknown = copy.deepcopy(record)
    unknown["sent"]["kept"][0] = {"id": "not-made"}
    for bad in (swapped, edited, unknown, {**record, "sent": None}, {**record, "version": 9}):
        with pytest.raises(TemplateError) as info:
            replay(bad)
        assert info.value.code == "ASSEMBLY_REPLAY_INVALID"


def _sample_paths() -> dict[str, Any]:
    request = _sample()
    base = ROOT / "corpora"
    return {**request, "preset": str(base / request["preset"]), "card": str(base / request["card"]),
            "chat": str(base / request["chat"]), "books": [str(base / b) for b in request.get("books", [])]}


@pytest.mark.parametrize("extra", [[], ["--target", "claude", "--post-processing", "semi"]])
def test_the_cli_replays_what_assemble_printed(tmp_path: Path, extra: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: ``assemble --json > r.json`` then ``replay r.json`` prints what ``--messages`` printed."""
    monkeypatch.chdir(ROOT)
    args = ["assemble", "--request", "corpora/sample-request.json", *extra]
    recorded = CliRunner().invoke(main, [*args, "--json"])
    assert recorded.exit_code == 0, recorded.output
    (tmp_path / "r.json").write_text(recorded.stdout, encoding="utf-8")
    printed = CliRunner().invoke(main, [*args, "--messages"])
    replayed = CliRunner().invoke(main, ["replay", str(tmp_path / "r.json")])
    assert replayed.exit_code == 0, replayed.output
    assert replayed.stdout == printed.stdout and json.loads(printed.stdout)

"""Issue 14: a prompt of tens of thousands of macros must not pay for its provenance more than once.

``tavernbox assemble`` on a 320 KB preset prompt of ``{{if 1}}`` cost +100 MB, two thirds of it span
provenance: the dicts were built for the assembler's logical messages (never printed), again for
the sent messages, a cached copy kept of each, and all of it serialised for a surrogate check even
when only the messages are printed. These tests pin each of those down; the figure itself is
measured by ``benchmarks/bench_macros.py --hostile`` and bounded by ``test_macros_hostile_scale.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tavernbox.assembler import compose
from tavernbox.assembler.render import FrozenInfo
from tavernbox.cli.main import main
from tavernbox.sillytavern.assemble import assemble_request


def _preset(content: str) -> dict[str, Any]:
    return {"prompts": [{"identifier": "main", "name": "Main", "role": "system", "content": content, "system_prompt": True},
                        {"identifier": "chatHistory", "name": "Chat History", "marker": True, "system_prompt": True}],
            "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                                {"identifier": "chatHistory", "enabled": True}]}],
            "openai_max_context": 2_000_000, "max_context_unlocked": True}


def _request(content: str) -> dict[str, Any]:
    return {"preset": _preset(content), "chat": [{"role": "user", "content": "hi"}], "user": {"name": "Ash"}}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = compose.build_provenance

    def counted(source: Any) -> list[dict[str, Any]]:
        calls[0] += 1
        return real(source)

    monkeypatch.setattr(compose, "build_provenance", counted)
    return calls


def test_the_json_form_builds_the_provenance_of_the_sent_messages_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    assembled = assemble_request(_request("{{user}} and {{user}} " * 3))
    first = assembled.to_dict()
    second = assembled.to_dict()
    # one build (not one for the assembler's logical messages and one per call)
    assert calls[0] == 1
    assert first["provenance"] is second["provenance"] is assembled.provenance
    spans = first["provenance"][0]["spans"]
    assert sum(1 for s in spans if s.get("macro") == "user") == 6
    # the fields read from the assembler's result are the ones its own JSON form has
    inner = assembled.result.to_dict()
    for key in ("logical_messages", "nodes", "record"):
        assert first[key] == inner[key]


def test_a_message_of_tens_of_thousands_of_spans_is_not_copied_into_the_cache() -> None:
    info = FrozenInfo(kind="macro_output", macro="if")
    many = 20_000
    text = "x" * (2 * many)
    spans = [(2 * i, 2 * i + 1, info) for i in range(many)]
    built = compose.build_provenance([("m1", text, spans)])
    assert len(built[0]["spans"]) == many and built[0]["spans"][-1] == {"start": 2 * many - 2, "end": 2 * many - 1,
                                                                        "kind": "macro_output", "macro": "if"}
    assert text not in compose._WHOLE
    # a long message of an ordinary size is still remembered, and served equal but unshared
    few = 64
    small = "y" * (2 * few)
    small_spans = [(2 * i, 2 * i + 1, info) for i in range(few)]
    once = compose.build_provenance([("m1", small, small_spans)])
    assert small in compose._WHOLE
    again = compose.build_provenance([("m1", small, small_spans)])
    assert again == once and again[0]["spans"][0] is not once[0]["spans"][0]


def _files(tmp_path: Path, content: str) -> list[str]:
    (tmp_path / "chat.json").write_text(json.dumps([{"id": "m1", "role": "user", "content": "hi"}]))
    (tmp_path / "preset.json").write_text(json.dumps(_preset(content)))
    return ["assemble", "--strategy", "builtin-st", "--chat", str(tmp_path / "chat.json"),
            "--preset", str(tmp_path / "preset.json")]


def test_printing_the_messages_builds_no_provenance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    args = _files(tmp_path, "{{user}} é {{if 1}}")
    for extra in ([], ["--messages"]):
        done = CliRunner().invoke(main, [*args, *extra])
        assert done.exit_code == 0, done.output
    assert calls[0] == 0
    done = CliRunner().invoke(main, [*args, "--json"])
    assert done.exit_code == 0 and calls[0] == 1


def test_the_json_answer_is_written_in_pieces_as_one_indented_document(tmp_path: Path) -> None:
    # longer than one 64 KiB piece, with non-ASCII text kept as it is
    done = CliRunner().invoke(main, [*_files(tmp_path, "{{user}} é😀 " * 3000), "--json"])
    assert done.exit_code == 0
    answer = json.loads(done.stdout)
    assert len(done.stdout) > 1 << 17 and "é😀" in done.stdout
    assert done.stdout == json.dumps(answer, ensure_ascii=False, indent=2) + "\n"

"""``tavernbox assemble`` and ``tavernbox replay``: the CLI contract of issue 6."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _assembler_support import preset, rule
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.cli.main import main

RULES = [rule("native-system"), rule("custom", "m", text="MAIN", role="system"), rule("history"), rule("input"),
         rule("worldbook")]
MESSAGES = [{"id": "s", "role": "system", "content": "S"}, {"id": "u1", "role": "user", "content": "hello dragon"}]


def write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def run(*args: str) -> tuple[int, Any]:
    """The exit status and the JSON printed; a failure is checked in plain output, then read with ``--json``."""
    result = CliRunner().invoke(main, list(args))
    if result.exit_code == 1 and "--json" not in args:
        # plain output: nothing on stdout, ``error CODE message`` on stderr; --json: the error object on stdout
        assert result.stdout == "" and " error " in f" {result.stderr}", (result.stdout, result.stderr)
        result = CliRunner().invoke(main, [*args, "--json"])
        assert result.stderr == "" or "error" not in result.stderr, result.stderr
    try:
        return result.exit_code, json.loads(result.output)
    except json.JSONDecodeError:
        raise AssertionError(f"not JSON: {result.output!r} {result.exception!r}") from None


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "strategy": write(tmp_path, "strategy.json", preset(RULES)),
        "chat": write(tmp_path, "chat.json", {"messages": MESSAGES, "input_ids": ["u1"]}),
        "list": write(tmp_path, "list.json", MESSAGES),
        "dir": str(tmp_path),
    }


def test_assemble_prints_the_messages(files: dict[str, str]) -> None:
    code, out = run("assemble", "--strategy", files["strategy"], "--chat", files["chat"])
    assert code == 0
    assert [m["content"] for m in out] == ["S\n\nMAIN", "hello dragon"]


def test_a_plain_list_chat_takes_the_trailing_user_message_as_input(files: dict[str, str]) -> None:
    _, listed = run("assemble", "--strategy", files["strategy"], "--chat", files["list"], "--json")
    assert listed["record"]["request"]["input_ids"] == ["u1"]


def test_json_output_and_replay_round_trip(files: dict[str, str], tmp_path: Path) -> None:
    code, out = run("assemble", "--strategy", files["strategy"], "--chat", files["chat"], "--json")
    assert code == 0
    assert set(out) >= {"messages", "nodes", "diagnostics", "system_projection", "logical_extra_bytes", "extra_bytes",
                        "provenance", "record"}
    whole = write(tmp_path, "result.json", out)
    record_only = write(tmp_path, "record.json", out["record"])
    for path in (whole, record_only):
        code, replayed = run("replay", path)
        assert code == 0 and replayed == out["messages"]


def test_book_entries_are_activated_against_the_chat(files: dict[str, str], tmp_path: Path) -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["dragon"], "content": "Dragons breathe fire.", "position": 1},
                        "1": {"uid": 1, "key": ["unicorn"], "content": "Never shown.", "position": 1}}}
    code, out = run("assemble", "--strategy", files["strategy"], "--chat", files["chat"], "--book",
                    write(tmp_path, "book.json", book), "--system-update", "in-history")
    assert code == 0
    assert [m["content"] for m in out][-1].endswith("Dragons breathe fire.")
    assert not any("Never shown." in m["content"] for m in out)


def test_card_fields_are_available(files: dict[str, str], tmp_path: Path) -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Seraphina", "description": "A guardian."}}
    strategy = write(tmp_path, "s2.json", preset([*RULES[:2], rule("character"), *RULES[2:4]]))
    code, out = run("assemble", "--strategy", strategy, "--chat", files["chat"], "--card", write(tmp_path, "c.json", card))
    assert code == 0 and out[0]["content"] == "S\n\nMAIN\n\nA guardian."


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--strategy", "no-such-thing"], "ASSEMBLY_STRATEGY_UNKNOWN"),
        (["--preset", "no-such-file.json"], "INPUT_INVALID"),
        (["--templates", "no-such-templates.json"], "INPUT_INVALID"),
        (["--system-update", "in-history", "--max-profile-bytes", "10"], "ASSEMBLY_PROFILE_LIMIT"),
    ],
)
def test_failures_print_an_error_object_and_exit_1(files: dict[str, str], args: list[str], code: str) -> None:
    base = {"--strategy": files["strategy"], "--chat": files["chat"]}
    merged = dict(base)
    for flag, value in zip(args[::2], args[1::2], strict=True):
        merged[flag] = value
    exit_code, out = run("assemble", *[x for kv in merged.items() for x in kv])
    assert exit_code == 1 and out["error"]["code"] == code and out["error"]["message"]


def test_invalid_preset_and_chat_files_fail_cleanly(files: dict[str, str], tmp_path: Path) -> None:
    bad_preset = write(tmp_path, "bad.json", preset([rule("custom", "c", depth=-3)]))
    code, out = run("assemble", "--strategy", bad_preset, "--chat", files["chat"])
    assert code == 1 and out["error"] == {"code": "ASSEMBLY_PRESET_INVALID", "message": out["error"]["message"],
                                          "path": "$.rules[0].depth"}
    code, out = run("assemble", "--strategy", files["strategy"], "--chat", write(tmp_path, "chat2.json", "{oops"))
    assert code == 1 and out["error"]["code"] == "INPUT_INVALID" and out["error"]["line"] == 1
    code, out = run("assemble", "--strategy", files["strategy"], "--chat", str(tmp_path / "missing.json"))
    assert code == 1 and out["error"]["code"] == "INPUT_INVALID"


def test_replay_of_a_tampered_record_fails(files: dict[str, str], tmp_path: Path) -> None:
    _, out = run("assemble", "--strategy", files["strategy"], "--chat", files["chat"], "--json")
    out["record"]["request"]["native_messages"][1]["content"] = "edited"
    code, err = run("replay", write(tmp_path, "r.json", out))
    assert code == 1 and err["error"]["code"] == "ASSEMBLY_REPLAY_INVALID"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["id", "role", "content", "messages", "input_ids", "rules", "kind", "format", "version", "name", "depth",
         "tool_calls", "tool_call_id"]), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chat=json_values | st.lists(st.fixed_dictionaries({"id": st.sampled_from(["a", "b"]), "role": st.sampled_from(
    ["user", "assistant", "system", "tool"]), "content": json_values}), max_size=4),
       strategy=json_values | st.just(preset(RULES)))
def test_hostile_files_never_give_a_traceback(tmp_path: Path, chat: Any, strategy: Any) -> None:
    chat_file = write(tmp_path, "fuzz-chat.json", chat)
    strategy_file = write(tmp_path, "fuzz-strategy.json", strategy)
    result = CliRunner().invoke(main, ["assemble", "--strategy", strategy_file, "--chat", chat_file, "--json"])
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        error = json.loads(result.stdout)["error"]
        assert error["code"] != "INTERNAL_ERROR", error


def test_mvu_state_reaches_the_mvu_source(files: dict[str, str], tmp_path: Path) -> None:
    strategy = write(tmp_path, "mvu-strategy.json", preset([*RULES[:2], rule("tavern.mvu/state", "mvu"), *RULES[2:4]]))
    mvu = write(tmp_path, "vars.json", {"stat_data": {"hp": [100, "health"], "$meta": {"extensible": True}}})
    code, out = run("assemble", "--strategy", strategy, "--chat", files["chat"], "--mvu", mvu)
    assert code == 0 and out[0]["content"].startswith('S\n\nMAIN\n\n{"hp": [100, "health"], "$meta"')


def test_templates_render_for_the_given_session(files: dict[str, str], tmp_path: Path) -> None:
    templates = write(tmp_path, "t.json", {"templates": [
        {"id": "prompt-template:guide", "name": "Guide", "content": "<%= 6 * 7 %> <%= getvar('who') %>",
         "enabled": True, "session_ids": ["s1"], "variables": {"who": "<b>"}}]})
    strategy = write(tmp_path, "s3.json", preset([RULES[0], rule("pmp-dsh-tavern/prompt-template", "tpl"), *RULES[2:4]]))
    code, out = run("assemble", "--strategy", strategy, "--chat", files["chat"], "--templates", templates,
                    "--session", "s1")
    assert code == 0 and out[0]["content"] == "S\n\n42 &lt;b&gt;"
    code, out = run("assemble", "--strategy", strategy, "--chat", files["chat"], "--templates", templates, "--json")
    assert code == 0 and out["messages"][0]["content"] == "S"  # no session: no template output, one notice
    assert "TEMPLATE_SESSION_REQUIRED" in [d["code"] for d in out["diagnostics"]]
    not_templates = write(tmp_path, "chat-as-t.json", {"messages": []})
    code, out = run("assemble", "--strategy", strategy, "--chat", files["chat"], "--templates", not_templates)
    assert code == 1 and out["error"]["code"] == "TEMPLATE_RESOURCE_INVALID"
    bad = write(tmp_path, "bad-t.json", [{"id": "nope", "name": "x", "content": ""}])
    code, out = run("assemble", "--strategy", strategy, "--chat", files["chat"], "--templates", bad, "--session", "s1")
    assert code == 1 and out["error"]["code"] == "TEMPLATE_RESOURCE_INVALID"

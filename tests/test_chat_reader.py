"""One chat reader for every command (``tavernbox.assets.chats``), the seeds' chat form in the default
strategy, the export's names, and world info cut by its budget said on stderr (issues 24 and 28).

Every chat here is the bundled export (``corpora/sample-chat.jsonl``) written in another encoding or form.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tavernbox.assets.chats import read_chat_bytes, read_chat_file
from tavernbox.cli.main import main
from tavernbox.errors import TemplateError

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "corpora"
SHARED = ROOT.parent / "shared" / "corpora"


def export_text() -> str:
    return (CORPORA / "sample-chat.jsonl").read_text(encoding="utf-8")


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def assemble(*args: str) -> Any:
    return cli("assemble", "--preset", str(CORPORA / "sample-preset.json"), *args)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le-bom", "utf-16-be-bom"])
def test_every_encoding_of_the_export_reads_the_same_chat(tmp_path: Path, encoding: str) -> None:
    text = export_text()
    data = {"utf-16-le-bom": b"\xff\xfe" + text.encode("utf-16-le"),
            "utf-16-be-bom": b"\xfe\xff" + text.encode("utf-16-be")}.get(encoding) or text.encode(encoding)
    path = tmp_path / "chat.jsonl"
    path.write_bytes(data)
    chat = read_chat_file(path)
    assert chat.messages == read_chat_bytes(text.encode("utf-8")).messages
    assert (chat.user_name, chat.character_name) == ("Ash", "Mira")
    assert not [d for d in chat.diagnostics if d.severity != "info"]


def test_windows_1252_is_read_with_its_warning_and_anything_else_is_a_coded_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_bytes(json.dumps({"messages": [{"role": "user", "content": "café"}]}, ensure_ascii=False)
                     .encode("cp1252"))
    chat = read_chat_file(path)
    assert chat.messages[0].content == "café"
    assert [d.code for d in chat.diagnostics] == ["ASSET_ENCODING"]
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"messages": []}\x81\x8d')  # undefined in Windows-1252, not UTF-8
    with pytest.raises(TemplateError) as err:
        read_chat_file(bad, where="$.chat")
    assert err.value.code == "ASSET_ENCODING" and err.value.path == "$.chat" and "bad.json" in err.value.message
    broken = tmp_path / "broken.json"
    broken.write_bytes(b"\xff\xfe\x00\xd8")  # a UTF-16 mark, then half a surrogate pair
    with pytest.raises(TemplateError) as err:
        read_chat_file(broken)
    assert err.value.code == "ASSET_ENCODING"


def test_assemble_reads_a_utf16_chat_and_says_a_windows_1252_one(tmp_path: Path) -> None:
    utf16 = tmp_path / "chat.jsonl"
    utf16.write_bytes(export_text().encode("utf-16"))
    plain = assemble("--chat", str(CORPORA / "sample-chat.jsonl"), "--messages")
    assert plain.exit_code == 0
    assert assemble("--chat", str(utf16), "--messages").output == plain.output
    legacy = tmp_path / "legacy.json"
    legacy.write_bytes(json.dumps({"messages": [{"role": "user", "content": "Ça va ?"}]}, ensure_ascii=False)
                       .encode("cp1252"))
    result = assemble("--chat", str(legacy))
    assert result.exit_code == 0 and "Ça va ?" in result.stdout
    assert "$.chat: warning ASSET_ENCODING" in result.stderr


def test_the_exports_names_stand_when_none_is_given() -> None:
    chat = str(CORPORA / "sample-chat.jsonl")
    first = json.loads(assemble("--chat", chat, "--messages").stdout)[0]["content"]
    assert first.startswith("Write Mira's next reply in this roleplay with Ash.")
    named = json.loads(assemble("--chat", chat, "--user", "Kit", "--card", str(CORPORA / "sample-card.json"),
                                "--messages").stdout)[0]["content"]
    assert named.startswith("Write Mira's next reply in this roleplay with Kit.")  # the flag and the card win


def test_activate_reads_the_export_utf16_and_the_json_form(tmp_path: Path) -> None:
    book = str(CORPORA / "sample-book.json")
    export = cli("activate", "--chat", str(CORPORA / "sample-chat.jsonl"), "--book", book, "--json")
    assert export.exit_code == 0, export.output
    activated = json.loads(export.stdout)["activated"]
    assert {"book": "Gull Rock", "uid": 0} in activated  # "light", said in the export's last message
    utf16 = tmp_path / "chat.jsonl"
    utf16.write_bytes(export_text().encode("utf-16"))
    assert cli("activate", "--chat", str(utf16), "--book", book, "--json").stdout == export.stdout
    documented = tmp_path / "chat.json"
    documented.write_text(json.dumps({"messages": [{"role": "user", "content": "the storm"}]}), encoding="utf-8")
    result = json.loads(cli("activate", "--chat", str(documented), "--book", book, "--json").stdout)
    assert {"book": "Gull Rock", "uid": 2} in result["activated"]
    strings = tmp_path / "strings.json"
    strings.write_text('["the lighthouse"]', encoding="utf-8")  # the scan's own list form still reads
    result = json.loads(cli("activate", "--chat", str(strings), "--book", book, "--json").stdout)
    assert {"book": "Gull Rock", "uid": 0} in result["activated"]


def test_activate_refuses_undecodable_bytes_with_a_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe\x00\xd8")
    result = cli("activate", "--chat", str(bad), "--book", str(CORPORA / "sample-book.json"))
    assert result.exit_code == 1
    assert "ASSET_ENCODING" in result.output and "INTERNAL_ERROR" not in result.output
    assert "Traceback" not in result.output


SEEDS = {"messages": [{"id": "m1", "role": "assistant", "content": "Hello."},
                      {"id": "m2", "role": "user", "content": "Hi."},
                      {"id": "m3", "role": "user", "content": "Anyone there?"}], "input_ids": ["m3", "m2"]}


def test_the_seeds_chat_form_is_read_by_the_default_strategy(tmp_path: Path) -> None:
    path = tmp_path / "seeds.json"
    path.write_text(json.dumps(SEEDS), encoding="utf-8")
    without = tmp_path / "plain.json"
    without.write_text(json.dumps({"messages": SEEDS["messages"]}), encoding="utf-8")
    sent = assemble("--chat", str(path), "--messages")
    assert sent.exit_code == 0, sent.output
    assert sent.stdout == assemble("--chat", str(without), "--messages").stdout  # sent messages, as any other
    preview = json.loads(assemble("--chat", str(path), "--messages", "--preview").stdout)
    assert "Hi." not in [m["content"] for m in preview]  # a dry run: what was just sent is not in the chat yet
    assert "Anyone there?" not in [m["content"] for m in preview]


@pytest.mark.parametrize(("ids", "path", "words"), [
    (["m1"], "$.input_ids[0]", "not one of the trailing messages"),
    (["m3", "m3"], "$.input_ids[1]", "named twice"),
    (["m2"], "$.input_ids[0]", "not one of the trailing messages"),
    (["m3", "m1"], "$.input_ids[1]", "not one of the trailing messages"),
    ([7], "$.input_ids[0]", "must be a string"),
    ("m3", "$.input_ids", "list of message ids"),
])
def test_an_input_id_that_is_not_a_trailing_user_message_is_refused(tmp_path: Path, ids: Any, path: str,
                                                                     words: str) -> None:
    chat = tmp_path / "seeds.json"
    chat.write_text(json.dumps({**SEEDS, "input_ids": ids}), encoding="utf-8")
    result = assemble("--chat", str(chat), "--json")  # the JSON error object on stdout
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "REQUEST_INVALID" and error["path"] == path and words in error["message"]


def test_an_input_id_naming_the_assistant_is_refused(tmp_path: Path) -> None:
    chat = tmp_path / "seeds.json"
    chat.write_text(json.dumps({"messages": SEEDS["messages"][:1], "input_ids": ["m1"]}), encoding="utf-8")
    error = json.loads(assemble("--chat", str(chat), "--json").stdout)["error"]
    assert error["path"] == "$.input_ids[0]" and "assistant message" in error["message"]


def _overflowing_book(tmp_path: Path) -> str:
    entries = {str(i): {"uid": i, "key": [], "content": f"Lore {i}: " + "word " * 400, "constant": True,
                        "order": 100 - i, "position": 0} for i in range(4)}
    path = tmp_path / "book.json"
    path.write_text(json.dumps({"name": "Big", "entries": entries}), encoding="utf-8")
    return str(path)


def test_world_info_cut_by_its_budget_is_one_line_on_stderr_and_kept_in_json(tmp_path: Path) -> None:
    args = ("--chat", str(CORPORA / "sample-chat.jsonl"), "--book", _overflowing_book(tmp_path),
            "--max-context", "2000", "--max-tokens", "100")
    plain = assemble(*args)
    assert plain.exit_code == 0, plain.output
    lines = [line for line in plain.stderr.splitlines() if "ST_WORLD_INFO_BUDGET" in line]
    assert len(lines) == 1
    assert "3 triggered entries" in lines[0] and "world-info budget is 475 tokens" in lines[0]
    warning = next(w for w in json.loads(assemble(*args, "--json").stdout)["warnings"]
                   if w["code"] == "ST_WORLD_INFO_BUDGET")
    assert warning["data"]["budget"] == 475 and len(warning["data"]["entries"]) == 3
    assert warning["data"]["tokens"] > 3 * 400
    roomy = assemble("--chat", str(CORPORA / "sample-chat.jsonl"), "--book", _overflowing_book(tmp_path))
    assert "ST_WORLD_INFO_BUDGET" not in roomy.stderr  # nothing cut, nothing said


def test_zhanguo_with_the_default_preset_says_its_lore_was_cut() -> None:
    card, preset = SHARED / "cards" / "zhanguo.v3.json", SHARED / "presets" / "st-default-openai.json"
    if not card.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("../shared/corpora is missing under CI")
        pytest.skip("the corpora live in ../shared beside the repository")
    result = cli("assemble", "--preset", str(preset), "--card", str(card), "--chat", str(CORPORA / "sample-chat.jsonl"))
    assert result.exit_code == 0
    lines = [line for line in result.stderr.splitlines() if "ST_WORLD_INFO_BUDGET" in line]
    assert len(lines) == 1 and "15 triggered entries" in lines[0], result.stderr


def test_the_services_activate_reads_the_chat_readers_json_form() -> None:
    from tavernbox.service.engines import _activate

    book = json.loads((CORPORA / "sample-book.json").read_text(encoding="utf-8"))
    documented = _activate({"books": [book], "chat": {"messages": [{"role": "user", "content": "the storm"}]}})
    assert {"book": "Gull Rock", "uid": 2} in documented["activated"]
    as_list = _activate({"books": [book], "chat": [{"role": "user", "content": "the storm"}]})
    assert documented["activated"] == as_list["activated"]
    bad = _activate({"books": [book], "chat": {"messages": [{"role": "narrator", "content": "x"}]}})
    assert bad["error"]["code"] == "REQUEST_INVALID" and bad["error"]["path"] == "$.chat.messages[0].role"


def test_a_jsonl_chat_of_documented_messages_is_read_whole() -> None:
    """One ``{"role", "content"}`` message a line is the documented form, line by line: every message is read
    (the first is not taken for the export's metadata, the others not for empty stored messages)."""
    lines = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there", "name": "Mira"}]
    chat = read_chat_bytes("\n".join(json.dumps(m) for m in lines).encode(), hint="chat.jsonl")
    assert [(m.role, m.content, m.name) for m in chat.messages] == [("user", "hello", None),
                                                                    ("assistant", "hi there", "Mira")]
    with_meta = [{"user_name": "Ash"}, *lines]
    chat = read_chat_bytes("\n".join(json.dumps(m) for m in with_meta).encode(), hint="chat.jsonl")
    assert chat.user_name == "Ash" and [m.content for m in chat.messages] == ["hello", "hi there"]


@pytest.mark.parametrize(("lines", "line", "says"), [
    ([{"role": "user", "content": "hello"}, {"name": "Mira", "is_user": False, "mes": "x"}], 2, "not both"),
    ([{"role": "user", "content": "hello"}, {"role": "user", "content": 5}], 2, "content must be a string"),
])
def test_a_jsonl_chat_that_mixes_forms_or_holds_a_bad_message_names_its_line(lines: list[Any], line: int,
                                                                              says: str) -> None:
    with pytest.raises(TemplateError) as caught:
        read_chat_bytes("\n".join(json.dumps(m) for m in lines).encode(), hint="chat.jsonl")
    assert caught.value.code == "REQUEST_INVALID" and caught.value.line == line and says in caught.value.message

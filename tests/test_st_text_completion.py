"""The text-completion back end on the shared front, against SillyTavern 1.18.0's recordings.

Each recording's scenario becomes a request file (the card, chat, persona, Author's Note, world
book, generation type and the templates SillyTavern had applied, as ``text_completion``); the
prompt and the stop strings must equal what SillyTavern sent, byte for byte.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from tavernbox.errors import TemplateError
from tavernbox.sillytavern.text_completion import assemble_text_completion

GOLDEN = Path(__file__).parent / "golden" / "st_text_completion" / "requests.jsonl"
PERSONA_POSITIONS = {0: "in_prompt", 2: "top_an", 3: "bottom_an", 4: "at_depth", 9: "none"}
ROLES = ("system", "user", "assistant")
#: these budget cases count with SillyTavern's llama3 tokenizer file, which is not shipped (Meta's
#: licence): they are compared where a SillyTavern install's src/tokenizers is at hand
#: (``TAVERNBOX_ST_TOKENIZERS``, else the st-oracle install); the ``budget-estimate*`` ones count as
#: SillyTavern does without a tokenizer and are always compared
LLAMA3 = {"budget-trims-history", "budget-trims-history-off"}
ST_TOKENIZERS = Path(os.environ.get("TAVERNBOX_ST_TOKENIZERS")
                     or Path.home() / ".cache" / "st-oracle" / "st" / "src" / "tokenizers")


@lru_cache(maxsize=1)
def _records() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines())


def request_for(record: dict[str, Any]) -> dict[str, Any]:
    """The request file a user would write for the recording's scenario."""
    sc, snap = record["scenario"], record["snapshot"]
    pu = snap["power_user"]
    persona: dict[str, Any] = {"description": sc.get("persona_description", ""),
                               "position": PERSONA_POSITIONS[pu["persona_description_position"]],
                               "depth": pu["persona_description_depth"],
                               "role": ROLES[pu["persona_description_role"]]}
    request: dict[str, Any] = {
        "card": sc["card"],
        "chat": {"messages": [{k: v for k, v in m.items() if k in ("role", "content", "name", "force_avatar")}
                              for m in sc["chat"]]},
        "user": {"name": snap["name1"], "persona": persona},
        "generation": {"type": sc.get("generation_type") or "normal"},
        "text_completion": {
            "instruct": snap["instruct"] if snap["instruct"]["enabled"] else None,
            "context": snap["context"],
            "sysprompt": snap["sysprompt"] if snap["sysprompt"]["enabled"] else None,
            "settings": {k: pu[k] for k in ("collapse_newlines", "always_force_name2", "single_line",
                                            "custom_stopping_strings", "custom_stopping_strings_macro",
                                            "prefer_character_prompt", "prefer_character_jailbreak")},
        },
    }
    if sc.get("quiet_prompt"):
        request["generation"]["quiet_prompt"] = sc["quiet_prompt"]
    if sc.get("max_context"):
        request["budget"] = {"max_context": sc["max_context"], "max_tokens": sc["max_tokens"],
                             "tokenizer": {0: "estimate", 12: "llama3"}.get(pu["tokenizer"], "o200k")}
    if sc.get("author_note"):
        request["author_note"] = sc["author_note"]
    if sc.get("book"):
        request["books"] = [sc["book"]]
    return request


def test_every_recording_is_sillytaverns_prompt_and_stop_list() -> None:
    failures, checked = [], 0
    for record in _records():
        if record["id"] in LLAMA3:
            continue
        result = assemble_text_completion(request_for(record))
        checked += 1
        if result.prompt != record["prompt"]:
            ours, theirs = result.prompt, record["prompt"]
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            failures.append(f"{record['id']}: prompt differs at {at}: ours {ours[max(0, at - 50):at + 50]!r} "
                            f"theirs {theirs[max(0, at - 50):at + 50]!r}")
        elif result.stop != record["stop"]:
            failures.append(f"{record['id']}: stop {result.stop!r} != {record['stop']!r}")
    assert not failures, f"{len(failures)} of {checked} differ:\n" + "\n".join(failures[:6])
    assert checked >= 100


def test_text_completion_needs_no_preset_but_a_context_template() -> None:
    record = _records()[0]
    request = request_for(record)
    assert "preset" not in request
    del request["text_completion"]["context"]
    with pytest.raises(TemplateError) as info:
        assemble_text_completion(request)
    assert (info.value.code, info.value.path) == ("REQUEST_INVALID", "$.text_completion.context")


def test_a_bad_template_field_names_its_path() -> None:
    request = request_for(_records()[0])
    request["text_completion"]["instruct"] = {**request["text_completion"]["instruct"], "wrap": "yes"}
    with pytest.raises(TemplateError) as info:
        assemble_text_completion(request)
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.text_completion.instruct.wrap")


def _templates_from_recordings(folder: Path) -> list[str]:
    """Every shipped instruct template with its context template, as SillyTavern applied them in
    the recordings, written as a template folder (instruct/, context/, sysprompt/)."""
    names = []
    for kind in ("instruct", "context", "sysprompt"):
        (folder / kind).mkdir(parents=True, exist_ok=True)
    for record in _records():
        if not record["id"].startswith("instruct-") or record["id"].startswith("instruct-off"):
            continue
        snap = record["snapshot"]
        name = record["id"][len("instruct-"):]
        (folder / "instruct" / f"{name}.json").write_text(json.dumps(snap["instruct"]), encoding="utf-8")
        (folder / "context" / f"{name}.json").write_text(json.dumps(snap["context"]), encoding="utf-8")
        (folder / "sysprompt" / "Neutral - Chat.json").write_text(json.dumps(snap["sysprompt"]), encoding="utf-8")
        names.append(name)
    return names


def test_every_corpus_card_assembles_with_every_instruct_template(tmp_path: Path) -> None:
    corpora = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
    if not corpora.is_dir():
        pytest.skip("the shared corpora are not beside the repository")
    names = _templates_from_recordings(tmp_path)
    assert len(names) >= 38
    cards = sorted(p for p in (corpora / "cards").iterdir() if p.suffix in (".json", ".png"))
    chat = str(Path(__file__).resolve().parents[1] / "corpora" / "sample-chat.jsonl")
    for card in cards:
        for name in names:
            result = assemble_text_completion({"card": str(card), "chat": chat, "text_completion": {
                "instruct": name, "context": name, "sysprompt": "Neutral - Chat", "templates": str(tmp_path)}})
            assert result.prompt.strip() and result.stop, (card.name, name)


def test_the_cli_prints_the_prompt_or_the_json(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tavernbox.cli.main import main as cli

    names = _templates_from_recordings(tmp_path)
    assert "ChatML" in names
    record = next(r for r in _records() if r["id"] == "instruct-ChatML")
    request = request_for(record)
    del request["text_completion"]
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    args = ["assemble", "--request", str(path), "--instruct", "ChatML", "--context", "ChatML",
            "--sysprompt", "Neutral - Chat", "--st-templates", str(tmp_path)]
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 0, plain.output
    assert plain.output == record["prompt"] + ("" if record["prompt"].endswith("\n") else "\n")
    answer = CliRunner().invoke(cli, [*args, "--json"])
    assert answer.exit_code == 0, answer.output
    data = json.loads(answer.output)
    assert (data["prompt"], data["stop"]) == (record["prompt"], record["stop"])
    missing = CliRunner().invoke(cli, [*args[:-2], "--st-templates", str(tmp_path / "nowhere"), "--json"])
    assert missing.exit_code == 1 and json.loads(missing.output)["error"]["code"] == "INPUT_INVALID"


def test_the_chat_completion_entry_refuses_a_text_completion_request() -> None:
    from tavernbox.sillytavern.assemble import assemble_request

    with pytest.raises(TemplateError) as info:
        assemble_request(request_for(_records()[0]))
    assert (info.value.code, info.value.path) == ("REQUEST_INVALID", "$.text_completion")


def test_every_part_of_the_prompt_names_its_source() -> None:
    record = next(r for r in _records() if r["id"] == "world-info-all")
    result = assemble_text_completion(request_for(record))
    assert "".join(result.prompt[s.start:s.end] for s in result.spans) == result.prompt
    assert all(a.end == b.start for a, b in zip(result.spans, result.spans[1:]))
    by_source = {s.source: result.prompt[s.start:s.end] for s in result.spans}
    assert "[Lore before: Grey Point is a rocky cape.]" in by_source["story_string"]
    assert by_source["chat[1]"].startswith("<|im_start|>user\nThank you.")
    assert "[Author's note: keep it tense.]" in by_source["in-chat:2_floating_prompt+customDepthWI_2_0"]
    assert by_source["prompt_line"] == "\n<|im_start|>assistant\n"
    provenance = result.to_dict()["provenance"]
    assert provenance[-1]["end"] == len(result.prompt.encode("utf-16-le")) // 2


def test_a_master_export_gives_the_three_templates(tmp_path: Path) -> None:
    record = next(r for r in _records() if r["id"] == "instruct-Llama 3 Instruct")
    request = request_for(record)
    snap = record["snapshot"]
    export = {"instruct": snap["instruct"], "context": snap["context"], "sysprompt": snap["sysprompt"],
              "preset": {"temp": 0.7}, "reasoning": {}}
    path = tmp_path / "master-export.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    request["text_completion"] = {"export": str(path), "settings": request["text_completion"]["settings"]}
    result = assemble_text_completion(request)
    assert (result.prompt, result.stop) == (record["prompt"], record["stop"])


def test_a_story_string_error_names_the_template_and_its_line() -> None:
    request = request_for(next(r for r in _records() if r["id"] == "instruct-ChatML"))
    request["text_completion"]["context"] = {**request["text_completion"]["context"],
                                             "story_string": "{{#if description}}\n{{description}\n{{/if}}"}
    with pytest.raises(TemplateError) as info:
        assemble_text_completion(request)
    error = info.value
    assert (error.code, error.path, error.line) == ("HANDLEBARS_SYNTAX", "$.text_completion.context.story_string", 2)


def test_the_story_string_can_place_the_examples_itself() -> None:
    request = request_for(next(r for r in _records() if r["id"] == "instruct-off-Default"))
    context = request["text_completion"]["context"]
    request["text_completion"]["context"] = {**context, "story_string": "{{mesExamplesRaw}}|{{description}}"}
    prompt = assemble_text_completion(request).prompt
    assert prompt.startswith("***\nAsh: Do you ever get lonely?\nMira: *She smiles.*")
    assert "|Mira is the keeper" in prompt


def test_the_llama3_budget_recordings_match_where_the_tokenizer_file_is(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [r for r in _records() if r["id"] in LLAMA3]
    assert len(records) == 2
    if not (ST_TOKENIZERS / "llama3.json").is_file():
        # without the file, llama3 says where to get it (never a silent fallback)
        monkeypatch.delenv("TAVERNBOX_ST_TOKENIZERS", raising=False)
        from tavernbox.tokenizers import hf_bpe

        with pytest.raises(TemplateError, match="TAVERNBOX_ST_TOKENIZERS") as info:
            hf_bpe.HfByteLevelBpe("llama3.json").count("x")
        assert info.value.code == "INPUT_INVALID"
        return
    monkeypatch.setenv("TAVERNBOX_ST_TOKENIZERS", str(ST_TOKENIZERS))
    for record in records:
        result = assemble_text_completion(request_for(record))
        assert (result.prompt, result.stop) == (record["prompt"], record["stop"]), record["id"]


def _quiet(record_id: str, quiet_prompt: str = "Summarise {{char}}'s mood.") -> tuple[dict[str, Any], Any]:
    record = next(r for r in _records() if r["id"] == record_id)
    request = request_for(record)
    request["generation"] = {"type": "quiet", "quiet_prompt": quiet_prompt}
    return record, assemble_text_completion(request)


def test_a_quiet_prompt_in_instruct_mode_is_a_system_message_before_the_system_prompt_line() -> None:
    # Generate('quiet'): the newest message keeps its line break (wrap is skipped for quiet), the
    # quiet prompt (macros substituted) follows as a narrator's message, then the prompt line is
    # the quiet one (last_system_sequence, else the output sequence), without names
    record, result = _quiet("instruct-ChatML")
    line = "<|im_start|>assistant\n"
    assert record["prompt"].endswith("<|im_end|>\n" + line)
    assert result.prompt == (record["prompt"].removesuffix(line)
                             + "<|im_start|>system\nSummarise Mira's mood.<|im_end|>\n" + line)
    assert result.stop == record["stop"]
    by_source = {s.source: result.prompt[s.start:s.end] for s in result.spans}
    assert by_source["quiet_prompt"] == "<|im_start|>system\nSummarise Mira's mood.<|im_end|>\n"
    assert by_source["prompt_line"] == line


def test_a_quiet_prompt_uses_the_last_system_sequence_when_the_template_has_one() -> None:
    record = next(r for r in _records() if r["id"] == "instruct-ChatML")
    request = request_for(record)
    request["generation"] = {"type": "quiet", "quiet_prompt": "Describe the room."}
    request["text_completion"]["instruct"] = {**request["text_completion"]["instruct"],
                                              "last_system_sequence": "<|im_start|>narrator",
                                              "names_behavior": "always"}
    prompt = assemble_text_completion(request).prompt
    # names_behavior "always" names no one on a quiet prompt line
    assert prompt.endswith("Describe the room.<|im_end|>\n<|im_start|>narrator\n")


def test_a_quiet_prompt_without_instruct_mode_ends_the_prompt_on_its_own_line() -> None:
    # instruct off: the quiet prompt goes on a line of its own and nothing follows (no "Char:")
    record, result = _quiet("instruct-off-Default")
    assert record["prompt"].endswith("How long have you lived here?\nMira:")
    assert result.prompt == record["prompt"].removesuffix("\nMira:") + "\nSummarise Mira's mood."
    assert result.stop == record["stop"]


def test_a_quiet_generation_with_no_prompt_is_a_normal_prompt_line_keeping_the_line_break() -> None:
    # an empty quiet prompt adds nothing, but the newest message still keeps its line break, so
    # the ordinary prompt line (with its own leading separator) follows a blank line
    record, result = _quiet("instruct-ChatML", "")
    line = "\n<|im_start|>assistant\n"
    assert result.prompt == record["prompt"].removesuffix(line) + "\n" + line


def test_the_quiet_prompt_is_counted_in_the_budget() -> None:
    record = next(r for r in _records() if r["id"] == "instruct-ChatML")
    request = request_for(record)
    request["budget"] = {"max_context": 600, "max_tokens": 100, "tokenizer": "estimate"}
    request["generation"] = {"type": "quiet", "quiet_prompt": "Summarise."}
    short = assemble_text_completion(request).prompt
    request["generation"]["quiet_prompt"] = "Summarise. " + "Be thorough. " * 60
    long = assemble_text_completion(request).prompt
    assert "Be thorough." in long
    # the longer quiet prompt leaves less room: the example dialogues (added last) no longer fit
    assert "Do you ever get lonely?" in short
    assert "Do you ever get lonely?" not in long
    assert "Thank you. The storm is getting worse." in long


def test_a_group_chat_stops_at_the_other_members_names() -> None:
    # getStoppingStrings: in a group, "\nName:" for each member but the one replying, in the group's
    # order, after the user's and the character's lines and before the instruct sequences
    record = next(r for r in _records() if r["id"] == "instruct-ChatML")
    request = request_for(record)
    request["group"] = {"members": ["Ghost", "Mira", "Bard", "Ash"]}
    result = assemble_text_completion(request)
    assert record["stop"][0] == "\nAsh:"
    assert result.stop == ["\nAsh:", "\nGhost:", "\nBard:"] + record["stop"][1:]
    request["generation"] = {"type": "impersonate"}
    assert assemble_text_completion(request).stop[:4] == ["\nMira:", "\nAsh:", "\nGhost:", "\nBard:"]


def test_group_member_stop_strings_follow_names_as_stop_strings() -> None:
    record = next(r for r in _records() if r["id"] == "instruct-off-Default")
    request = request_for(record)
    request["group"] = {"members": ["Mira", "Ghost"]}
    assert assemble_text_completion(request).stop == ["\nAsh:", "\nGhost:"]
    request["text_completion"]["context"] = {**request["text_completion"]["context"], "names_as_stop_strings": False}
    assert "\nGhost:" not in assemble_text_completion(request).stop

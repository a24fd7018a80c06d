"""Sources of the template API: resources, metadata, MVU, world books from a scan, presets, cards, CLI, corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from bridge_support import BOOK, CARD, PRESET
from tavernbox.bridge import (
    ActivationRecord,
    Management,
    MvuSource,
    PromptTemplateResource,
    TemplateSources,
    UsageDecision,
    WorldBookSource,
    expand_mvu_macros,
    expand_prompt_template,
    inspect_template_metadata,
    render_with_dependencies,
    render_with_sources,
    sources_from_inputs,
)
from tavernbox.cli.main import main
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS = SHARED / "corpora"

# --- prompt-template resources -----------------------------------------------------------------

SCENE = {"id": "prompt-template:scene", "name": "Scene prompt",
         "content": "Place: <%- getvar('scene.location', { defaults: 'unset' }) %>",
         "enabled": True, "sessionIds": ["example-session"], "variables": {"scene": {"location": "inn"}}}


def test_resource_expands_for_its_session_and_keeps_the_original() -> None:
    resource = PromptTemplateResource.from_dict(SCENE)
    out = expand_prompt_template(resource, session_id="example-session")
    assert out.text == "Place: inn" and out.original == SCENE["content"]
    assert resource.content == SCENE["content"]  # never overwritten
    assert [r.kind for r in out.reads] == ["variables"]
    assert expand_prompt_template(resource, session_id="other").text is None
    star = PromptTemplateResource.from_dict({**SCENE, "sessionIds": ["*"]})
    assert expand_prompt_template(star, session_id="anyone").text == "Place: inn"


def test_no_session_means_no_output() -> None:
    out = expand_prompt_template(PromptTemplateResource.from_dict(SCENE), session_id=None)
    assert out.text is None and [d.code for d in out.diagnostics] == ["TEMPLATE_SESSION_REQUIRED"]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"id": "scene"}, "$.id"),
        ({"id": "prompt-template:" + "x" * 101}, "$.id"),
        ({"id": "prompt-template:a b"}, "$.id"),
        ({"name": "n" * 201}, "$.name"),
        ({"name": ""}, "$.name"),
        ({"content": "x" * 131073}, "$.content"),
        ({"sessionIds": "s"}, "$.session_ids"),
        ({"sessionIds": [""]}, "$.session_ids"),
        ({"enabled": "yes"}, "$.enabled"),
        ({"variableResourceId": "mvu:x"}, "$.variable_resource_id"),  # both variables and a resource
        ({"extra": 1}, "$.extra"),
    ],
)
def test_resource_validation(change: dict, path: str) -> None:
    with pytest.raises(TemplateError) as info:
        PromptTemplateResource.from_dict({**SCENE, **change})
    assert info.value.code == "TEMPLATE_RESOURCE_INVALID" and info.value.path == path


def test_copies_start_disabled_and_unsupported_metadata_cannot_be_enabled() -> None:
    resource = PromptTemplateResource.from_dict(SCENE)
    copy = resource.copy("prompt-template:scene-2")
    assert copy.enabled is False and copy.content == resource.content
    assert expand_prompt_template(copy, session_id="example-session").text is None
    with pytest.raises(TemplateError) as info:
        PromptTemplateResource.from_dict({**SCENE, "content": "@@render_after\nx"})
    assert info.value.code == "UNSUPPORTED_EVENT"
    with pytest.raises(TemplateError) as info:
        PromptTemplateResource.from_dict({**SCENE, "name": "[PRELOAD] boot"})
    assert info.value.code == "UNSUPPORTED_EVENT"
    disabled = PromptTemplateResource.from_dict({**SCENE, "name": "[PRELOAD] boot", "enabled": False})
    assert disabled.enabled is False


def test_resource_policy_skip_and_lease() -> None:
    management = Management()
    management.add_listener("prompt-template:scene", lambda r: UsageDecision(False))
    out = expand_prompt_template(PromptTemplateResource.from_dict(SCENE), session_id="example-session",
                                 management=management)
    assert out.text is None and [d.code for d in out.diagnostics] == ["TEMPLATE_POLICY_SKIPPED"]
    state = {"ok": True}
    management = Management()
    management.register_manager("prompt-template:scene",
                                lambda r: UsageDecision(True, "c1", lambda: state["ok"]))
    out = expand_prompt_template(PromptTemplateResource.from_dict(SCENE), session_id="example-session",
                                 management=management)
    assert out.text == "Place: inn"
    state["ok"] = False
    with pytest.raises(TemplateError) as info:
        out.check_leases()
    assert info.value.code == "SOURCE_POLICY_CHANGED"


def test_resource_mvu_is_lazy_and_missing_mvu_fails_only_when_read() -> None:
    mvu = MvuSource({"stat_data": {"hp": [5, "hp"]}}, resource_id="mvu:hero")
    spec = {**SCENE, "variables": None, "variableResourceId": "mvu:hero"}
    plain = PromptTemplateResource.from_dict({**spec, "content": "no reads"})
    assert expand_prompt_template(plain, session_id="example-session", mvu={"mvu:hero": mvu}).text == "no reads"
    assert mvu.reads == 0
    reading = PromptTemplateResource.from_dict({**spec, "content": "<%- getvar('stat_data.hp[0]') %>"})
    out = expand_prompt_template(reading, session_id="example-session", mvu={"mvu:hero": mvu})
    assert out.text == "5" and mvu.reads == 1 and out.reads[0].id == "mvu:hero"
    assert expand_prompt_template(plain, session_id="example-session").text == "no reads"
    with pytest.raises(TemplateError) as info:
        expand_prompt_template(reading, session_id="example-session")
    assert info.value.code == "TEMPLATE_DEPENDENCY_MISSING"


# --- metadata ------------------------------------------------------------------------------------


def test_metadata_title_tags() -> None:
    for tag, placement in (("[GENERATE:BEFORE]", "before"), ("[generate:after]", "after")):
        meta = inspect_template_metadata(f"{tag} intro", "text")
        assert meta.events == ("before_model_request",) and meta.placement == placement and meta.supported
    for name in ("[PRELOAD]", "[RENDER:BEFORE] x", "[RENDER:AFTER]", "[InitialVariables]", "[GENERATE:2:BEFORE]",
                 "[GENERATE:REGEX:hi]", "@INJECT pos=1,role=user"):
        meta = inspect_template_metadata(name, "text")
        assert not meta.supported, name
        assert meta.diagnostics[0].code == "TEMPLATE_LIFECYCLE_UNSUPPORTED"
    assert inspect_template_metadata("plain", "text").events == ()


def test_metadata_decorators() -> None:
    content = "@@generate_before\n@@if variables.x > 1\n@@mystery arg\nbody\n@@activate later"
    meta = inspect_template_metadata("t", content)
    assert [(d.name, d.argument, d.official) for d in meta.decorators] == [
        ("generate_before", "", True), ("if", "variables.x > 1", True), ("mystery", "arg", False)]
    assert not meta.supported
    messages = [d.message for d in meta.diagnostics]
    assert "recognised but not executed" in messages[0] and messages[2] == "unknown decorator @@mystery"
    assert meta.to_dict(content)["diagnostics"][1]["line"] == 2
    literal = inspect_template_metadata("t", "@@@not a decorator\n@@activate")
    assert literal.decorators == () and literal.supported
    assert inspect_template_metadata("t", "text\n@@activate").supported  # only a leading run counts


# --- MVU ---------------------------------------------------------------------------------------


@pytest.mark.needs_shared("corpora/mvu")
def test_mvu_real_initvar_and_getvar_pairs() -> None:
    mvu = MvuSource.load(CORPUS / "mvu" / "mvu-example-liuli-initvar1.yaml")
    stat = mvu.data["stat_data"]
    name, first = next(iter(stat.items()))
    assert isinstance(first, dict)
    key, pair = next((k, v) for k, v in first.items() if isinstance(v, list) and len(v) == 2)
    out = render_with_sources(f"<%- getvar('stat_data.{name}.{key}[0]') %>|<%- getvar('stat_data.{name}.{key}[1]') %>",
                              TemplateSources(variables=mvu)).text
    assert out == f"{pair[0]}|{pair[1]}"


def test_mvu_macros_are_yaml_literal_and_never_expanded() -> None:
    mvu = MvuSource({"stat_data": {"hp": 100, "text": "{{user}}\n{{secret}}", "$internal": "hidden",
                                   "nested": {"$private": 1, "public": "shown"}, "pair": [3, "desc"]}})
    text, resolution = expand_mvu_macros("A {{format_message_variable::stat_data}} B", mvu)
    body = text[2:-2]
    assert yaml.safe_load(body) == {"hp": 100, "text": "{{user}}\n{{secret}}", "nested": {"public": "shown"},
                                    "pair": [3, "desc"]}
    assert "$internal" not in body and resolution is not None
    text, _ = expand_mvu_macros("{{get_message_variable::stat_data.text}}|{{get_message_variable::stat_data.pair}}"
                                "|{{get_message_variable::stat_data.none}}|{{format_message_variable::stat_data.pair[0]}}",
                                mvu)
    assert text == '{{user}}\n{{secret}}|[3, "desc"]||3'
    assert mvu.reads == 2
    untouched = MvuSource({"a": 1})
    assert expand_mvu_macros("no macro", untouched) == ("no macro", None) and untouched.reads == 0


def test_render_with_sources_expands_mvu_macros_in_output() -> None:
    mvu = MvuSource({"stat_data": {"hp": [1, "hp"]}})
    result = render_with_sources("<%= 'x' %>\n{{format_message_variable::stat_data}}", TemplateSources(variables=mvu))
    assert result.text == "x\nhp:\n- 1\n- hp" and [r.kind for r in result.reads] == ["mvu-macro"]


# --- world books from a real scan --------------------------------------------------------------


def test_world_book_reads_follow_the_activation_record() -> None:
    from tavernbox.worldinfo import activate_world_info

    book = {"name": "Lore", "entries": {"0": {"uid": 0, "key": ["town"], "content": "T", "comment": "Town"},
                                        "1": {"uid": 1, "key": ["zzz"], "content": "S", "comment": "Secret"}}}
    activation = activate_world_info([book], ["we go to town"])
    src = TemplateSources(world_books=WorldBookSource([book], ActivationRecord.from_activation(activation)))
    assert render_with_dependencies("<%- await getwi('Town') %>", src).text == "T"
    with pytest.raises(TemplateError) as info:
        render_with_dependencies("<%- await getwi('Secret') %>", src)
    assert info.value.code == "TEMPLATE_DEPENDENCY_NOT_ACTIVE"


def test_world_book_models_and_missing_entries() -> None:
    from tavernbox.assets import parse_world_book

    model = parse_world_book(BOOK, name="Lore")
    src = TemplateSources(world_books=WorldBookSource([model], ActivationRecord.from_uids({"Lore": [7]})))
    assert render_with_dependencies("<%- await getwi('Lore', 7) %>", src).text == "The gate."
    with pytest.raises(TemplateError) as info:
        src.world_books.entry("Lore", 99)
    assert info.value.code == "TEMPLATE_DEPENDENCY_MISSING"
    with pytest.raises(TemplateError):
        WorldBookSource([{"entries": {}}], ActivationRecord.from_uids({}))  # a book needs a name


def test_sources_from_inputs_validates_shapes() -> None:
    with pytest.raises(TemplateError) as info:
        sources_from_inputs(world_books={"name": "x"})
    assert info.value.code == "INPUT_INVALID"
    with pytest.raises(TemplateError):
        sources_from_inputs(world_books=[BOOK], activated={"Lore": "0"})


# --- CLI -----------------------------------------------------------------------------------------


def _cli(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_cli_render_with_assets(tmp_path: Path) -> None:
    (tmp_path / "t.ejs").write_text("<%- await getwi('Lore', 'Castle gate') %>|<%- getpreset('main') %>|"
                                    "<%- getchar() %>|<%- getvar('stat_data.hp[0]') %>", encoding="utf-8")
    (tmp_path / "Lore.json").write_text(json.dumps(BOOK), encoding="utf-8")
    (tmp_path / "p.json").write_text(json.dumps(PRESET), encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps(CARD), encoding="utf-8")
    (tmp_path / "m.yaml").write_text("stat_data:\n  hp: [9, health]\n", encoding="utf-8")
    base = ["render", str(tmp_path / "t.ejs"), "--world-book", str(tmp_path / "Lore.json"), "--preset",
            str(tmp_path / "p.json"), "--card", str(tmp_path / "c.json"), "--mvu", str(tmp_path / "m.yaml")]
    code, out, _ = _cli([*base, "--activated", "0,7"])
    assert (code, out) == (0, "The gate.|Be helpful.|Alice is a <b>witch</b>.|9")
    code, out, _ = _cli([*base, "--activated", "0", "--json"])
    data = json.loads(out)
    assert code == 1 and data["error"]["code"] == "TEMPLATE_DEPENDENCY_NOT_ACTIVE"
    code, out, err = _cli([*base, "--activated", "7", "--json"])
    data = json.loads(out)
    assert code == 0 and [r["kind"] for r in data["reads"]] == [
        "worldbook-catalog", "worldbook-entry", "preset-prompt", "character", "variables"]
    code, _, err = _cli([*base])
    assert code == 1 and "TEMPLATE_DEPENDENCY_NOT_ACTIVE" in err
    code, _, err = _cli([*base, "--activated", "1", "--activated", "2"])
    assert code == 2


def test_cli_jsonl_rows_with_bridge_fields() -> None:
    rows = [
        {"template": "<%- getvar('stat_data.hp[0]') %>", "mvu": {"stat_data": {"hp": [4, "hp"]}}},
        {"template": "<%- await getwi(null, 'Town') %>", "world_books": [BOOK, {**BOOK, "name": "B2"}],
         "activated": {"B2": [0]}},
        {"template": "<%- getpreset('jb') %>/<%- getchar() %>", "preset": PRESET, "card": CARD},
        {"template": "<% setvar('x', 1) %>", "card": CARD},
        {"template": "<%- variables.a %>", "variables": {"a": 1}},
        {"template": "<%- 1 %>", "world_books": "nope"},
    ]
    code, out, _ = _cli(["render", "--jsonl"], "\n".join(json.dumps(r) for r in rows) + "\n")
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(answers) == 6
    assert answers[0]["text"] == "4" and answers[0]["reads"][0]["kind"] == "variables"
    # the first book's Town is not active; getwi(null, ...) finds it first and is refused
    assert answers[1]["error"]["code"] == "TEMPLATE_DEPENDENCY_NOT_ACTIVE"
    assert answers[2]["text"] == "JB text/Alice is a <b>witch</b>."
    assert answers[3]["error"]["code"] == "TEMPLATE_UNSUPPORTED"
    assert answers[4] == {"text": "1", "error": None}  # no bridge field: the plain renderer
    assert answers[5]["error"]["code"] == "INPUT_INVALID"


def test_cli_inspect(tmp_path: Path) -> None:
    path = tmp_path / "[GENERATE:AFTER] scene.ejs"
    path.write_text("<%- 1 %>", encoding="utf-8")
    code, out, _ = _cli(["inspect", str(path), "--json"])
    data = json.loads(out)
    assert code == 0 and data["events"] == ["before_model_request"] and data["placement"] == "after"
    bad = tmp_path / "bad.ejs"
    bad.write_text("@@iframe\n@@nonsense\n<% if (x) {", encoding="utf-8")
    code, out, err = _cli(["inspect", str(bad)])
    assert code == 1 and "UNSUPPORTED_EVENT" in out
    assert "bad.ejs:2:1" in err and "unknown decorator @@nonsense" in err and "TEMPLATE_SYNTAX" in err


# --- the real templates of the corpus ------------------------------------------------------------

#: template -> (MVU file, expected: "ok" or an error code). Documentation pages with example
#: fragments (tutorials, reference docs) are not templates and are left out; the controllers
#: that read their card's book are in CARD_CASES below.
CORPUS_CASES = {
    "mvu-example-liuli-affection-stages.md": ("mvu-example-liuli-initvar1.yaml", "ok"),
    "lide-ai-stage-guidance.yaml": ("lide-ai-initvar.yaml", "ok"),
    "lide-eldelin-character-stages.yaml": ("lide-ai-initvar.yaml", "ok"),
    "stagedog-example-character-stages.yaml": ("stagedog-example-initvar.yaml", "ok"),
    "linlangliehu-variable-list.txt": ("stagedog-example-initvar.yaml", "ok"),
    "d1040-addon-variable-list-copy.txt": ("stagedog-example-initvar.yaml", "ok"),
    "viet-the__ejs-palette-multistage.txt": ("mvu-example-liuli-initvar1.yaml", "ok"),
    # needs writes / chat history: refused with a clear code even though it catches errors
    "xuexix-system-control-logic.yaml": ("stagedog-example-initvar.yaml", "TEMPLATE_UNSUPPORTED"),
    "kho-kien-thuc__dynamic-content-controller.vi.txt": ("stagedog-example-initvar.yaml", "TEMPLATE_UNSUPPORTED"),
}


@pytest.mark.needs_shared("corpora/ejs-templates", "corpora/mvu")
@pytest.mark.parametrize("name", sorted(CORPUS_CASES))
def test_corpus_templates(name: str) -> None:
    mvu_file, expected = CORPUS_CASES[name]
    source = (CORPUS / "ejs-templates" / name).read_text(encoding="utf-8-sig")
    sources = TemplateSources(variables=MvuSource.load(CORPUS / "mvu" / mvu_file))
    try:
        result = render_with_sources(source, sources, limits=Limits(time_ms=1000.0))
    except TemplateError as exc:
        assert exc.code == expected, f"{name}: {exc}"
        return
    assert expected == "ok"
    assert "<%" not in result.text or name.startswith("kho")
    assert result.usage.passes >= 1


@pytest.mark.needs_shared("corpora/ejs-templates", "corpora/mvu")
def test_corpus_staged_persona_follows_the_variables() -> None:
    source = (CORPUS / "ejs-templates" / "mvu-example-liuli-affection-stages.md").read_text(encoding="utf-8-sig")
    mvu = MvuSource.load(CORPUS / "mvu" / "mvu-example-liuli-initvar1.yaml")
    low = render_with_sources(source, TemplateSources(variables=mvu)).text
    data = json.loads(json.dumps(mvu.data))
    data["stat_data"]["理"]["好感度"][0] = 95
    high = render_with_sources(source, TemplateSources(variables=MvuSource(data))).text
    assert low != high and len(low) > 100 and len(high) > 100


#: Controllers taken from a card's own book: they getwi() entries of that book by title.
CARD_CASES = [("zhanguo.v3.json", "zhanguo__background-controller.txt", "公元前403年"),
              ("de-quoc-la-ma-than-thanh.vi.v3.json", "de-quoc-la-ma__naples-controller.txt", "Vương quốc Naples"),
              ("de-quoc-la-ma-than-thanh.vi.v3.json", "de-quoc-la-ma__event-controller.txt", "Reconquista")]


@pytest.mark.needs_shared("corpora/ejs-templates", "corpora/cards")
@pytest.mark.parametrize(("card_file", "template", "expected"), CARD_CASES)
def test_corpus_controllers_against_their_cards(card_file: str, template: str, expected: str) -> None:
    from tavernbox.assets import load_asset
    from tavernbox.bridge import CharacterSource
    from tavernbox.worldinfo import activate_world_info

    card = load_asset(CORPUS / "cards" / card_file).model
    book = card.character_book
    book = book.with_name(book.name or card.name)
    source = (CORPUS / "ejs-templates" / template).read_text(encoding="utf-8-sig")
    # Every entry activated (a hand-made record): the controller pulls its entries in as raw text.
    everything = ActivationRecord.from_uids({book.name: [e.uid for e in book.entry_list]})
    src = TemplateSources(world_books=WorldBookSource([book], everything), character=CharacterSource(card))
    result = render_with_sources(source, src, limits=Limits(time_ms=1000.0))
    assert expected in result.text and "<%" not in result.text
    assert all(r.kind.startswith("worldbook") or r.kind == "variables" for r in result.reads)
    assert len(result.reads) <= 32
    # With the real scan of a chat that names none of them, those entries are not active: the
    # controller fails with a clear code instead of reading what the scan excluded.
    activation = activate_world_info([{**book.to_st_dict(), "name": book.name}], ["hello"])
    scanned = TemplateSources(world_books=WorldBookSource([book], ActivationRecord.from_activation(activation)))
    with pytest.raises(TemplateError) as info:
        render_with_sources(source, scanned, limits=Limits(time_ms=1000.0))
    assert info.value.code == "TEMPLATE_DEPENDENCY_NOT_ACTIVE"


def test_cli_asset_errors_name_the_option_and_file(tmp_path: Path) -> None:
    (tmp_path / "t.ejs").write_text("<%- 1 %>", encoding="utf-8")
    (tmp_path / "bad.json").write_text("x", encoding="utf-8")
    code, _, err = _cli(["render", str(tmp_path / "t.ejs"), "--world-book", str(tmp_path / "bad.json")])
    assert code == 1 and "ASSET_JSON" in err and "--world-book" in err and "bad.json:1:1" in err
    code, _, err = _cli(["render", str(tmp_path / "t.ejs"), "--mvu", str(tmp_path / "bad.json")])
    assert code == 1 and "--mvu" in err and "Traceback" not in err

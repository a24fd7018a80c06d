"""The request path's caches return exactly what the plain path returns, and cannot be corrupted.

Covers the asset cache (``assets/cache.py``: files by identity and version, objects by content),
the frozen JSON views it hands out (``assets/frozen.py``), the assembler's fingerprint path for
assets holding those views (``freeze_assets``), the normalised world-info books of cached assets
(``strategies/st_cache.py``), the whole-word key search (``worldinfo/matching._bounded_find``) and
the ``--help`` command list that imports no command.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox import assemble_request
from tavernbox.assembler.registry import freeze_assets
from tavernbox.assets.cache import AssetCache, AssetView, clear_asset_cache
from tavernbox.assets.frozen import FrozenDict, FrozenList, fingerprint, freeze_json, json_digest, json_text, thaw_json
from tavernbox.errors import TemplateError
from tavernbox.strategies import st_assemble
from tavernbox.strategies.st_cache import clear_scan_books
from tavernbox.worldinfo.matching import _bounded, _bounded_find

CORPORA = SHARED / "corpora"
BIG = {"preset": CORPORA / "presets" / "hoxilo-it-takes-two-v5.2.vi.json",
       "card": CORPORA / "cards" / "de-quoc-la-ma-than-thanh.vi.v3.json",
       "book": CORPORA / "worldbooks" / "prolix-zzz-lorebook-vector.json"}
SMALL = {"preset": CORPORA / "presets" / "atelier-fieldkit.json",
         "card": CORPORA / "cards" / "prolix-seraphina-lyravell.v3.json",
         "book": CORPORA / "worldbooks" / "st-default-eldoria.json"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


# --- frozen views ---------------------------------------------------------------------------


@given(json_values)
@settings(max_examples=200, deadline=None)
def test_frozen_json_text_is_the_plain_text_and_thaws_back(value: Any) -> None:
    frozen = freeze_json(value)
    assert json_text(frozen) == json.dumps(value)
    assert thaw_json(frozen) == json.loads(json.dumps(value))
    # a plain container holding frozen parts has the same text as its plain twin, and the same
    # fingerprint as a fresh container of the same frozen parts
    wrapped = {"x": frozen, "y": [frozen]}
    twin = {"x": value, "y": [value]}
    assert json_text(wrapped) == json.dumps(twin)
    assert fingerprint(wrapped) == fingerprint({"x": frozen, "y": [frozen]})
    assert json_digest(frozen) == json_digest(freeze_json(value)) == json_digest(value)


@given(json_values, json_values)
@settings(max_examples=200, deadline=None)
def test_fingerprints_are_equal_only_for_equal_json(a: Any, b: Any) -> None:
    for left, right in ((freeze_json(a), b), (a, b), ({"k": freeze_json(a)}, {"k": freeze_json(b)})):
        if fingerprint(left) == fingerprint(right):
            assert json_text(left) == json_text(right)


def test_frozen_views_cannot_be_written() -> None:
    frozen = freeze_json({"a": [1, {"b": 2}], "c": {"d": [3]}})
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    with pytest.raises(TypeError):
        frozen["a"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        frozen["a"][1]["b"] = 3
    with pytest.raises(AttributeError):
        frozen["c"]["d"].append(4)
    with pytest.raises(TypeError):
        FrozenDict({"a": 1})
    copy = dict(frozen)  # a shallow copy is the caller's own
    copy["a"] = 5
    assert frozen["a"][0] == 1 and frozen == {"a": [1, {"b": 2}], "c": {"d": [3]}}
    assert frozen["a"] is frozen["a"]  # frozen once, on first read
    deep = thaw_json(frozen)
    deep["c"]["d"].append(4)
    assert frozen["c"]["d"] == (3,)


def test_freeze_json_copies_the_callers_containers() -> None:
    plain = {"a": [1, 2], "b": {"c": "x"}}
    frozen = freeze_json(plain)
    plain["a"].append(3)
    plain["b"]["c"] = "y"
    assert json_text(frozen) == '{"a": [1, 2], "b": {"c": "x"}}'


def test_nested_arrays_freeze_level_by_level() -> None:
    value: Any = {"leaf": [1]}
    for _ in range(500):
        value = [value, []]
    frozen = freeze_json(value)
    depth = 0
    while isinstance(frozen, tuple):
        assert frozen[1] == ()
        frozen, depth = frozen[0], depth + 1
    assert depth == 500 and isinstance(frozen, FrozenDict) and frozen["leaf"] == (1,)
    assert json_text(freeze_json(value)) == json.dumps(value)


# --- the asset cache --------------------------------------------------------------------------


def _book(content: str) -> dict[str, Any]:
    return {"entries": {"0": {"uid": 0, "key": ["dragon"], "content": content}}}


def test_a_file_is_read_once_and_again_after_it_changes(tmp_path: Path) -> None:
    cache = AssetCache()
    path = tmp_path / "lore.json"
    path.write_text(json.dumps(_book("Dragons sleep.")), encoding="utf-8")
    first = cache.load(path, kind="world_book")
    second = cache.load(path, kind="world_book")
    assert cache.misses == 1 and cache.hits == 1
    assert first.to_st_dict() is second.to_st_dict()  # one frozen dump, shared
    assert first.name == "lore"
    path.write_text(json.dumps(_book("Dragons wake up, and roar.")), encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a different version even on a coarse clock
    third = cache.load(path, kind="world_book")
    assert third.to_st_dict()["entries"]["0"]["content"] == "Dragons wake up, and roar."
    assert cache.misses == 2


def test_a_view_answers_like_the_model_and_never_changes_the_cache(tmp_path: Path) -> None:
    from tavernbox.assets import load_asset

    cache = AssetCache()
    path = tmp_path / "lore.json"
    path.write_text(json.dumps(_book("Dragons sleep.")), encoding="utf-8")
    view = cache.load(path, kind="world_book")
    model = load_asset(path, kind="world_book").model
    assert thaw_json(view.to_st_dict()) == model.to_st_dict()
    assert thaw_json(view.model_dump(mode="json")) == model.model_dump(mode="json")
    # other attributes come from the view's own copy: editing it changes nothing shared
    view.entries["0"].content = "edited"
    assert view.entries["0"].content == "edited"
    again = cache.load(path, kind="world_book")
    assert again.entries["0"].content == "Dragons sleep."
    assert again.to_st_dict()["entries"]["0"]["content"] == "Dragons sleep."
    renamed = view.with_name("other")
    assert renamed.name == "other" and view.name == "lore" and again.name == "lore"
    loaded = again.loaded()
    loaded.model.entries["0"].content = "edited too"
    assert cache.load(path, kind="world_book").to_st_dict()["entries"]["0"]["content"] == "Dragons sleep."


def test_objects_are_keyed_by_content_and_detached_from_the_caller() -> None:
    cache = AssetCache()
    raw = _book("Dragons sleep.")
    view = cache.parse(raw, kind="world_book", base_path="$.books[0]")
    raw["entries"]["0"]["content"] = "changed by the caller"
    assert view.to_st_dict()["entries"]["0"]["content"] == "Dragons sleep."
    same = cache.parse(_book("Dragons sleep."), kind="world_book", base_path="$.books[0]")
    assert same.to_st_dict() is view.to_st_dict() and cache.hits == 1
    # the frozen dump itself is a valid object input, keyed by its memoised digest
    frozen = view.to_st_dict()
    again = cache.parse(frozen, kind="world_book", base_path="$.books[0]")
    assert cache.parse(frozen, kind="world_book", base_path="$.books[0]").to_st_dict() is again.to_st_dict()
    assert thaw_json(again.to_st_dict()) == thaw_json(frozen)
    other = cache.parse(raw, kind="world_book", base_path="$.books[0]")
    assert other.to_st_dict()["entries"]["0"]["content"] == "changed by the caller"


def test_failures_are_not_cached(tmp_path: Path) -> None:
    cache = AssetCache()
    path = tmp_path / "bad.json"
    path.write_text('{"entries": ', encoding="utf-8")
    for _ in range(2):
        with pytest.raises(TemplateError) as err:
            cache.load(path, kind="world_book")
        assert err.value.code == "ASSET_JSON"
    assert len(cache) == 0
    with pytest.raises(TemplateError) as missing:
        cache.load(tmp_path / "absent.json", kind="world_book")
    assert missing.value.code == "INPUT_INVALID"


def test_the_cache_is_bounded() -> None:
    cache = AssetCache(max_entries=3)
    for i in range(6):
        cache.parse(_book(f"entry {i}"), kind="world_book")
    assert len(cache) == 3
    small = AssetCache(max_bytes=400)
    small.parse(_book("x" * 200), kind="world_book")  # over a quarter of the budget: not kept
    assert len(small) == 0


# --- the assembler's assets ----------------------------------------------------------------


def test_assets_with_frozen_views_freeze_to_the_plain_paths_object() -> None:
    plain = {"prompts": [{"identifier": "main", "content": "Hi {{char}}"}], "temperature": 1.0, "n": 1}
    view = freeze_json(plain)
    by_plain = freeze_assets({"st_preset": json.loads(json.dumps(plain))})["st_preset"]
    by_view = freeze_assets({"st_preset": {**view, "n": 1}})["st_preset"]
    assert by_view is by_plain
    assert freeze_assets({"st_preset": view})["st_preset"] is by_plain
    with pytest.raises(TypeError):
        freeze_assets({"x": {"a": view, "b": object()}})


# --- the request path ------------------------------------------------------------------------


def _uncached_load(kind: str, value: Any, base_dir: Path | None, where: str) -> tuple[Any, str]:
    """The request path's loader without the cache (validated models, as before the cache)."""
    from collections.abc import Mapping

    from tavernbox.assets import load_asset, parse_card, parse_preset, parse_world_book

    value = st_assemble._resolve(value, base_dir)
    if isinstance(value, Path):
        loaded = load_asset(value, kind=kind)
        return _WithDiagnostics(loaded.model, loaded.diagnostics), value.stem
    assert isinstance(value, Mapping)
    data = dict(value)
    diags: list[Any] = []
    if kind == "preset":
        return _WithDiagnostics(parse_preset(data, base_path=where, diagnostics=diags), diags), \
            str(data.get("name") or "preset")
    if kind == "card":
        return _WithDiagnostics(parse_card(data, base_path=where, diagnostics=diags), diags), ""
    return _WithDiagnostics(parse_world_book(data, base_path=where, diagnostics=diags), diags), \
        str(data.get("name") or "")


class _WithDiagnostics:
    """A model with the diagnostics of reading it, as the cache's view carries them (the request says them)."""

    def __init__(self, model: Any, diagnostics: Any) -> None:
        self._model = model
        self.diagnostics = tuple(diagnostics)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def _chat(n: int) -> dict[str, Any]:
    return {"messages": [{"role": "user" if (n - i) % 2 else "assistant",
                          "content": f"Message {i}: the dragon, the king and Seraphina talk about the war."}
                         for i in range(n)]}


def _result(request: dict[str, Any]) -> str:
    res = assemble_request(request)
    return json.dumps({"all": res.to_dict(), "warnings": [w.to_dict() for w in res.warnings]}, sort_keys=True,
                      ensure_ascii=False)


def _clear() -> None:
    clear_asset_cache()
    clear_scan_books()


@pytest.mark.parametrize("assets", [SMALL, BIG], ids=["small", "largest"])
def test_cached_results_equal_the_uncached_path(assets: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                shared: Any) -> None:
    for path in assets.values():
        shared(str(path.relative_to(SHARED)))
    request = {"preset": str(assets["preset"]), "card": str(assets["card"]), "books": [str(assets["book"])],
               "chat": _chat(40)}
    with monkeypatch.context() as m:
        m.setattr(st_assemble, "_load", _uncached_load)
        plain = _result(request)
    _clear()
    cold = _result(request)
    warm = _result(request)
    assert cold == plain and warm == plain
    as_objects = {**request, "preset": json.loads(assets["preset"].read_text(encoding="utf-8")),
                  "card": json.loads(assets["card"].read_text(encoding="utf-8")),
                  "books": [json.loads(assets["book"].read_text(encoding="utf-8"))]}
    with monkeypatch.context() as m:
        m.setattr(st_assemble, "_load", _uncached_load)
        plain_objects = _result(as_objects)
    assert _result(as_objects) == plain_objects and _result(as_objects) == plain_objects


def test_mutating_results_and_inputs_does_not_change_the_next_result(shared: Any) -> None:
    for path in SMALL.values():
        shared(str(path.relative_to(SHARED)))
    card = json.loads(SMALL["card"].read_text(encoding="utf-8"))
    request = {"preset": str(SMALL["preset"]), "card": card, "books": [str(SMALL["book"])], "chat": _chat(12)}
    first = _result(request)
    res = assemble_request(request)
    for m in res.messages:
        m["content"] = "tampered"
    res.messages.clear()
    res.body.clear()
    inputs = st_assemble.load_inputs(st_assemble.parse_request(request))
    with pytest.raises(TypeError):
        inputs.preset["prompts"] = []  # type: ignore[index]
    own = inputs.card or {}
    own["description"] = "tampered"  # the caller's own shallow copy
    book = inputs.books[0][0]
    assert isinstance(book, AssetView)
    book.entries.clear()  # the view's private copy
    assert _result(request) == first
    # the caller edits the object it passed in: the next result follows it, and going back to the
    # original content gives the first result again
    card["data"]["description"] += " (edited)"
    changed = _result(request)
    assert changed != first and "(edited)" in changed
    card["data"]["description"] = card["data"]["description"][: -len(" (edited)")]
    assert _result(request) == first


# --- whole-word keys --------------------------------------------------------------------------


@given(st.text(alphabet="ab _-é.\n", max_size=40), st.text(alphabet="ab _-é.", min_size=0, max_size=4))
@settings(max_examples=500, deadline=None)
def test_bounded_find_is_the_boundary_regex(text: str, needle: str) -> None:
    m = _bounded(needle).search(text)
    assert _bounded_find(text, needle) == (m.start() if m else -1)


def test_bounded_find_examples() -> None:
    assert _bounded_find("the king's gate", "king's") == 4
    assert _bounded_find("kingdom king", "king") == 8
    assert _bounded_find("_king", "king") == -1
    assert _bounded_find("ékingé", "king") == 1  # only ASCII word characters bound a word
    assert _bounded_find("a-b a-b", "a-b") == 0
    assert re.search(r"(?<![A-Za-z0-9_])x\.(?![A-Za-z0-9_])", "yx. x.") is not None
    assert _bounded_find("yx. x.", "x.") == 4


# --- tavernbox --help -------------------------------------------------------------------------


def test_help_lists_every_command_with_its_own_summary() -> None:
    import click

    from tavernbox.cli.main import COMMANDS, SUMMARIES, main

    assert set(SUMMARIES) == set(COMMANDS)
    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.help is not None
        assert command.help.split("\n\n")[0].strip() == SUMMARIES[name], name
    lazy = click.HelpFormatter(width=80)
    main.format_commands(ctx, lazy)
    eager = click.HelpFormatter(width=80)
    click.Group.format_commands(main, ctx, eager)
    assert lazy.getvalue() == eager.getvalue()


def test_help_imports_no_command() -> None:
    code = ("import sys; sys.argv = ['tavernbox', '--help']\n"
            "from tavernbox.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('tavernbox')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "assemble" in done.stdout
    loaded = eval(done.stderr.strip().splitlines()[-1])  # noqa: S307 - our own list of names
    assert loaded == ["tavernbox", "tavernbox.cli", "tavernbox.cli.main"]


@given(st.text(alphabet="ab \n-é", max_size=60))
@settings(max_examples=300, deadline=None)
def test_text_windows_by_lines_are_every_window(text: str) -> None:
    from tavernbox.worldinfo.matching import GRAM, text_windows

    expected = {text[i:i + GRAM] for i in range(len(text) - GRAM + 1)} | {""}
    assert text_windows(text, [], True) == expected
    assert text_windows("new line\n" + text, [], True) == \
        {("new line\n" + text)[i:i + GRAM] for i in range(len(text) + 9 - GRAM + 1)} | {""}

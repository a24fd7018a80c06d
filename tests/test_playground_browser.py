"""The playground end to end in a real headless Chromium against a real ``tavernbox serve`` (issue 16).

Each mode renders; a template error shows its code and ``line:column`` and clicking it moves the
caret there; hovering a part of the output names its source (a world-info entry, a prompt, a
macro, a variable) and highlights the text it came from; the page works from the keyboard alone;
the token given once as ``?token=`` is kept for the session and sent as a bearer token; pinning a
result and changing the input shows the change by source; the library round-trips; the layout
holds at 200% zoom.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import chromium, require_browser
from service_support import TOKEN, RunningService

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    require_browser()
    with RunningService(str(tmp_path_factory.mktemp("browser") / "service.db")) as svc:
        yield svc


@pytest.fixture(scope="module")
def browser(service: RunningService) -> Iterator[Any]:
    with chromium() as context:
        yield context


@pytest.fixture
def page(browser: Any, service: RunningService) -> Iterator[Any]:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{service.base}/?token={TOKEN}")
    wait_runs(page, 1)
    yield page
    page.close()
    assert not errors, errors


def runs(page: Any) -> int:
    return int(page.evaluate("Number(document.body.dataset.runs || 0)"))


def wait_runs(page: Any, at_least: int) -> None:
    # a function, not an expression: the page's CSP forbids evaluating strings
    page.wait_for_function("n => Number(document.body.dataset.runs || 0) >= n", arg=at_least, timeout=30_000)


def wait_lib(page: Any, word: str) -> None:
    page.wait_for_function("w => document.querySelector('[data-testid=lib-status]').innerText.includes(w)", arg=word)


def run_now(page: Any) -> None:
    """Press Run and wait for its result."""
    before = runs(page)
    page.click("[data-testid=run]")
    wait_runs(page, before + 1)


def set_mode(page: Any, mode: str) -> None:
    before = runs(page)
    page.select_option("[data-testid=mode]", mode)
    wait_runs(page, before + 1)


def fill(page: Any, testid: str, text: str) -> None:
    """Replace an editor's text the way typing does (an input event), then run now."""
    page.fill(f"[data-testid={testid}]", text)
    run_now(page)


def diagnostics(page: Any) -> list[dict[str, str]]:
    return page.eval_on_selector_all("[data-testid=diagnostics] > li.diagnostic", """items => items.map(li => ({
        code: li.dataset.code, line: li.dataset.line, column: li.dataset.column, text: li.innerText}))""")


def selection(page: Any, testid: str) -> tuple[int, int, bool]:
    return tuple(page.eval_on_selector(f"[data-testid={testid}]", """el => [el.selectionStart, el.selectionEnd,
        document.activeElement === el]"""))


def highlighted(page: Any, testid: str) -> str:
    """The text under the editor's source highlight ('' when none)."""
    return page.eval_on_selector(f"[data-testid={testid}]",
                                 "el => { const m = el.parentNode.querySelector('mark.source-highlight');"
                                 " return m ? m.textContent : ''; }")


# -- every mode renders -------------------------------------------------------------------------


def test_each_mode_renders(page: Any) -> None:
    assert page.input_value("[data-testid=mode]") == "macros"
    output = page.inner_text("[data-testid=output]")
    assert "You are Mira, talking with Ash." in output and "{{char}}" not in output
    assert "(service peak)" in page.inner_text("[data-testid=stats]")  # memory used, measured by the service
    set_mode(page, "ejs")
    assert "Hello Ash, welcome to Gull Rock." in page.inner_text("[data-testid=output]")
    assert "render" in page.inner_text("[data-testid=stats]") and "memory" in page.inner_text("[data-testid=stats]")
    set_mode(page, "worldinfo")
    rows = page.eval_on_selector_all("[data-testid=trace] tbody tr", "rows => rows.map(r => r.innerText)")
    assert len(rows) == 5  # every entry, fired or not, with why
    assert any("activated" in r and "fired by key 'light'" in r for r in rows)
    assert any("skipped" in r and "disabled" in r for r in rows)
    assert any("no_match" in r for r in rows)
    set_mode(page, "assemble")
    output = page.inner_text("[data-testid=output]")
    assert "Write Mira's next reply in this roleplay with Ash." in output
    assert page.locator("[data-testid=output] .block").count() == 17
    assert "17 messages" in page.inner_text("[data-testid=stats]")
    assert "(service peak)" in page.inner_text("[data-testid=stats]")


def test_results_update_as_you_type(page: Any) -> None:
    before = runs(page)
    page.click("[data-testid=source]")
    page.keyboard.press("Control+End")
    page.keyboard.type(" {{char}}!")
    wait_runs(page, before + 1)  # debounced: no Run pressed
    page.wait_for_function("() => document.querySelector('[data-testid=output]').innerText.trim().endsWith('Mira!')")


# -- diagnostics ----------------------------------------------------------------------------------


def test_a_template_error_shows_its_code_and_position_and_moves_the_caret(page: Any, service: RunningService) -> None:
    set_mode(page, "ejs")
    template = "Hello\n<% if (variables.x) { %>\nunclosed <%= 1 %>\n"
    fill(page, "source", template)
    assert service.client is not None
    expected = service.client.post("/v1/render", json={"template": template, "variables": {}}).json()["error"]
    found = diagnostics(page)
    assert len(found) == 1 and found[0]["code"] == expected["code"] == "TEMPLATE_SYNTAX"
    assert (found[0]["line"], found[0]["column"]) == (str(expected["line"]), str(expected["column"]))
    assert f"{expected['line']}:{expected['column']}" in found[0]["text"]
    assert "^" in page.inner_text("[data-testid=diagnostics] .snippet")
    assert page.inner_text("[data-testid=output]") == "No output: see the diagnostics."
    page.click("[data-testid=diagnostics] li.diagnostic button")
    lines = template.split("\n")
    offset = sum(len(line) + 1 for line in lines[: expected["line"] - 1]) + expected["column"] - 1
    assert selection(page, "source") == (offset, offset, True)


def test_macro_warnings_and_bad_json_inputs_point_into_their_editor(page: Any) -> None:
    fill(page, "source", "Hi {{char}}\nand {{nosuchmacro}} here")
    found = diagnostics(page)
    assert [(d["code"], d["line"], d["column"]) for d in found] == [("MACRO_UNKNOWN", "2", "5")]
    page.focus("[data-testid=diagnostics] li.diagnostic button")
    page.keyboard.press("Enter")
    assert selection(page, "source") == (len("Hi {{char}}\nand "), len("Hi {{char}}\nand "), True)
    fill(page, "inputs", '{\n  "context": {"char": "A",}\n}')
    found = diagnostics(page)
    assert len(found) == 1 and found[0]["code"] == "INPUT_JSON_INVALID" and found[0]["line"] == "2"
    page.click("[data-testid=diagnostics] li.diagnostic button")
    start, _, focused = selection(page, "inputs")
    assert focused and start == len('{\n  "context": {"char": "A",')


def test_a_service_error_with_a_json_path_points_at_it(page: Any) -> None:
    set_mode(page, "worldinfo")
    fill(page, "inputs", '{\n  "chat": ["hi"],\n  "settings": {"world_info_depth": "deep"}\n}')
    found = diagnostics(page)
    assert found and found[0]["line"] == "3", found


# -- provenance -----------------------------------------------------------------------------------


def test_hovering_an_assembled_span_names_its_world_info_entry_and_highlights_it(page: Any) -> None:
    set_mode(page, "assemble")
    page.hover("[data-testid=output] .piece-world_info >> text=The Gull Rock light")
    details = page.inner_text("[data-testid=provenance]")
    assert 'book "Gull Rock", entry 0 "The lighthouse"' in details and "worldInfoBefore" in details
    assert highlighted(page, "inputs") == json.dumps(
        "The Gull Rock light is a hundred years old; its lamp turns on clockwork Mira winds every four hours.")


def test_assemble_attributes_each_template_output_to_its_tag_or_the_entry_getwi_read(page: Any) -> None:
    """Issue 26: the evaluated request, each ST-Prompt-Template output attributed (its template's tag and line, or
    the world-info entry ``getwi`` printed, highlighted in the request)."""
    set_mode(page, "assemble")
    request = json.loads(page.input_value("[data-testid=inputs]"))
    main = next(p for p in request["preset"]["prompts"] if p.get("identifier") == "main")
    main["content"] = "Lore: <%- await getwi('Gull Rock', 'The lighthouse') %> Sum <%= 20 + 22 %>."
    fill(page, "inputs", json.dumps(request, indent=2))
    first = page.locator("[data-testid=output] .block").first
    assert "Sum 42." in first.inner_text() and "<%" not in first.inner_text()
    first.locator(".piece-world_info", has_text="The Gull Rock light").first.hover()
    details = page.inner_text("[data-testid=provenance]")
    assert 'book "Gull Rock", entry 0 "The lighthouse", read by getwi' in details
    assert highlighted(page, "inputs") == json.dumps(
        "The Gull Rock light is a hundred years old; its lamp turns on clockwork Mira winds every four hours.")
    first.locator(".piece-ejs_output", has_text="42").first.hover()
    assert "EJS escaped at 1:" in page.inner_text("[data-testid=provenance]")


def test_hovering_a_macro_names_the_prompt_identifier_and_the_macro(page: Any) -> None:
    set_mode(page, "assemble")
    first = page.locator("[data-testid=output] .block").first
    first.locator(".piece-macro").first.hover()
    details = page.inner_text("[data-testid=provenance]")
    assert "macro {{char}} (prompt main)" in details
    assert highlighted(page, "inputs") == "{{char}}"
    first.locator(".piece-preset").first.hover()
    assert "preset prompt main" in page.inner_text("[data-testid=provenance]")
    assert highlighted(page, "inputs") == "Write "


def test_macros_mode_names_the_variable_read_and_its_macro(page: Any) -> None:
    page.hover("[data-testid=output] .piece-variable >> nth=0")
    details = page.inner_text("[data-testid=provenance]")
    assert "variable local.storm_hours read by {{getvar}}" in details
    assert highlighted(page, "source") == "{{getvar::storm_hours}}"


def test_ejs_mode_names_the_output_tag(page: Any) -> None:
    set_mode(page, "ejs")
    page.hover("[data-testid=output] .piece-ejs_output >> text=Gull Rock")
    assert "<%= variables.place %>" in page.inner_text("[data-testid=provenance]")
    assert highlighted(page, "source") == "<%= variables.place %>"


def test_world_info_shows_each_activated_entry_apart_and_the_trace_in_book_order(page: Any) -> None:
    """Issue 28: the activated text is split by entry (each piece names its entry), and the trace lists the book's
    entries in the book's order, not the order the activation evaluated them."""
    set_mode(page, "worldinfo")
    book = {"name": "Lore", "entries": {
        "7": {"uid": 7, "key": ["zzz"], "comment": "Never", "content": "Not sent.", "order": 1, "position": 0},
        "2": {"uid": 2, "key": [], "constant": True, "comment": "Second", "content": "The second fact.",
              "order": 10, "position": 0},
        "5": {"uid": 5, "key": [], "constant": True, "comment": "First", "content": "The first fact.",
              "order": 90, "position": 0}}}
    fill(page, "source", json.dumps(book, indent=2))
    uids = page.eval_on_selector_all("[data-testid=trace] tbody tr", "rows => rows.map(r => r.dataset.uid)")
    # the book's order is its entries' keys as JavaScript (and SillyTavern) reads them: integer keys ascending; the
    # activation evaluates by "order", highest first (5, 2, 7)
    assert uids == ["2", "5", "7"]
    labels = page.eval_on_selector_all("[data-testid=output] .piece", "ps => ps.map(p => p.getAttribute('aria-label'))")
    entries = [label for label in labels if label.startswith("entry ")]
    assert any(label.startswith("entry 5 (First): The first fact.") for label in entries), labels
    assert any(label.startswith("entry 2 (Second): The second fact.") for label in entries), labels


def test_selecting_a_trace_row_highlights_its_entry(page: Any) -> None:
    set_mode(page, "worldinfo")
    page.click("[data-testid=trace] tr[data-uid='3']")
    assert 'entry 3 "Sea dragon rumour"' in page.inner_text("[data-testid=provenance]")
    text = highlighted(page, "source")
    assert text.startswith('"3": {') and '"uid": 3' in text


# -- keyboard, token, zoom ------------------------------------------------------------------------


def test_keyboard_only_use(page: Any) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")
    order = []
    for _ in range(12):
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.dataset.testid || document.activeElement.id"))
        if order[-1] == "source":
            break
    assert order.index("mode") < order.index("run") < order.index("source"), order
    # every control is labelled
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('input, select, textarea, button')]
        .filter(el => !el.closest('[hidden]'))
        .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.textContent.trim())
        .map(el => el.id || el.outerHTML.slice(0, 60))""")
    assert unlabelled == []
    # change the mode and run, by keyboard only
    page.focus("[data-testid=mode]")
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"  # focus is visible
    before = runs(page)
    page.keyboard.press("ArrowDown")  # macros -> ejs
    wait_runs(page, before + 1)
    assert page.input_value("[data-testid=mode]") == "ejs"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "run"
    before = runs(page)
    page.keyboard.press("Enter")
    wait_runs(page, before + 1)
    assert "characters" in page.inner_text("[data-testid=status]")  # announced in the live region
    assert page.get_attribute("[data-testid=status]", "aria-live") == "polite"
    # reach the output's parts and walk them with the arrow keys: provenance follows the focus
    page.focus("[data-testid=output] .piece[tabindex='0']")
    first = page.inner_text("[data-testid=provenance]")
    assert "template text" in first
    page.keyboard.press("ArrowRight")  # "\nHello " -> "Ash"
    second = page.inner_text("[data-testid=provenance]")
    assert "output tag" in second and second != first
    # Ctrl+Enter in an editor runs now
    page.focus("[data-testid=source]")
    before = runs(page)
    page.keyboard.press("Control+Enter")
    wait_runs(page, before + 1)


def test_the_token_is_taken_once_and_kept_for_the_session(browser: Any, service: RunningService) -> None:
    page = browser.new_page()
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization")) if "/v1/" in r.url else None)
    page.goto(f"{service.base}/?token={TOKEN}")
    wait_runs(page, 1)
    assert "token" not in page.url  # stripped from the address bar
    assert page.evaluate("sessionStorage.getItem('tavernbox.token')") == TOKEN
    page.goto(f"{service.base}/")  # same tab, no token in the URL: still works
    wait_runs(page, 1)
    assert "characters" in page.inner_text("[data-testid=status]")
    assert page.is_hidden("#token-form")
    assert sent and all(h == f"Bearer {TOKEN}" for h in sent)
    page.close()
    fresh = browser.new_page()  # another tab: no token until one is given
    fresh.goto(f"{service.base}/")
    wait_runs(fresh, 1)
    assert fresh.is_visible("#token-form")
    assert [d["code"] for d in diagnostics(fresh)] == ["SERVICE_UNAUTHORIZED"]
    fresh.fill("#token", TOKEN)
    before = runs(fresh)
    fresh.press("#token", "Enter")
    wait_runs(fresh, before + 1)
    assert "You are Mira" in fresh.inner_text("[data-testid=output]")
    fresh.close()


def test_readable_at_200_percent_zoom(browser: Any, service: RunningService) -> None:
    page = browser.new_page()
    page.set_viewport_size({"width": 700, "height": 900})  # a 1400 px wide window at 200% zoom
    page.goto(f"{service.base}/?token={TOKEN}")
    wait_runs(page, 1)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    editors = page.locator(".editors").bounding_box()
    results = page.locator(".results").bounding_box()
    assert results["y"] >= editors["y"] + editors["height"] - 1  # one column: results below the editors
    page.close()


# -- diff, library, export ------------------------------------------------------------------------


def test_the_diff_shows_what_a_new_message_changed(page: Any) -> None:
    set_mode(page, "assemble")
    page.click("[data-testid=pin]")
    fill(page, "source", "Tell me about the lamp.")
    diff = page.inner_text("[data-testid=diff]")
    assert "new message" in diff
    added = page.eval_on_selector_all("[data-testid=diff] ins", "els => els.map(e => [e.textContent, e.title])")
    assert any("Tell me about the lamp." in text and "new message" in title for text, title in added), added
    page.click("[data-testid=unpin]")
    assert "Pin a result" in page.inner_text("[data-testid=diff]")


def test_the_diff_of_a_changed_prompt_names_the_prompt(page: Any) -> None:
    set_mode(page, "assemble")
    page.click("[data-testid=pin]")
    text = page.input_value("[data-testid=inputs]").replace("keep replies under 150 words", "keep replies short")
    fill(page, "inputs", text)
    removed = page.eval_on_selector_all("[data-testid=diff] del", "els => els.map(e => [e.textContent, e.title])")
    added = page.eval_on_selector_all("[data-testid=diff] ins", "els => els.map(e => [e.textContent, e.title])")
    assert any("150" in t and "preset prompt main" in title for t, title in removed), removed
    assert any("short" in t and "preset prompt main" in title for t, title in added), added


def test_save_to_and_load_from_the_library(page: Any, service: RunningService) -> None:
    page.fill("[data-testid=lib-id]", "greeting")
    page.fill("[data-testid=source]", "Hello {{user}}")
    page.click("[data-testid=lib-save]")
    wait_lib(page, "Saved")
    assert "templates/greeting" in page.inner_text("[data-testid=lib-status]")
    assert service.client is not None
    assert service.client.get("/v1/library/templates/greeting").json()["data"] == "Hello {{user}}"
    page.fill("[data-testid=source]", "something else")
    page.click("[data-testid=lib-load]")
    wait_lib(page, "Loaded")
    assert page.input_value("[data-testid=source]") == "Hello {{user}}"
    # an invalid asset is refused with the importer's code
    page.select_option("[data-testid=lib-target]", "inputs")
    page.select_option("[data-testid=lib-kind]", "cards")
    page.fill("[data-testid=lib-id]", "broken")
    page.click("[data-testid=lib-save]")
    wait_lib(page, "Not saved")


def test_an_assembled_request_can_use_library_refs_and_be_exported(page: Any, service: RunningService,
                                                                   tmp_path: Path) -> None:
    set_mode(page, "assemble")
    request = json.loads(page.input_value("[data-testid=inputs]"))
    assert service.client is not None
    assert service.client.put("/v1/library/cards/mira", json=request["card"]).status_code in (200, 201)
    request["card"] = {"ref": "cards/mira"}
    fill(page, "inputs", json.dumps(request, indent=2))
    assert "Write Mira's next reply" in page.inner_text("[data-testid=output]")
    with page.expect_download() as info:
        page.click("[data-testid=export]")
    path = tmp_path / "export.json"
    info.value.save_as(path)
    exported = json.loads(path.read_text())
    direct = service.client.post("/v1/assemble", json=request).json()
    assert exported == direct["body"]
    assert httpx.get(service.base + "/v1/library/cards").status_code == 401  # the page never made the API public


def _png_card(card: dict[str, Any]) -> bytes:
    """A 1x1 PNG carrying ``card`` as SillyTavern writes it: base64 JSON in a ``chara`` text chunk."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    text = base64.b64encode(json.dumps(card).encode("utf-8"))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"tEXt", b"chara\x00" + text) + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b""))


def test_opened_files_fill_the_request_a_png_card_included(page: Any, tmp_path: Path) -> None:
    """Issue 28: a file opened (or dropped) goes where it belongs: a PNG card read in the page into the request's
    card, a preset into its preset, a book appended to its books."""
    set_mode(page, "assemble")
    assert page.input_value("[data-testid=lib-target]") == "inputs"
    card = tmp_path / "nora.png"
    card.write_bytes(_png_card({"spec": "chara_card_v2", "spec_version": "2.0",
                                "data": {"name": "Nora", "description": "Nora mends nets by the harbour."}}))
    before = runs(page)
    page.set_input_files("[data-testid=open-file]", str(card))
    wait_runs(page, before + 1)
    assert "Opened nora.png as the request's card." in page.inner_text("[data-testid=lib-status]")
    assert json.loads(page.input_value("[data-testid=inputs]"))["card"]["data"]["name"] == "Nora"
    assert "Nora mends nets by the harbour." in page.inner_text("[data-testid=output]")
    book = tmp_path / "harbour.json"
    book.write_text(json.dumps({"name": "Harbour", "entries": {"0": {"uid": 0, "key": [], "constant": True,
                                                                     "content": "The harbour bell rings at dusk."}}}))
    before = runs(page)
    page.set_input_files("[data-testid=open-file]", str(book))
    wait_runs(page, before + 1)
    request = json.loads(page.input_value("[data-testid=inputs]"))
    assert request["books"][-1]["name"] == "Harbour" and len(request["books"]) >= 2
    assert "The harbour bell rings at dusk." in page.inner_text("[data-testid=output]")
    page.select_option("[data-testid=lib-target]", "source")
    text = tmp_path / "notes.txt"
    text.write_text("Plain notes", encoding="utf-8")
    page.set_input_files("[data-testid=open-file]", str(text))
    deadline = time.monotonic() + 20
    while page.input_value("[data-testid=source]") != "Plain notes" and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert page.input_value("[data-testid=source]") == "Plain notes"


def test_assemble_saves_a_request_part_and_picks_it_back_as_a_ref(page: Any, service: RunningService) -> None:
    set_mode(page, "assemble")
    assert page.input_value("[data-testid=lib-target]") == "inputs"
    page.select_option("[data-testid=lib-kind]", "cards")
    page.fill("[data-testid=lib-id]", "mira-card")
    page.click("[data-testid=lib-save]")
    wait_lib(page, "Saved")
    assert service.client is not None
    stored = service.client.get("/v1/library/cards/mira-card").json()["data"]
    assert stored == json.loads(page.input_value("[data-testid=inputs]"))["card"]
    before = runs(page)
    page.click("[data-testid=lib-load]")
    wait_lib(page, "ref")
    wait_runs(page, before + 1)
    assert json.loads(page.input_value("[data-testid=inputs]"))["card"] == {"ref": "cards/mira-card"}
    assert "refs cards/mira-card@1" in page.inner_text("[data-testid=stats]")
    assert "Mira keeps the lighthouse" in page.inner_text("[data-testid=output]")


def test_the_budget_used_is_shown(page: Any, service: RunningService) -> None:
    set_mode(page, "assemble")
    assert "budget: everything fits" in page.inner_text("[data-testid=stats]")
    request = json.loads(page.input_value("[data-testid=inputs]"))
    request["budget"] = {"max_context": 400, "max_tokens": 100}
    fill(page, "inputs", json.dumps(request, indent=2))
    assert service.client is not None
    budget = service.client.post("/v1/assemble", json=request).json()["budget"]
    assert f"budget {budget['used']} of 300 tokens (o200k" in page.inner_text("[data-testid=stats]")


# -- text completion ----------------------------------------------------------------------------


CHATML = {"input_sequence": "<|im_start|>user", "output_sequence": "<|im_start|>assistant",
          "system_sequence": "<|im_start|>system", "stop_sequence": "<|im_end|>", "input_suffix": "<|im_end|>\n",
          "output_suffix": "<|im_end|>\n", "system_suffix": "<|im_end|>\n", "wrap": True}


def test_assemble_shows_a_text_completion_prompt_by_source_and_its_stop_strings(page: Any,
                                                                                service: RunningService) -> None:
    set_mode(page, "assemble")
    request = json.loads(page.input_value("[data-testid=inputs]"))
    del request["preset"]
    request["text_completion"] = {"instruct": CHATML, "sysprompt": None, "context": {
        "story_string": "<|im_start|>system\n{{#if description}}{{description}}\n{{/if}}{{#if persona}}{{persona}}\n"
                        "{{/if}}<|im_end|>", "chat_start": ""}}
    fill(page, "inputs", json.dumps(request, indent=2))
    assert service.client is not None
    expected = service.client.post("/v1/assemble", json=request).json()
    blocks = page.locator("[data-testid=output] .block")
    assert blocks.count() == 2
    title = blocks.nth(0).locator(".block-title").evaluate("el => el.textContent")
    assert title == "text-completion prompt · instruct inline, context inline, sysprompt off"
    # the prompt is the service's, byte for byte, in pieces that each name their source
    shown = blocks.nth(0).locator(".block-text").evaluate("el => el.textContent")
    assert shown == expected["prompt"]
    assert "Ash is a courier who missed the last ferry." in blocks.nth(0).locator(".piece-story").inner_text()
    assert "Keep the scene cosy" in blocks.nth(0).locator(".piece-author_note").inner_text()
    message = blocks.nth(0).locator(".piece-history", has_text="Is the storm going to last?")
    message.hover()
    assert "chat message 1" in page.inner_text("[data-testid=provenance]")
    assert highlighted(page, "inputs") == json.dumps(request["chat"]["messages"][1]["content"])
    blocks.nth(0).locator(".piece-literal").last.hover()
    assert "last prompt line" in page.inner_text("[data-testid=provenance]")
    # then the stop strings, in SillyTavern's order, written as JSON strings
    stops = blocks.nth(1).locator(".piece-stop").evaluate_all("els => els.map(e => e.textContent.trim())")
    assert stops == [json.dumps(s) for s in expected["stop"]] and json.dumps("\n<|im_end|>") in stops
    title = blocks.nth(1).locator(".block-title").evaluate("el => el.textContent")
    assert title == f"stop strings ({len(expected['stop'])})"

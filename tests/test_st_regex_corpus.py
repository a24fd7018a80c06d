"""The corpus proof: every shared preset and card with prompt-only regex scripts strips what its scripts target.

For each corpus asset whose enabled scripts are ``promptOnly`` (status bars, variable updates, summaries,
HTML panels, thinking blocks...), a chat holds texts written from those scripts' own patterns, each at a
depth the script reaches and marked with a unique word. Assembled with default options, the request
must not contain any of the marked texts; the same request with the asset's scripts disallowed
(``extensions.regex.preset_scripts`` / ``card_scripts`` false) must contain every one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tavernbox import assemble_request

SHARED = Path(os.environ.get("TAVERNBOX_SHARED", Path(__file__).resolve().parents[2] / "shared"))
CORPUS = SHARED / "corpora"
UPDATE = "<UpdateVariable>_.set('gold', 7);{m}</UpdateVariable>"
STATUS = "story <StatusPlaceHolderImpl/>"

#: asset -> [(depth, text, marker)]: AI messages at odd depths, the user's at even ones (0 is the last)
SAMPLES: dict[str, list[tuple[int, str, str]]] = {
    "cards/chien-quoc-1.vi.v3.json": [(7, UPDATE.format(m="UPD7"), "UPD7"), (1, "<Analysis>ANA1</Analysis> story",
                                       "ANA1"), (3, STATUS, "StatusPlaceHolderImpl")],
    "cards/de-quoc-la-ma-than-thanh.vi.v3.json": [(7, UPDATE.format(m="UPD7"), "UPD7"),
                                                  (1, "<Analysis>ANA1</Analysis> story", "ANA1"),
                                                  (3, STATUS, "StatusPlaceHolderImpl")],
    "cards/zhanguo.v3.json": [(7, UPDATE.format(m="UPD7"), "UPD7"), (1, "<Analysis>ANA1</Analysis> story", "ANA1"),
                              (3, STATUS, "StatusPlaceHolderImpl")],
    "cards/landlord-simulator-z5.20.v3.json": [(3, STATUS, "StatusPlaceHolderImpl"),
                                               (2, "<update>UPD2</update> hi", "UPD2"),
                                               (5, "<UpdateVariable>UPD5</UpdateVariable>", "UPD5")],
    "cards/lide-ai.v3.json": [(1, STATUS, "StatusPlaceHolderImpl"),
                              (3, "<VariableUpdateImpl>VUI3</VariableUpdateImpl>", "VUI3")],
    "cards/mvu-qingkong-li-initvar-variant.v3.json": [(1, UPDATE.format(m="UPD1"), "UPD1"),
                                                      (3, STATUS, "StatusPlaceHolderImpl")],
    "cards/mvu-qingkong-li.v3.json": [(1, UPDATE.format(m="UPD1"), "UPD1"),
                                      (3, "story <summary>SUM3</summary> tail", "SUM3"),
                                      (13, "OLD13 story <summary>sum13</summary> OLDTAIL13", "OLD13"),
                                      (5, STATUS, "StatusPlaceHolderImpl")],
    "presets/hoxilo-it-takes-two-v5.2.vi.json": [(1, "<math>MATH1</math>", "MATH1"), (3, "<!-- NOTE3 -->", "NOTE3"),
                                                 (5, "<htm1fenge>HTM5</htm1fenge>", "HTM5"),
                                                 (7, "<Q>QWF7</WF>", "QWF7")],
    "presets/minh-nguyet-thu-thanh-viet-card-2.3.0.vi.json": [(1, "<recap>RECAP1</recap> story", "RECAP1"),
                                                              (3, "<safe>SAFE3</safe> story", "SAFE3")],
    "presets/nemo-atelier-2.1.json": [(7, "<!-- HTML_START -->HTML7<!-- HTML_END -->", "HTML7"),
                                      (1, "<think>THINK1</think>reply", "THINK1")],
    "presets/nemo-engine-v10.json": [(7, "<!-- HTML_START -->HTML7<!-- HTML_END -->", "HTML7"),
                                     (1, "<think>THINK1</think>reply", "THINK1"),
                                     (9, "<vexnote>VEX9</vexnote> reply", "VEX9"),
                                     (11, "<st-tracker-mini>TRK11</st-tracker-mini> reply", "TRK11")],
    "presets/prolix-lucid-loom-v3.2.json": [(13, "<loomledger>LEDGER13</loomledger> story", "LEDGER13"),
                                            (12, "<lumiaooc>OOC12</lumiaooc> hi", "OOC12")],
    "presets/tawa-delta.vi.json": [(1, "<ink>INK1</ink> reply", "INK1"), (5, "<calendar_widget>CAL5</calendar_widget>",
                                                                         "CAL5"),
                                   (3, "<safe>SAFE3</safe> story", "SAFE3"), (2, "<ink>INK2</ink> hi", "INK2")],
    "presets/yinyue-zhuwang-v2.0-avarsiskull.json": [(7, "<content>CONTENT7</content>", "CONTENT7"),
                                                     (1, "<raven>RAVEN1</raven> reply", "RAVEN1"),
                                                     (3, "<Options>OPT3</Options> reply", "OPT3"),
                                                     (2, "<end>END2</end> hi", "END2"),
                                                     (9, "<time>TIME9</time> reply", "TIME9")],
}


def _load(rel: str) -> Any:
    return json.loads((CORPUS / rel).read_text(encoding="utf-8-sig"))


def _prompt_only_assets() -> set[str]:
    found = set()
    for kind in ("presets", "cards"):
        for path in sorted((CORPUS / kind).glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8-sig"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            base = data.get("data") if kind == "cards" and isinstance(data.get("data"), dict) else data
            scripts = ((base.get("extensions") or {}).get("regex_scripts") or []) if isinstance(base, dict) else []
            if any(isinstance(s, dict) and s.get("promptOnly") and not s.get("disabled") for s in scripts):
                found.add(f"{kind}/{path.name}")
    return found


def _chat(samples: list[tuple[int, str, str]]) -> list[dict[str, Any]]:
    deepest = max(depth for depth, _, _ in samples) + 2
    texts = {depth: text for depth, text, _ in samples}
    out = []
    for depth in range(deepest, -1, -1):
        role = "assistant" if depth % 2 else "user"
        out.append({"role": role, "content": texts.get(depth, f"plain message at depth {depth}.")})
    return out


def _request(asset: str, allowed: bool) -> dict[str, Any]:
    is_card = asset.startswith("cards/")
    card = str(CORPUS / asset) if is_card else str(CORPUS / "cards" / "st-default-seraphina.v2.json")
    preset = str(CORPUS / "presets" / "st-default-openai.json") if is_card else str(CORPUS / asset)
    return {"preset": preset, "card": card, "chat": {"messages": _chat(SAMPLES[asset])},
            "user": {"name": "Ash"}, "budget": {"max_context": 1_000_000, "max_tokens": 300},
            "extensions": {"regex": {"card_scripts": allowed or not is_card, "preset_scripts": allowed or is_card}}}


@pytest.fixture(scope="module")
def corpus() -> Path:
    if not CORPUS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing at {CORPUS}")
        pytest.skip("the shared corpus (../shared/corpora) is not here")
    return CORPUS


def test_every_corpus_asset_with_prompt_only_scripts_has_samples(corpus: Path) -> None:
    assert _prompt_only_assets() == set(SAMPLES)


@pytest.mark.parametrize("asset", sorted(SAMPLES))
def test_the_scripts_strip_what_they_target_and_only_when_allowed(asset: str, corpus: Path) -> None:
    allowed = "\n".join(m["content"] for m in assemble_request(_request(asset, True)).messages)
    declined = "\n".join(m["content"] for m in assemble_request(_request(asset, False)).messages)
    markers = [marker for _, _, marker in SAMPLES[asset]]
    assert [m for m in markers if m in allowed] == []
    assert [m for m in markers if m not in declined] == []

"""ST-Prompt-Template at generation (issue 26) against its speed targets, each a ratio measured in one run.

- ``assembly``: the warm assembly of ``zhanguo.v3.json`` and of ``de-quoc-la-ma-than-thanh.vi.v3.json`` (their
  embedded books, a chat whose last message carries the card's initial variables as ``stat_data``, a 2,000,000-token
  context as Tavern Helper sets it) with the extensions on, against the same request with
  ``extensions.prompt_template.enabled: false`` (target <= 3x). Median wall time of ``REPEAT`` assemblies after
  two warm-up ones, the two sides interleaved.
- ``marginal``: the cost of one more template in a request (the VM time of a request with ``N + M`` copies of a
  corpus template minus that of ``N`` copies, divided by ``M``) against evaluating the same compiled template in
  an existing bare context (a VM where its function is already compiled and is called again, with a minimal
  ``getvar``/``_``), target <= 2x. Both are the sandbox's own CPU figures (``usage.time_ms``), medians of
  ``REPEAT`` runs. ``ratio_with_compile`` compares it with compiling the template's JavaScript and calling it in
  the bare context: a fresh VM per request compiles every template it runs, which a warm bare context does not.

Run: ``python benchmarks/bench_prompt_template.py [REPEAT] [--json]`` (default 9).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
CARDS = {"zhanguo": ("zhanguo.v3.json", "[initvar]变量初始化勿开"),
         "de-quoc": ("de-quoc-la-ma-than-thanh.vi.v3.json", "[initvar]Khởi tạo biến đừng mở")}
QINGKONG = "mvu-qingkong-li.v3.json"
ASSEMBLY_TARGET_X = 3.0
MARGINAL_TARGET_X = 2.0


def card_request(card_file: str, initvar: str, *, templates: bool) -> dict[str, Any]:
    """A request a Tavern Helper user of the card sends: its book, the initial variables as the last message's
    stat_data, Tavern Helper's forced context and world-info settings."""
    import yaml

    card = json.loads((CORPORA / "cards" / card_file).read_text(encoding="utf-8"))
    entries = card["data"]["character_book"]["entries"]
    stat = yaml.safe_load(next(e["content"] for e in entries if e.get("comment") == initvar))
    greeting = card["data"].get("first_mes") or "..."
    return {
        "preset": str(CORPORA / "presets" / "st-default-openai.json"),
        "card": card,
        "chat": {"messages": [{"role": "assistant", "content": greeting},
                              {"role": "user", "content": "Hello."},
                              {"role": "assistant", "content": "...", "variables": {"stat_data": stat}}]},
        "user": {"name": "Ash"},
        "budget": {"max_context": 2000000},
        "world_info": {"world_info_depth": 2, "world_info_budget": 100, "world_info_include_names": False,
                       "world_info_match_whole_words": False},
        "extensions": {"prompt_template": {"enabled": templates}},
    }


def bench_assembly(repeat: int) -> dict[str, Any]:
    import tavernbox

    out: dict[str, Any] = {}
    for name, (card_file, initvar) in CARDS.items():
        on, off = card_request(card_file, initvar, templates=True), card_request(card_file, initvar, templates=False)
        for request in (on, off, on, off):
            tavernbox.assemble_request(request)
        times: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(repeat):
            for side, request in (("on", on), ("off", off)):
                t0 = time.perf_counter()
                tavernbox.assemble_request(request)
                times[side].append((time.perf_counter() - t0) * 1000)
        on_ms, off_ms = statistics.median(times["on"]), statistics.median(times["off"])
        out[name] = {"on_ms": round(on_ms, 2), "off_ms": round(off_ms, 2), "ratio": round(on_ms / off_ms, 2),
                     "target": ASSEMBLY_TARGET_X}
    return out


def _corpus_template() -> tuple[str, dict[str, Any]]:
    """qingkong-li's ``relation_level`` entry (getvar, ``_.has``, branches) and the card's initial variables."""
    card = json.loads((CORPORA / "cards" / QINGKONG).read_text(encoding="utf-8"))
    entries = card["data"]["character_book"]["entries"]
    source = next(e["content"] for e in entries if "<%" in e["content"])
    stat = json.loads(next(e["content"] for e in entries if (e.get("comment") or "").startswith("[InitVar]")))
    return source, stat


_BARE = """(async function (__tb) {
  const input = __tb.locals.variables;
  const vars = input.vars;
  const get = (o, p) => String(p).split('.').reduce((v, k) => (v == null ? undefined : v[k]), o);
  const api = { getvar: (k) => get(vars, k), _: { has: (o, p) => get(o, p.replace(/\\.\\[(\\d+)\\]/g, '.$1')) !== undefined,
                get: get } };
  const fn = (0, eval)(input.source);
  const tb = { api: api, locals: {}, escape: (v) => v, append: () => {}, finish: () => {} };
  await fn(tb);
  // compile: each call compiles its own copy first (what a template of a new request costs in any fresh VM)
  for (let i = 0; i < input.calls; i++) await (input.compile ? (0, eval)(input.source + String.fromCharCode(10) + '//' + i) : fn)(tb);
  __tb.append(String(input.calls));
  __tb.finish();
})"""


def bench_marginal(repeat: int, base: int = 4, more: int = 16) -> dict[str, Any]:
    from tavernbox.ejs.st_prompt_template import TemplateText, evaluate_prompt_templates
    from tavernbox.ejs.render import compile_source
    from tavernbox.macros.st_variables import StVariables
    from tavernbox.sandbox import Limits, run_program

    source, stat = _corpus_template()
    variables = StVariables.build(messages=[{"stat_data": stat}])

    def request_ms(n: int) -> float:
        texts = [TemplateText(source, f"t{i}") for i in range(n)]
        result = evaluate_prompt_templates(texts, variables=variables)
        assert result.usage is not None and not result.warnings, result.warnings
        return result.usage.time_ms

    program = compile_source(source).program
    limits = Limits(time_ms=10_000, job_steps=1_000_000)

    def bare_ms(calls: int, compile_each: bool = False) -> float:
        payload = json.dumps({"vars": {"stat_data": stat}, "source": program, "calls": calls,
                              "compile": compile_each})
        return run_program(_BARE, payload, limits=limits).usage.time_ms

    marginal, floor, compiled_floor = [], [], []
    for _ in range(repeat):
        marginal.append((request_ms(base + more) - request_ms(base)) / more)
        floor.append((bare_ms(1 + more) - bare_ms(1)) / more)
        compiled_floor.append((bare_ms(1 + more, True) - bare_ms(1, True)) / more)
    m, f, c = statistics.median(marginal), statistics.median(floor), statistics.median(compiled_floor)
    return {"template_chars": len(source), "marginal_ms": round(m, 4), "bare_call_ms": round(f, 4),
            "ratio": round(m / f, 2) if f > 0 else None, "target": MARGINAL_TARGET_X,
            # the same against compiling the template's JavaScript and calling it in the bare context
            "bare_compile_and_call_ms": round(c, 4), "ratio_with_compile": round(m / c, 2) if c > 0 else None}


def main(argv: list[str]) -> int:
    repeat = int(next((a for a in argv if a.isdigit()), "9"))
    report = {"marginal": bench_marginal(repeat)}
    try:
        report["assembly"] = bench_assembly(repeat)
    except Exception as exc:  # the request fields arrive with the stage integration
        report["assembly"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    if "--json" in argv:
        print(json.dumps(report, ensure_ascii=False, indent=1))
    else:
        for key, value in report.items():
            print(key, json.dumps(value, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

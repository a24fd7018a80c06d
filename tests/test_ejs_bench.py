"""The EJS benchmark keeps running and its two templates stay equivalent (no timing assertions)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_ejs.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ejs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ejs"] = module
    spec.loader.exec_module(module)
    return module


def test_bench_reports_every_figure_and_equal_outputs() -> None:
    figures = _load().measure(iterations=1, repeats=1)
    assert figures["outputs_equal"] is True
    assert 2500 <= figures["template_bytes"] <= 3500  # "a realistic ~3 KB template"
    for key in ("cached_ratio", "cold_ratio", "batch_ratio"):
        assert figures[key] > 0


@pytest.mark.parametrize("seed", [0, 1, 6])
def test_templates_agree_for_other_variables(seed: int) -> None:
    from jinja2.sandbox import SandboxedEnvironment

    from tavernbox import render_template

    bench = _load()
    variables = bench.make_variables(seed)
    jinja = SandboxedEnvironment(autoescape=True, keep_trailing_newline=True).from_string(bench.JINJA_TEMPLATE)
    assert render_template(bench.EJS_TEMPLATE, variables).text == jinja.render(variables=variables)


def test_bench_rejects_zero_iterations(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _load().main(["--iterations", "0"])


def test_instruction_count_script_runs_every_kind_it_counts() -> None:
    """benchmarks/instructions_ejs.py's inner runs (what callgrind counts) do their work and succeed:
    the worker kind asserts that each render it drives finished with text."""
    _load()
    path = SCRIPT.with_name("instructions_ejs.py")
    spec = importlib.util.spec_from_file_location("instructions_ejs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for kind in module.KINDS:
        module._inner(kind, 1)
    with pytest.raises(SystemExit):
        module.main(["--renders", "0"])

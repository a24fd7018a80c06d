"""Issue 29: the EJS fuzz target draws from ``EjsCaseGenerator`` and checks cases in batches.

What must hold: the generator is seeded and draws the grammar of ``ejs_strategies`` (every
construct, within the same bounds, inputs no smaller than Hypothesis draws); the batch check
gives exactly the verdicts of the one-at-a-time check, including on a planted bug; a finding of
the fast path is shrunk on its text and keeps its variables. ``benchmarks/bench_fuzz.py``
measures the rate (target: 400 EJS inputs per wall second on one job).
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from tavernbox.cli import fuzz
from tavernbox.errors import TemplateError
from tavernbox.testing import ejs_strategies
from tavernbox.testing.ejs_generator import CONSTRUCTS, EjsCaseGenerator, profile


def cases(seed: int, n: int) -> list[tuple[str, dict[str, Any]]]:
    gen = EjsCaseGenerator(random.Random(seed))
    return [gen.case() for _ in range(n)]


def test_the_generator_is_seeded() -> None:
    assert cases(4, 20) == cases(4, 20)
    assert cases(4, 20) != cases(5, 20)


def test_the_generator_draws_every_construct_and_the_strategies_tables() -> None:
    drawn = cases(1, 600)
    found = profile(t for t, _ in drawn)["constructs"]
    for name in CONSTRUCTS:
        assert found[name]["share"] > 0.02, name  # each construct in at least 2% of the templates
    texts = "".join(t for t, _ in drawn)
    for failure in ejs_strategies.FAILURES:
        assert failure in texts, failure
    for literal in ejs_strategies.LITERAL_TEXT:
        assert literal in texts, literal
    soup = sum(1 for t, _ in drawn if "<%" in t and "variables" not in t and "print(2)" in t)
    assert soup > 0  # tag soup draws happen


def test_the_variables_have_the_strategies_keys_and_value_kinds() -> None:
    seen_kinds: set[str] = set()
    for _, variables in cases(2, 300):
        assert set(variables) == {"name", "n", "items", "obj", "flag", "nothing"}
        assert variables["nothing"] is None and isinstance(variables["flag"], bool)
        assert len(variables["items"]) <= 4 and len(variables["obj"]) <= 3 and len(variables["name"]) <= 10
        assert set(variables["obj"]) <= set(ejs_strategies.OBJ_KEYS)
        seen_kinds.update(type(v).__name__ for v in variables["items"])
    assert seen_kinds == {"int", "float", "bool", "NoneType", "str"}


def test_nesting_stays_within_the_strategies_bounds() -> None:
    for template, _ in cases(3, 400):
        assert "part2" not in template and "it2" not in template  # blocks nest at most two deep
        assert template.count("await Promise.resolve(await Promise.resolve(await") == 0  # two wrappers at most


def test_generated_inputs_are_not_smaller_than_hypothesis_draws() -> None:
    """Against the templates a campaign drew through Hypothesis before (``find``, seeded, as
    ``_hypothesis_batch`` draws them): no shorter, and no fewer constructs, on average."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    drawn: list[str] = []

    def note(template: str) -> bool:
        drawn.append(template)
        return False

    with pytest.raises(NoSuchExample):
        find(ejs_strategies.ejs_templates(), note, random=random.Random(1),
             settings=settings(max_examples=300, database=None, deadline=None, phases=(Phase.generate,),
                               suppress_health_check=list(HealthCheck)))
    ours = profile(t for t, _ in cases(0, 1000))
    theirs = profile(drawn)
    assert ours["chars"]["mean"] >= 0.8 * theirs["chars"]["mean"]

    def constructs(found: dict[str, Any]) -> float:
        return sum(c["per_template"] for c in found["constructs"].values())

    assert constructs(ours) >= 0.8 * constructs(theirs)


@pytest.fixture(scope="module")
def ejs_target() -> fuzz.FuzzTarget:
    return fuzz.ejs_target()


def test_the_batch_check_gives_the_plain_checks_verdicts(ejs_target: fuzz.FuzzTarget) -> None:
    assert ejs_target.check_many is not None
    sample = cases(7, 60)
    assert ejs_target.check_many(sample) == [ejs_target.check(case) for case in sample]


def test_a_planted_bug_is_found_alike_by_both_checks(ejs_target: fuzz.FuzzTarget,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox crash on one template, and a renderer that mutates its variables: the batch
    places each on the case that has it, with the plain check's signature."""
    import tavernbox.ejs as ejs_package
    from tavernbox.ejs import render as render_module

    real_prepare = render_module._prepare

    def planted(source: str, variables: Any, limits: Any) -> Any:
        if "PLANTED-CRASH" in source:
            raise TemplateError("the sandbox worker died", code="TEMPLATE_SANDBOX_CRASHED")
        if "PLANTED-BUG" in source:
            raise ZeroDivisionError("planted")
        if "PLANTED-MUTATION" in source and isinstance(variables, dict):
            variables["name"] = "changed"
        return real_prepare(source, variables, limits)

    monkeypatch.setattr(render_module, "_prepare", planted)
    assert ejs_package.render_templates is render_module.render_templates
    sample = cases(8, 12)
    sample[3] = ("a <%= 1 %> PLANTED-CRASH", sample[3][1])
    sample[6] = ("<%= 2 %> PLANTED-BUG", sample[6][1])
    sample[9] = ("<%= 3 %> PLANTED-MUTATION", sample[9][1])
    fresh = copy.deepcopy(sample)  # the planted mutation changes the variables it is given
    assert ejs_target.check_many is not None
    batch = ejs_target.check_many(sample)
    plain = [ejs_target.check(case) for case in fresh]
    assert batch == plain
    assert batch[3] is not None and batch[3].signature == "code:TEMPLATE_SANDBOX_CRASHED"
    assert batch[6] is not None and batch[6].signature.startswith("crash:ZeroDivisionError:")
    assert batch[9] is not None and batch[9].signature == "invariant:variables-mutated"
    assert [i for i, p in enumerate(batch) if p is not None] == [3, 6, 9]


def test_a_fast_finding_is_shrunk_on_its_text_and_keeps_its_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuzz, "HYPOTHESIS_SHARE", 0.0)

    def check(case: tuple[str, dict[str, Any]]) -> fuzz.Problem | None:
        template, variables = case
        assert set(variables) == {"name", "n", "items", "obj", "flag", "nothing"}
        if "for (" in template and "print(" in template:
            return fuzz.Problem("crash", "crash:planted", "for and print")
        return None

    target = fuzz.FuzzTarget("ejs", ejs_strategies.ejs_cases(), check, text_of=lambda case: case[0],
                             fast=lambda rng: EjsCaseGenerator(rng).case,
                             with_text=lambda case, text: (text, case[1]),
                             check_many=lambda batch: [check(case) for case in batch])
    result = fuzz.run_campaign(target, seconds=1.0, seed=3)
    assert [f.problem.signature for f in result.findings] == ["crash:planted"]
    template, variables = result.findings[0].example
    assert "for (" in template and "print(" in template and len(template) <= len("for (print(") + 2
    assert isinstance(variables, dict)

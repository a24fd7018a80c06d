"""``tavernbox fuzz``: a time-boxed fuzzing campaign against the macro engine or the EJS renderer.

Inputs come from the exported Hypothesis strategies (``macro_templates()``, ``ejs_cases()``) and,
with ``--corpus``, from mutations of real files (splices of generated fragments, deletions,
duplications, edge characters). Each input runs through the engine and is checked:

* **crash**: an exception other than a ``TemplateError`` (or one with an internal code);
* **overrun**: a render slower than its time bound, or output past the engine's limit;
* **invariant**: output that is not a ``str``, a mutated input, a diagnostic pointing outside the
  text, an undocumented error code, or (macros) a different result for the same seed.

Every finding is shrunk by Hypothesis to a minimal input and saved in ``--out`` as
``<target>-<kind>-<hash>.json`` (what failed and how) beside ``.input`` (the raw text, ready to
feed to ``tavernbox macros`` / ``tavernbox render``). Exit status: 0 when the campaign is clean,
1 when it found something, 2 for a usage problem (``FUZZ_TARGET_UNAVAILABLE``...).
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..errors import TemplateError
from .output import fail, guarded, stderr

__all__ = ["Finding", "FuzzTarget", "command", "load_corpus", "macro_target", "ejs_target", "run_campaign"]

#: Error codes the macro engine may raise on purpose: its hostile-input limits.
MACRO_LIMIT_CODES = frozenset(
    {"MACRO_INPUT_LIMIT", "MACRO_OUTPUT_LIMIT", "MACRO_ROLL_LIMIT", "MACRO_REPEAT_LIMIT", "MACRO_NESTING_LIMIT"}
)
#: Error codes that mean the EJS renderer itself failed rather than the template.
EJS_BUG_CODES = frozenset({"INTERNAL_ERROR", "TEMPLATE_SANDBOX_CRASHED"})
#: Corpus files larger than this are skipped (mutating megabytes per example would be slow).
MAX_CORPUS_FILE_BYTES = 1 << 20
_EDGE_PIECES = ("{{", "}}", "{", "}", ":", "::", "|", "\\", "!", "#", "/", ".", "$", "<%", "%>", "<", ">", "\n")


@dataclass(frozen=True)
class Problem:
    """What went wrong with one input: the kind, a signature naming the bug, a message."""

    kind: str  # "crash" | "overrun" | "invariant"
    signature: str
    message: str


@dataclass(frozen=True)
class Finding:
    """A shrunk input that fails, with its problem."""

    target: str
    problem: Problem
    example: Any

    def file_stem(self) -> str:
        digest = hashlib.sha1(self.problem.signature.encode("utf-8")).hexdigest()[:12]
        return f"{self.target}-{self.problem.kind}-{digest}"


@dataclass
class FuzzTarget:
    """One thing to fuzz: how to draw inputs, how to run and check one, how to save one."""

    name: str
    strategy: Any  # a Hypothesis SearchStrategy of examples
    check: Callable[[Any], Problem | None]
    text_of: Callable[[Any], str]  # the raw text of an example (saved as ``.input``)
    extra_of: Callable[[Any], dict[str, Any]] = field(default=lambda example: {})
    mutate: Callable[[Any], Any] | None = None  # wraps a text strategy into an example strategy


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost tavernbox frame of a traceback (names the bug)."""
    tb = exc.__traceback__
    spot = "?"
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "tavernbox" in filename or "/engine/" in filename or "/sandbox/" in filename:
            spot = f"{Path(filename).name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return spot


def _crash(exc: BaseException) -> Problem:
    name = type(exc).__name__
    return Problem("crash", f"crash:{name}:{_where(exc)}", f"{name}: {exc}"[:500])


def macro_target(*, time_bound: float = 2.0) -> FuzzTarget:
    """Fuzz ``tavernbox.expand_macros`` with ``macro_templates()``."""
    try:
        from ..macros import expand_macros
        from ..macros.evaluator import MAX_OUTPUT_CHARS
        from ..testing.macro_strategies import macro_templates
    except ImportError as exc:
        raise TemplateError(f"the macro target is unavailable: {exc}", code="FUZZ_TARGET_UNAVAILABLE") from None

    context: dict[str, Any] = {
        "user": "User",
        "char": "Character",
        "character": {"description": "DESC {{user}}", "first_mes": "Hi!", "alternate_greetings": ["A1"]},
        "chat": [{"role": "user", "name": "User", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "chat_id_hash": 123456,
        "variables": {"local": {"x": "5", "list": "[1,2]"}, "global": {"flag": "true"}},
        "seed": 1,
        "now": "2026-11-30T10:00:00Z",
    }

    def check(text: str) -> Problem | None:
        ctx = copy.deepcopy(context)
        started = time.perf_counter()
        try:
            result = expand_macros(text, ctx, seed=1)
        except TemplateError as exc:
            if exc.code in MACRO_LIMIT_CODES:
                return None
            return Problem("invariant", f"code:{exc.code}", f"undocumented error code {exc.code}: {exc.message}")
        except RecursionError as exc:
            return Problem("overrun", "overrun:recursion", f"RecursionError: {exc}")
        except Exception as exc:  # noqa: BLE001 - this is what we are looking for
            return _crash(exc)
        elapsed = time.perf_counter() - started
        if elapsed > time_bound:
            return Problem("overrun", "overrun:time", f"expansion took {elapsed:.2f} s (bound {time_bound} s)")
        if not isinstance(result.text, str):
            return Problem("invariant", "invariant:text-type", f"text is {type(result.text).__name__}")
        if len(result.text) > MAX_OUTPUT_CHARS:
            return Problem("overrun", "overrun:output", f"output of {len(result.text)} characters passed the limit")
        if ctx != context:
            return Problem("invariant", "invariant:context-mutated", "the context dict was mutated")
        for d in result.diagnostics:
            if d.span is not None and not 0 <= d.span.start <= d.span.end <= len(text):
                return Problem("invariant", f"invariant:span:{d.code}", f"{d.code} span {d.span} outside the text")
        again = expand_macros(text, copy.deepcopy(context), seed=1)
        if again.text != result.text or again.draws != result.draws:
            return Problem("invariant", "invariant:nondeterministic", "the same seed gave a different result")
        return None

    return FuzzTarget("macros", macro_templates(), check, text_of=lambda text: text)


def ejs_target(*, time_bound: float | None = None) -> FuzzTarget:
    """Fuzz ``tavernbox.render_template`` with ``ejs_cases()`` (template, variables)."""
    try:
        from hypothesis import strategies as st

        from ..ejs import render_template
        from ..sandbox import Limits
        from ..testing.ejs_strategies import ejs_cases, ejs_variables
    except ImportError as exc:
        raise TemplateError(f"the ejs target is unavailable: {exc}", code="FUZZ_TARGET_UNAVAILABLE") from None

    limits = Limits()
    # the render's own hard deadline, plus slack for starting a fresh sandbox worker
    bound = time_bound if time_bound is not None else limits.deadline_s + 2.0

    def check(case: tuple[str, Any]) -> Problem | None:
        source, variables = case
        before = copy.deepcopy(variables)
        started = time.perf_counter()
        try:
            result = render_template(source, variables, limits)
        except TemplateError as exc:
            if exc.code in EJS_BUG_CODES:
                return Problem("crash", f"code:{exc.code}", f"{exc.code}: {exc.message}"[:500])
            return None
        except Exception as exc:  # noqa: BLE001
            return _crash(exc)
        elapsed = time.perf_counter() - started
        if elapsed > bound:
            return Problem("overrun", "overrun:time", f"render took {elapsed:.2f} s (bound {bound:.2f} s)")
        if not isinstance(result.text, str):
            return Problem("invariant", "invariant:text-type", f"text is {type(result.text).__name__}")
        if variables != before:
            return Problem("invariant", "invariant:variables-mutated", "the variables were mutated")
        return None

    return FuzzTarget(
        "ejs",
        ejs_cases(),
        check,
        text_of=lambda case: case[0],
        extra_of=lambda case: {"variables": case[1]},
        mutate=lambda texts: st.tuples(texts, ejs_variables()),
    )


TARGETS: dict[str, Callable[[], FuzzTarget]] = {"macros": macro_target, "ejs": ejs_target}


def load_corpus(directory: Path) -> list[str]:
    """UTF-8 text files under ``directory`` (recursively, sorted; larger than 1 MiB skipped)."""
    if not directory.is_dir():
        raise TemplateError(f"--corpus {directory} is not a directory", code="INPUT_INVALID")
    texts = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        if path.stat().st_size > MAX_CORPUS_FILE_BYTES:
            continue
        try:
            texts.append(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return texts


def _mutations(texts: Sequence[str], fragments: Any) -> Any:
    """A strategy of corpus texts edited by a few random splices, deletions and duplications."""
    from hypothesis import strategies as st

    @st.composite
    def mutated(draw: st.DrawFn) -> str:
        text = draw(st.sampled_from(list(texts)))
        for _ in range(draw(st.integers(0, 4))):
            op = draw(st.sampled_from(("splice", "edge", "delete", "duplicate")))
            at = draw(st.integers(0, len(text)))
            if op == "splice":
                text = text[:at] + draw(fragments) + text[at:]
            elif op == "edge":
                text = text[:at] + draw(st.sampled_from(_EDGE_PIECES)) + text[at:]
            else:
                end = draw(st.integers(at, min(len(text), at + 200)))
                text = text[:at] + (text[at:end] * 2 if op == "duplicate" else "") + text[end:]
        return text

    return mutated()


@dataclass
class CampaignResult:
    examples: int
    seconds: float
    findings: list[Finding]


def run_campaign(
    target: FuzzTarget,
    *,
    seconds: float,
    seed: int = 0,
    corpus: Sequence[str] = (),
    batch: int = 50,
    on_progress: Callable[[int, int, float], None] | None = None,
) -> CampaignResult:
    """Draw and check inputs for ``seconds``; shrink each distinct failure with Hypothesis.

    Work goes in batches of ``batch`` examples, each seeded from ``seed`` and its batch number,
    so a campaign with the same seed and duration explores the same inputs. A failure already
    found is treated as passing afterwards, so shrinking always chases a new bug.
    """
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis import strategies as st
    from hypothesis.errors import HypothesisException, NoSuchExample

    strategy = target.strategy
    if corpus:
        texts = _mutations(corpus, _fragments_for(target))
        mutated = target.mutate(texts) if target.mutate is not None else texts
        strategy = st.one_of(strategy, mutated)

    known: set[str] = set()
    findings: list[Finding] = []
    examples = 0
    started = time.monotonic()
    deadline = started + seconds
    shrink_deadline_extra = max(5.0, seconds)

    batch_number = 0
    while time.monotonic() < deadline:
        state: dict[str, Any] = {"current": None, "best": None, "best_key": None}
        stop_at = deadline + shrink_deadline_extra

        def condition(example: Any) -> bool:
            nonlocal examples
            now = time.monotonic()
            if state["current"] is None and now >= deadline:
                return False  # out of time: let Hypothesis finish the batch quickly
            if state["current"] is not None and now >= stop_at:
                return False  # shrinking budget spent: keep the smallest failure so far
            examples += 1
            problem = target.check(example)
            if problem is None or problem.signature in known:
                return False
            if state["current"] is None:
                state["current"] = problem
            elif problem.signature != state["current"].signature:
                return False
            key = (len(target.text_of(example)), target.text_of(example))
            if state["best_key"] is None or key < state["best_key"]:
                state["best"], state["best_key"] = example, key
            return True

        rng = random.Random(f"{seed}:{batch_number}")
        batch_number += 1
        try:
            find(
                strategy,
                condition,
                settings=settings(
                    max_examples=batch,
                    database=None,
                    deadline=None,
                    phases=(Phase.generate, Phase.shrink),
                    suppress_health_check=list(HealthCheck),
                ),
                random=rng,
            )
        except NoSuchExample:
            pass
        except HypothesisException:
            pass  # e.g. a flaky timing failure: the smallest failure seen is kept below
        if state["current"] is not None:
            problem = state["current"]
            known.add(problem.signature)
            findings.append(Finding(target.name, problem, state["best"]))
        if on_progress is not None:
            on_progress(examples, len(findings), time.monotonic() - started)
    return CampaignResult(examples, time.monotonic() - started, findings)


def _fragments_for(target: FuzzTarget) -> Any:
    if target.name == "macros":
        return target.strategy
    from hypothesis import strategies as st

    from ..testing.ejs_strategies import ejs_templates

    return st.one_of(ejs_templates(), st.sampled_from(_EDGE_PIECES))


def save_finding(finding: Finding, target: FuzzTarget, out: Path) -> Path:
    """Write ``<stem>.json`` (the report) and ``<stem>.input`` (the raw text); returns the JSON path."""
    out.mkdir(parents=True, exist_ok=True)
    stem = finding.file_stem()
    text = target.text_of(finding.example)
    (out / f"{stem}.input").write_text(text, encoding="utf-8", errors="surrogatepass")
    report = {
        "target": finding.target,
        "kind": finding.problem.kind,
        "signature": finding.problem.signature,
        "message": finding.problem.message,
        "input": text,
        **target.extra_of(finding.example),
    }
    path = out / f"{stem}.json"
    path.write_text(json.dumps(report, ensure_ascii=False, indent=2, default=repr), encoding="utf-8", errors="surrogatepass")
    return path


@click.command("fuzz")
@click.option("--target", "target_name", type=click.Choice(sorted(TARGETS)), default="macros", show_default=True,
              help="What to fuzz.")
@click.option("--seconds", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Length of the campaign (shrinking a finding may add up to as long again).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the campaign (same seed, same inputs).")
@click.option("--corpus", type=click.Path(path_type=Path), default=None,
              help="Directory of real inputs to mutate alongside the generated ones.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("fuzz-findings"), show_default=True,
              help="Directory the shrunk failing inputs are written to.")
def command(target_name: str, seconds: float, seed: int, corpus: Path | None, out: Path) -> None:
    """Fuzz the macro engine or the EJS renderer; save shrunk failing inputs to --out."""

    def body() -> int:
        try:
            target = TARGETS[target_name]()
            corpus_texts = load_corpus(corpus) if corpus is not None else []
        except TemplateError as exc:  # a usage problem, not a finding: exit 2
            fail(exc, exit_code=2)
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn(f"fuzz {target_name}"),
            BarColumn(),
            TextColumn("{task.fields[examples]} inputs, {task.fields[findings]} findings"),
            TimeElapsedColumn(),
            console=stderr,
            transient=True,
        ) as progress:
            task = progress.add_task("fuzz", total=seconds, examples=0, findings=0)

            def on_progress(examples: int, found: int, elapsed: float) -> None:
                progress.update(task, completed=min(elapsed, seconds), examples=examples, findings=found)

            result = run_campaign(target, seconds=seconds, seed=seed, corpus=corpus_texts, on_progress=on_progress)
        for finding in result.findings:
            path = save_finding(finding, target, out)
            stderr.print(f"[red]{finding.problem.kind}[/] {finding.problem.signature}: {path}")
        summary = f"{target_name}: {result.examples} inputs in {result.seconds:.1f} s, {len(result.findings)} findings"
        if corpus_texts:
            summary += f" ({len(corpus_texts)} corpus files mutated)"
        click.echo(summary + (f"; saved to {out}" if result.findings else ""))
        return 1 if result.findings else 0

    code = guarded(body)
    if code:
        raise SystemExit(code)

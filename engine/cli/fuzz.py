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

import contextlib
import copy
import gc
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..errors import TemplateError
from .output import fail, guarded, stderr

__all__ = ["Finding", "FuzzTarget", "ProgressLine", "command", "default_cache_dir", "ejs_target", "load_corpus",
           "macro_target", "run_campaign", "run_parallel", "shrink_text"]

#: Error codes the macro engine may raise on purpose: its hostile-input limits.
MACRO_LIMIT_CODES = frozenset(
    {"MACRO_INPUT_LIMIT", "MACRO_OUTPUT_LIMIT", "MACRO_ROLL_LIMIT", "MACRO_REPEAT_LIMIT", "MACRO_NESTING_LIMIT"}
)
#: Error codes that mean the EJS renderer itself failed rather than the template.
EJS_BUG_CODES = frozenset({"INTERNAL_ERROR", "TEMPLATE_SANDBOX_CRASHED"})
#: The macro target re-renders one input in this many to check that a seed gives the same result.
DETERMINISM_EVERY = 8
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
    #: a fast generator of (text) examples, ``rng -> draw()`` (see :func:`run_campaign`); ``None``:
    #: every example comes from ``strategy`` through Hypothesis
    fast: Callable[[random.Random], Callable[[], Any]] | None = None
    #: the check the shrinker repeats (``None``: ``check``), when ``check`` samples its costlier parts
    recheck: Callable[[Any], Problem | None] | None = None
    #: draws one fragment to splice into corpus texts, ``rng -> draw()`` (fast path only)
    fast_fragment: Callable[[random.Random], Callable[[], str]] | None = None
    #: ``example`` with its text replaced (fast path: corpus mutations and shrinking edit the text
    #: and keep the rest, e.g. an EJS case's variables); the default: examples are texts
    with_text: Callable[[Any, str], Any] = field(default=lambda example, text: text)
    #: checks a list of examples at once, ``[check(e) for e in examples]`` in fewer round trips
    #: (fast path only); ``None``: one ``check`` each
    check_many: Callable[[list[Any]], list[Problem | None]] | None = None


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
        from ..macros import MacroContext, expand_macros
        from ..macros.evaluator import MAX_OUTPUT_CHARS
        from ..testing.macro_generator import MacroTextGenerator
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

    pristine = copy.deepcopy(context)
    ctx = copy.deepcopy(context)
    # the context read once: reading the dict cost a tenth of a check, and it never changes; one
    # input in DETERMINISM_EVERY (and every re-check) still passes the dict itself
    pristine_read = MacroContext.from_dict(copy.deepcopy(context))
    ctx_read = MacroContext.from_dict(copy.deepcopy(context))

    calls = [0]

    def check(text: str) -> Problem | None:
        """Every check, but the determinism re-render (and the context given as a dict) only for
        one input in :data:`DETERMINISM_EVERY` (it doubles the cost: the second render of a text
        builds its plans); the shrinker re-checks with :func:`full_check`."""
        calls[0] += 1
        return full_check(text, calls[0] % DETERMINISM_EVERY == 0)

    def full_check(text: str, determinism: bool = True) -> Problem | None:
        # the engine must not mutate the context: it is compared with a pristine copy after each
        # render (a dict or dataclass comparison) instead of deep-copying it before each one
        nonlocal ctx, ctx_read
        given: Any = ctx if determinism else ctx_read
        started = time.perf_counter()
        try:
            result = expand_macros(text, given, seed=1)
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
        if ctx != pristine:
            ctx = copy.deepcopy(pristine)
            return Problem("invariant", "invariant:context-mutated", "the context dict was mutated")
        if ctx_read != pristine_read:
            ctx_read = MacroContext.from_dict(copy.deepcopy(context))
            return Problem("invariant", "invariant:context-mutated", "the context was mutated")
        for d in result.diagnostics:
            if d.span is not None and not 0 <= d.span.start <= d.span.end <= len(text):
                return Problem("invariant", f"invariant:span:{d.code}", f"{d.code} span {d.span} outside the text")
        if not determinism:
            return None
        # the second render reads the context already read (a dict is read afresh each time, a
        # tenth of a render): the same seed must give the same result whichever form it was
        # given in, and this render must not mutate what it was given either
        again = expand_macros(text, ctx_read, seed=1)
        if again.text != result.text or again.draws != result.draws:
            return Problem("invariant", "invariant:nondeterministic", "the same seed gave a different result")
        if ctx_read != pristine_read:
            ctx_read = MacroContext.from_dict(copy.deepcopy(context))
            return Problem("invariant", "invariant:context-mutated", "the context was mutated")
        return None

    return FuzzTarget(
        "macros",
        macro_templates(),
        check,
        text_of=lambda text: text,
        recheck=full_check,
        fast=lambda rng: MacroTextGenerator(rng).text,
        fast_fragment=lambda rng: MacroTextGenerator(rng).fragment,
    )


def ejs_target(*, time_bound: float | None = None) -> FuzzTarget:
    """Fuzz ``tavernbox.render_template`` with ``ejs_cases()`` (template, variables)."""
    try:
        from hypothesis import strategies as st

        from ..ejs import render_template, render_templates
        from ..sandbox import Limits
        from ..testing.ejs_generator import EjsCaseGenerator
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

    def check_many(cases: list[tuple[str, Any]]) -> list[Problem | None]:
        """``[check(case) for case in cases]``, the renders sent as one batch to every worker.

        The same verdicts: a batch slower than one render's bound, or one that raised anything
        but a template's error, is checked again case by case, so that the problem (and its
        signature) is the one ``check`` finds, on the case that has it.
        """
        before = [copy.deepcopy(variables) for _, variables in cases]
        started = time.perf_counter()
        try:
            results = render_templates(cases, limits)
        except Exception:  # noqa: BLE001 - a crash: found again, and placed, by the plain path
            return [check(case) for case in cases]
        if time.perf_counter() - started > bound:
            return [check(case) for case in cases]
        problems: list[Problem | None] = []
        for (_, variables), result, copied in zip(cases, results, before):
            if isinstance(result, TemplateError):
                problem = None
                if result.code in EJS_BUG_CODES:
                    problem = Problem("crash", f"code:{result.code}", f"{result.code}: {result.message}"[:500])
            elif not isinstance(result.text, str):
                problem = Problem("invariant", "invariant:text-type", f"text is {type(result.text).__name__}")
            elif variables != copied:
                problem = Problem("invariant", "invariant:variables-mutated", "the variables were mutated")
            else:
                problem = None
            problems.append(problem)
        return problems

    return FuzzTarget(
        "ejs",
        ejs_cases(),
        check,
        text_of=lambda case: case[0],
        extra_of=lambda case: {"variables": case[1]},
        mutate=lambda texts: st.tuples(texts, ejs_variables()),
        fast=lambda rng: EjsCaseGenerator(rng).case,
        fast_fragment=lambda rng: EjsCaseGenerator(rng).fragment,
        with_text=lambda case, text: (text, case[1]),
        check_many=check_many,
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


#: share of a fast campaign's time given to Hypothesis-drawn batches (its generation explores
#: differently and replays the failures its database holds; it is ~50x slower per input)
HYPOTHESIS_SHARE = 0.02
#: fast-path inputs checked between two progress reports / time checks
_CHUNK = 128
#: allocations between two young-generation collections during a campaign (Python's default
#: is 700): a check allocates thousands of short-lived, acyclic nodes, and at the default
#: threshold the collector spent 5-8% of a macro campaign scanning them
_CAMPAIGN_GC_THRESHOLD = 20_000


@contextlib.contextmanager
def _campaign_gc() -> Iterator[None]:
    """Collect less often while a campaign runs, with what was loaded before it frozen.

    Frozen objects (modules, tables, the target's context) are never scanned again; the
    collector still runs (a reference cycle a check leaks is still reclaimed), only less often.
    Both are undone afterwards, so a host that runs a campaign in process keeps its settings.
    """
    previous = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # a host that froze objects itself keeps them frozen
    if freeze:
        gc.freeze()
    gc.set_threshold(max(previous[0], _CAMPAIGN_GC_THRESHOLD), *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        if freeze:
            gc.unfreeze()


def run_campaign(
    target: FuzzTarget,
    *,
    seconds: float,
    seed: int = 0,
    corpus: Sequence[str] = (),
    batch: int = 50,
    on_progress: Callable[[int, int, float], None] | None = None,
    database: Any = None,
) -> CampaignResult:
    """Draw and check inputs for ``seconds``; shrink each distinct failure.

    A target with a fast generator (both targets) draws most inputs from it, seeded from
    ``seed``, and shrinks what fails by delta debugging (:func:`shrink_text`); a fiftieth of
    time goes to Hypothesis batches. Other targets draw every input through Hypothesis, in
    batches of ``batch`` examples each seeded from ``seed`` and its batch number, so a campaign
    with the same seed and duration explores the same inputs; Hypothesis shrinks their failures.
    A failure already found is treated as passing afterwards, so shrinking always chases a new
    bug. ``database`` is Hypothesis' example database (``None``: none).
    """
    with _campaign_gc():
        return _run_campaign(target, seconds, seed, corpus, batch, on_progress, database)


def _run_campaign(
    target: FuzzTarget,
    seconds: float,
    seed: int,
    corpus: Sequence[str],
    batch: int,
    on_progress: Callable[[int, int, float], None] | None,
    database: Any,
) -> CampaignResult:
    """The body of :func:`run_campaign`."""
    from hypothesis import strategies as st

    strategy = target.strategy
    if corpus:
        texts = _mutations(corpus, _fragments_for(target))
        mutated = target.mutate(texts) if target.mutate is not None else texts
        strategy = st.one_of(strategy, mutated)

    known: set[str] = set()
    findings: list[Finding] = []
    counter = [0]
    started = time.monotonic()
    deadline = started + seconds
    shrink_extra = max(5.0, seconds)

    if target.fast is None:
        batch_number = 0
        while time.monotonic() < deadline:
            _hypothesis_batch(target, strategy, random.Random(f"{seed}:{batch_number}"), batch, deadline,
                              deadline + shrink_extra, known, findings, counter, database)
            batch_number += 1
            if on_progress is not None:
                on_progress(counter[0], len(findings), time.monotonic() - started)
        return CampaignResult(counter[0], time.monotonic() - started, findings)

    rng = random.Random(f"{seed}:fast")
    draw = target.fast(rng)
    fragment = target.fast_fragment(rng) if target.fast_fragment is not None else draw
    shrink_until = deadline + shrink_extra
    hypothesis_spent = 0.0
    batch_number = 0
    check = target.check
    recheck = target.recheck or check
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        examples = _draw_chunk(target, rng, draw, fragment, corpus)
        # One at a time (lazily: a finding's shrinking may end the chunk), or all at once.
        verdicts = map(check, examples) if target.check_many is None else target.check_many(examples)
        for example, problem in zip(examples, verdicts):
            counter[0] += 1
            if problem is None or problem.signature in known:
                continue
            known.add(problem.signature)
            findings.append(_shrunk(target, example, problem, recheck, counter, shrink_until))
            if time.monotonic() >= deadline:
                break
        now = time.monotonic()
        if HYPOTHESIS_SHARE and hypothesis_spent < HYPOTHESIS_SHARE * (now - started) and now < deadline:
            # a small batch with its own time box: Hypothesis draws every example of a batch even
            # once its condition has stopped checking them, at 5-50 ms each
            budget = max(0.05, HYPOTHESIS_SHARE * (now - started) - hypothesis_spent)
            _hypothesis_batch(target, strategy, random.Random(f"{seed}:{batch_number}"), min(batch, 5),
                              min(deadline, now + budget), shrink_until, known, findings, counter, database)
            batch_number += 1
            hypothesis_spent += time.monotonic() - now
        if on_progress is not None:
            on_progress(counter[0], len(findings), time.monotonic() - started)
    return CampaignResult(counter[0], time.monotonic() - started, findings)


def _draw_chunk(target: FuzzTarget, rng: random.Random, draw: Callable[[], Any], fragment: Callable[[], str],
                corpus: Sequence[str]) -> list[Any]:
    """``_CHUNK`` fast examples: drawn, or (half the time, with a corpus) a mutated corpus text
    in a drawn example's place (an EJS case keeps its drawn variables)."""
    examples = []
    for _ in range(_CHUNK):
        if corpus and rng.random() < 0.5:
            examples.append(target.with_text(draw(), _mutate_text(rng, rng.choice(corpus), fragment)))
        else:
            examples.append(draw())
    return examples


def _shrunk(target: FuzzTarget, example: Any, problem: Problem, recheck: Callable[[Any], Problem | None],
            counter: list[int], until: float) -> Finding:
    """The finding of a failing fast example: its text shrunk while it fails the same way."""
    signature = problem.signature

    def still_fails(text: str) -> bool:
        counter[0] += 1
        found = recheck(target.with_text(example, text))
        return found is not None and found.signature == signature

    text = target.text_of(example)
    smallest = target.with_text(example, shrink_text(text, still_fails, until) if still_fails(text) else text)
    return Finding(target.name, recheck(smallest) or problem, smallest)


def _hypothesis_batch(
    target: FuzzTarget,
    strategy: Any,
    rng: random.Random,
    batch: int,
    deadline: float,
    stop_at: float,
    known: set[str],
    findings: list[Finding],
    counter: list[int],
    database: Any,
) -> None:
    """One Hypothesis ``find`` of up to ``batch`` examples; a new failure is shrunk and recorded."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import HypothesisException, NoSuchExample

    state: dict[str, Any] = {"current": None, "best": None, "best_key": None}

    def condition(example: Any) -> bool:
        now = time.monotonic()
        if state["current"] is None and now >= deadline:
            return False  # out of time: let Hypothesis finish the batch quickly
        if state["current"] is not None and now >= stop_at:
            return False  # shrinking budget spent: keep the smallest failure so far
        counter[0] += 1
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

    try:
        find(
            strategy,
            condition,
            settings=settings(
                max_examples=batch,
                database=database,
                deadline=None,
                phases=(Phase.reuse, Phase.generate, Phase.shrink) if database is not None
                else (Phase.generate, Phase.shrink),
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


def _mutate_text(rng: random.Random, text: str, fragment: Callable[[], str]) -> str:
    """A corpus text edited by a few random splices, edge pieces, deletions and duplications."""
    for _ in range(rng.randint(0, 4)):
        op = rng.randrange(4)
        at = rng.randint(0, len(text))
        if op == 0:
            text = text[:at] + fragment() + text[at:]
        elif op == 1:
            text = text[:at] + rng.choice(_EDGE_PIECES) + text[at:]
        else:
            end = rng.randint(at, min(len(text), at + 200))
            text = text[:at] + (text[at:end] * 2 if op == 2 else "") + text[end:]
    return text


def shrink_text(text: str, still_fails: Callable[[str], bool], until: float) -> str:
    """The smallest text found by delta debugging that still fails the same way.

    Removes chunks of halving size (halves, quarters... single characters) while the failure
    stays, so every character left is needed for it. Stops at ``until`` (a monotonic time) with
    the smallest failure so far.
    """
    chunk = max(1, len(text) // 2)
    while chunk >= 1 and text:
        removed = False
        start = 0
        while start < len(text):
            if time.monotonic() >= until:
                return text
            candidate = text[:start] + text[start + chunk :]
            if still_fails(candidate):
                text = candidate
                removed = True
            else:
                start += chunk
        if not removed:
            if chunk == 1:
                break
            chunk //= 2
        else:
            chunk = min(chunk, max(1, len(text) // 2))
    return text


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


def default_cache_dir() -> Path:
    """Where ``tavernbox fuzz`` keeps Hypothesis' data when ``--cache-dir`` is not given.

    The platform's per-user cache folder (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux,
    ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) plus ``tavernbox/fuzz``: never
    the current directory, which Hypothesis would otherwise fill with a ``.hypothesis/`` folder.
    """
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tavernbox" / "fuzz"


@contextlib.contextmanager
def hypothesis_home(cache_dir: Path) -> Iterator[Any]:
    """Point Hypothesis' storage (its example database, its caches) at ``cache_dir`` for a campaign.

    Yields the example database under ``cache_dir/examples``; the previous storage folder is
    restored afterwards (the CLI runs inside test sessions too).
    """
    import hypothesis.configuration as configuration
    from hypothesis.database import DirectoryBasedExampleDatabase

    cache_dir.mkdir(parents=True, exist_ok=True)
    key = "__hypothesis_home_directory"
    before = vars(configuration).get(key)
    configuration.set_hypothesis_home_dir(cache_dir)
    try:
        yield DirectoryBasedExampleDatabase(str(cache_dir / "examples"))
    finally:
        configuration.set_hypothesis_home_dir(before)


class ProgressLine:
    """One self-rewriting status line on stderr (inputs, rate, findings), only on a terminal."""

    def __init__(self, label: str, seconds: float, stream: Any = None, *, force: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.seconds = seconds
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = force or bool(isatty and isatty())
        self._last = 0.0
        self.shown = False

    def update(self, examples: int, found: int, elapsed: float, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self._last < 0.2:
            return
        self._last = now
        rate = examples / elapsed if elapsed > 0 else 0.0
        line = (f"fuzz {self.label}: {examples:,} inputs, {rate:,.0f}/s, {found} finding{'s' if found != 1 else ''}, "
                f"{min(elapsed, self.seconds):.0f}/{self.seconds:.0f} s")
        self.stream.write("\r\x1b[K" + line)
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _worker_init(examples: Any, found: Any) -> None:
    global _SHARED
    _SHARED = (examples, found)


_SHARED: tuple[Any, Any] | None = None


def _worker(target_name: str, index: int, seconds: float, seed: int, corpus: Sequence[str],
            cache_dir: str | None) -> tuple[int, list[Finding]]:
    """One process of a ``--jobs`` campaign: its own seed, counts published in shared memory."""
    target = TARGETS[target_name]()
    shared = _SHARED

    def publish(examples: int, found: int, elapsed: float) -> None:
        if shared is not None:
            shared[0][index] = examples
            shared[1][index] = found

    def run(database: Any) -> CampaignResult:
        return run_campaign(target, seconds=seconds, seed=seed * 1_000 + index, corpus=corpus,
                            on_progress=publish, database=database)

    if cache_dir is None:
        result = run(None)
    else:
        with hypothesis_home(Path(cache_dir) / f"worker-{index}") as database:
            result = run(database)
    publish(result.examples, len(result.findings), result.seconds)
    return result.examples, result.findings


def run_parallel(target_name: str, jobs: int, *, seconds: float, seed: int, corpus: Sequence[str],
                 cache_dir: Path | None, on_progress: Callable[[int, int, float], None] | None = None,
                 ) -> CampaignResult:
    """``jobs`` campaigns in as many processes (seeds ``seed*1000 + i``); findings merged by signature."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    examples = context.Array("q", jobs, lock=False)
    found = context.Array("q", jobs, lock=False)
    started = time.monotonic()
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_init, initargs=(examples, found)) as pool:
        futures = [pool.submit(_worker, target_name, i, seconds, seed, list(corpus),
                               None if cache_dir is None else str(cache_dir)) for i in range(jobs)]
        while not all(f.done() for f in futures):
            time.sleep(0.1)
            if on_progress is not None:
                on_progress(sum(examples), sum(found), time.monotonic() - started)
        results = [f.result() for f in futures]
    merged: list[Finding] = []
    seen: set[str] = set()
    for _, worker_findings in results:
        for finding in worker_findings:
            if finding.problem.signature not in seen:
                seen.add(finding.problem.signature)
                merged.append(finding)
    return CampaignResult(sum(n for n, _ in results), time.monotonic() - started, merged)


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
@click.option("--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Processes to fuzz in (0: one per core); each runs its own seed for the whole time.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Folder for Hypothesis' example database and caches [default: the user cache folder, "
                   "e.g. ~/.cache/tavernbox/fuzz].")
def command(target_name: str, seconds: float, seed: int, corpus: Path | None, out: Path, jobs: int,
            cache_dir: Path | None) -> None:
    """Fuzz the macro engine or the EJS renderer; save shrunk failing inputs to --out."""

    def body() -> int:
        try:
            from ..extras import require_extra

            require_extra("fuzz", "tavernbox fuzz")
            target = TARGETS[target_name]()
            corpus_texts = load_corpus(corpus) if corpus is not None else []
        except TemplateError as exc:  # a usage problem, not a finding: exit 2
            fail(exc, exit_code=2)
        cache = cache_dir if cache_dir is not None else default_cache_dir()
        workers = jobs or os.cpu_count() or 1
        progress = ProgressLine(target_name, seconds)
        try:
            if workers > 1:
                result = run_parallel(target_name, workers, seconds=seconds, seed=seed, corpus=corpus_texts,
                                      cache_dir=cache, on_progress=progress.update)
            else:
                with hypothesis_home(cache) as database:
                    result = run_campaign(target, seconds=seconds, seed=seed, corpus=corpus_texts,
                                          on_progress=progress.update, database=database)
            progress.update(result.examples, len(result.findings), result.seconds, final=True)
        finally:
            progress.close()
        for finding in result.findings:
            path = save_finding(finding, target, out)
            stderr.print(f"[red]{finding.problem.kind}[/] {finding.problem.signature}: {path}")
        rate = result.examples / result.seconds if result.seconds > 0 else 0.0
        summary = (f"{target_name}: {result.examples} inputs in {result.seconds:.1f} s ({rate:,.0f}/s"
                   f"{f', {workers} jobs' if workers > 1 else ''}), {len(result.findings)} findings")
        if corpus_texts:
            summary += f" ({len(corpus_texts)} corpus files mutated)"
        click.echo(summary + (f"; saved to {out}" if result.findings else ""))
        return 1 if result.findings else 0

    code = guarded(body)
    if code:
        raise SystemExit(code)

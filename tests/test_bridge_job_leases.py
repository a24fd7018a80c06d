"""Leases checked between pending-job steps of one pass (after each await inside the VM).

The pass runs in a worker process; the leases live in the host. In bridge mode with a lease held,
the worker asks the host after every job step and the host answers continue or abort.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tavernbox.bridge import LeaseSet, LookupRequest, Resolution, render_with_dependencies
from tavernbox.ejs.render import compile_source
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits, SandboxError, WorkerPool, run_program

# One lookup, then several awaits in the replayed pass (its answer is in the table by then).
AWAITS = "<% const a = await getpreset('a'); %>[<%- a %>]<% await null; %>1<% await null; %>2<% await null; %>3"


class CountingPool(WorkerPool):
    """A real pool that counts the lease questions its workers ask."""

    def __init__(self) -> None:
        super().__init__(size=1)
        self.questions = 0

    def _answer_lease(self, *args: Any) -> None:  # type: ignore[override]
        self.questions += 1
        WorkerPool._answer_lease(*args)


@pytest.fixture(scope="module")
def pool() -> Iterator[CountingPool]:
    p = CountingPool()
    yield p
    p.close()


class FlippingLease:
    """A resolver whose one lease turns stale at its ``stale_after``-th check (None: never)."""

    def __init__(self, stale_after: int | None, state: str = "content_changed") -> None:
        self.stale_after = stale_after
        self.state = state
        self.checks = 0

    def check_current(self) -> str:
        self.checks += 1
        if self.stale_after is not None and self.checks >= self.stale_after:
            return self.state
        return "current"

    def resolve(self, request: LookupRequest) -> Resolution:
        return Resolution("test:preset", "test", "A", "r1", None, self.check_current)


# Checks of the lease before its pass runs: "after a lookup was resolved" and "before a pass".
BEFORE_PASS = 2


def test_lease_revoked_between_two_awaits_fails_at_that_step(pool: CountingPool) -> None:
    resolver = FlippingLease(stale_after=BEFORE_PASS + 3)  # stale at the third job-step check
    with pytest.raises(TemplateError) as info:
        render_with_dependencies(AWAITS, resolver, pool=pool)
    assert info.value.code == "SOURCE_CONTENT_CHANGED"
    assert "after pending-job step 3" in info.value.message
    assert resolver.checks == BEFORE_PASS + 3  # the pass stopped at once: no later step, no completion check


def test_policy_revocation_mid_pass_is_policy_changed(pool: CountingPool) -> None:
    resolver = FlippingLease(stale_after=BEFORE_PASS + 1, state="policy_changed")
    with pytest.raises(TemplateError) as info:
        render_with_dependencies(AWAITS, resolver, pool=pool)
    assert info.value.code == "SOURCE_POLICY_CHANGED"
    assert "after pending-job step 1" in info.value.message


def test_control_lease_that_stays_current_renders(pool: CountingPool) -> None:
    resolver = FlippingLease(stale_after=None)
    before = pool.questions
    result = render_with_dependencies(AWAITS, resolver, pool=pool)
    assert result.text == "[A]123"
    steps_pass2 = result.usage.job_steps - _steps_of_first_pass(pool)
    # Every job step of the pass that held the lease was checked, and only those.
    assert pool.questions - before == steps_pass2 > 3
    # before the lookup's pass + each job step + completion
    assert resolver.checks == BEFORE_PASS + steps_pass2 + 1


def _steps_of_first_pass(pool: CountingPool) -> int:
    """Job steps of the pass that misses the lookup (no lease held yet, so never asked)."""
    before = pool.questions
    program = compile_source(AWAITS).program
    result = run_program(program, "null", pool=pool, bridge=("{}", 512))
    assert result.pending is not None and pool.questions == before
    return result.usage.job_steps


def test_plain_renders_send_no_lease_messages(pool: CountingPool) -> None:
    before = pool.questions
    # A bridge render that holds no lease (no lookups, no caller leases) asks nothing either.
    result = render_with_dependencies("<% await null; %>x<% await null; %>y", FlippingLease(None), pool=pool)
    assert result.text == "xy" and result.usage.job_steps > 0
    # A plain template render (render_template's path: run_program without lease_check) never
    # asks, bridge mode or not.
    program = compile_source("<% await null; %>z").program
    assert run_program(program, "{}", pool=pool).text == "z"
    assert run_program(program, "null", pool=pool, bridge=("{}", 512)).text == "z"
    assert pool.questions == before


def test_caller_leases_are_checked_between_steps_even_without_lookups(pool: CountingPool) -> None:
    lease = FlippingLease(stale_after=2, state="policy_changed")  # "before the render", then step 1
    held = LeaseSet()
    held.add("template scene", lease.check_current)
    with pytest.raises(TemplateError) as info:
        render_with_dependencies("<% await null; %>x<% await null; %>y", FlippingLease(None), leases=held,
                                 pool=pool)
    assert info.value.code == "SOURCE_POLICY_CHANGED" and "template scene" in info.value.message


def test_sandbox_reports_each_step_and_aborts_with_the_given_code(pool: CountingPool) -> None:
    program = compile_source("<% await null; %>a<% await null; %>b<% await null; %>c").program
    seen: list[int] = []

    def keep_going(step: int) -> tuple[str, str] | None:
        seen.append(step)
        return None

    result = run_program(program, "null", pool=pool, bridge=("{}", 512), lease_check=keep_going)
    assert result.text == "abc"
    assert seen == list(range(1, result.usage.job_steps + 1))

    def stop_at_two(step: int) -> tuple[str, str] | None:
        return ("SOURCE_CONTENT_CHANGED", "edited") if step == 2 else None

    with pytest.raises(SandboxError) as info:
        run_program(program, "null", pool=pool, bridge=("{}", 512), lease_check=stop_at_two)
    assert info.value.code == "SOURCE_CONTENT_CHANGED" and info.value.message == "edited"
    assert info.value.usage is not None and info.value.usage.job_steps == 2


def test_time_in_the_host_check_is_not_cpu_budget(pool: CountingPool) -> None:
    program = compile_source("<% await null; %>a<% await null; %>b").program

    def slow(step: int) -> tuple[str, str] | None:
        time.sleep(0.03)
        return None

    limits = Limits(time_ms=20.0, deadline_grace_ms=2000.0)
    result = run_program(program, "null", limits=limits, pool=pool, bridge=("{}", 512), lease_check=slow)
    assert result.text == "ab" and result.usage.job_steps >= 2  # >= 60 ms spent in the host
    assert result.usage.time_ms < 20.0


def test_the_wall_deadline_still_applies_to_the_host_check(pool: CountingPool) -> None:
    program = compile_source("<% await null; %>a").program

    def stuck(step: int) -> tuple[str, str] | None:
        time.sleep(0.25)
        return None

    limits = Limits(time_ms=20.0, deadline_grace_ms=100.0)
    killed = len(pool.replaced)
    with pytest.raises(SandboxError) as info:
        run_program(program, "null", limits=limits, pool=pool, bridge=("{}", 512), lease_check=stuck)
    assert info.value.code == "TEMPLATE_TIME_LIMIT"
    assert len(pool.replaced) == killed + 1

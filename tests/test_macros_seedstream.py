"""Shared seed streams (``prng.SeedStream``) draw exactly what a fresh generator draws."""

from __future__ import annotations

import pytest

from tavernbox.macros import MacroContext, MacroRegistry, prng
from tavernbox.macros.evaluator import RenderInputs, RenderState
from tavernbox.macros.prng import SeedRandom, SeedStream
from tavernbox.macros.variables import VariableStore


def _state(seed: str) -> RenderState:
    return RenderState(
        local=VariableStore(),
        glob=VariableStore(),
        inputs=RenderInputs(
            source="",
            content="",
            ctx=MacroContext(),
            registry=MacroRegistry.default_shared(),
            dynamic={},
            rng_seed=seed,
        ),
    )


def test_a_stream_and_its_continuation_equal_one_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prng, "STREAM_DRAWS", 5)
    reference = SeedRandom("stream-test-a")
    want = [reference.random() for _ in range(12)]
    stream = SeedStream("stream-test-a")
    assert [stream.draw(i) for i in range(5)] == want[:5]
    assert stream.draw(5) is None
    tail = stream.continuation()
    assert [tail.random() for _ in range(7)] == want[5:]


def test_renders_past_the_kept_draws_continue_the_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prng, "STREAM_DRAWS", 4)
    reference = SeedRandom("stream-test-b")
    want = [reference.random() for _ in range(10)]
    for _ in range(3):  # the first render fills the stream, later ones read it
        state = _state("stream-test-b")
        assert [state.random() for _ in range(10)] == want

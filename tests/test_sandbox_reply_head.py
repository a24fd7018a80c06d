"""A worker writes a successful reply's head by hand; it must be the encoder's text exactly."""

from __future__ import annotations

import json

import pytest

from sandbox_helpers import load_worker

worker_module = load_worker("tavernbox_worker_reply_head")


@pytest.mark.parametrize("usage", [
    {"time_ms": 0.0, "memory_bytes": 0, "output_bytes": 0, "passes": 0, "job_steps": 0},
    {"time_ms": 0.512, "memory_bytes": 812345, "output_bytes": 5041, "passes": 1, "job_steps": 3},
    {"time_ms": 1e-05, "memory_bytes": 1 << 30, "output_bytes": 7, "passes": 12, "job_steps": 999999},
    {"time_ms": 12345.678, "memory_bytes": 3, "output_bytes": 1 << 28, "passes": 2, "job_steps": 1},
])
def test_the_hand_written_head_is_the_encoders_text(usage: dict) -> None:
    expected = json.dumps({"id": 41, "usage": usage, "error": None}, ensure_ascii=True)
    assert worker_module.reply_head(41, usage, None) == expected


def test_an_error_head_goes_through_the_encoder() -> None:
    usage = {"time_ms": 1.5, "memory_bytes": 1, "output_bytes": 0, "passes": 1, "job_steps": 0}
    error = {"code": "TEMPLATE_EXECUTION_FAILED", "message": "TypeError: \u00e9 \"quoted\"\n"}
    head = worker_module.reply_head(7, usage, error)
    assert head.isascii()
    assert json.loads(head) == {"id": 7, "usage": usage, "error": error}

"""A program whose bytecode a worker holds is not parsed into the VM again.

The worker hands the harness ``["", [variables]]`` instead of the program's JSON text when it
will evaluate the program from cached bytecode. These tests pin that this changes nothing a
caller sees: the input's shape check still refuses an input that breaks out of its brackets, and
when the cached bytecode cannot be evaluated after all, the harness gets the whole payload and
compiles the source as it would without the cache.
"""

from __future__ import annotations

import json
from typing import Any

from sandbox_helpers import WORKER_LIMITS, QuietChannel, load_worker, prog, worker_reply

worker_module = load_worker("tavernbox_worker_cached_payload")
PROGRAM = prog("append(escape(variables.name)); append(String(variables.n * 2))")


def cached_worker() -> Any:
    worker = worker_module.Worker()
    for _ in range(2):  # seen once, then compiled and kept
        worker_reply(worker, PROGRAM, {"name": "<Bob>", "n": 2})
    assert len(worker.programs.entries) == 1
    return worker


def test_a_cached_program_renders_from_its_bytecode() -> None:
    worker = cached_worker()
    reply = worker_reply(worker, PROGRAM, {"name": "<Ann>", "n": 5})
    assert reply["error"] is None
    assert reply["result"]["text"] == "&lt;Ann&gt;10"


def test_unreadable_bytecode_falls_back_to_the_whole_payload() -> None:
    worker = cached_worker()
    worker.programs.evaluate = lambda ctx, key, deadline: False  # nothing ran: the harness compiles
    reply = worker_reply(worker, PROGRAM, {"name": "<Ann>", "n": 5})
    assert reply["error"] is None, reply["error"]
    assert reply["result"]["text"] == "&lt;Ann&gt;10"


def test_an_input_that_breaks_its_brackets_is_refused_for_a_cached_program() -> None:
    worker = cached_worker()
    payload = "[" + json.dumps(PROGRAM) + ",[\n1],[2\n]]"
    reply = json.loads(worker.render(QuietChannel(), 1, WORKER_LIMITS, payload))
    worker.retired = None
    assert reply["error"]["code"] == "INPUT_INVALID"

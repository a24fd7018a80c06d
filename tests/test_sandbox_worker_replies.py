"""The worker's replies (issue 30): ``render`` returns its reply line whatever the ending, and the
harness's status is read as data (``read_status``), never by its prefix or the position of a field.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernbox.sandbox import Limits
from test_sandbox_spare import Quiet, load_worker_module, payload_of


@pytest.fixture(scope="module")
def module() -> Any:
    return load_worker_module()


@pytest.fixture(scope="module")
def worker(module: Any) -> Any:
    return module.Worker()


@pytest.mark.parametrize(
    ("body", "limits", "code"),
    [
        ("append('ok')", Limits(), None),
        ("await null; append('later')", Limits(), None),
        ("throw new Error('x')", Limits(), "TEMPLATE_EXECUTION_FAILED"),
        ("throw null", Limits(), "TEMPLATE_EXECUTION_FAILED"),  # the template's own null (probed)
        ("const a = []; for (;;) a.push('x'.repeat(4096));", Limits(memory_bytes=2 * 1024 * 1024),
         "TEMPLATE_MEMORY_LIMIT"),
        ("for (;;) {}", Limits(time_ms=20), "TEMPLATE_TIME_LIMIT"),
        ("for (;;) await null", Limits(job_steps=5), "TEMPLATE_JOB_LIMIT"),
        ("append('x'.repeat(100))", Limits(output_bytes=10), "TEMPLATE_OUTPUT_LIMIT"),
        ("await new Promise(() => {})", Limits(), "TEMPLATE_UNSETTLED"),
    ],
)
def test_every_ending_is_one_reply_line(worker: Any, body: str, limits: Limits, code: str | None) -> None:
    raw = worker.render(Quiet(), 9, limits.to_wire(), payload_of(body))
    worker.retired = None
    assert isinstance(raw, bytes) and raw.endswith(b"\n") and raw.count(b"\n") == 1
    reply = json.loads(raw)
    assert reply["id"] == 9 and set(reply) == {"id", "usage", "error", "result"}
    if code is None:
        assert reply["error"] is None and reply["result"]["ok"] is True
    else:
        assert reply["error"]["code"] == code and reply["result"] is None
        assert "null_thrown" not in reply["error"]  # the probe's marker never reaches the host


def test_the_output_count_is_the_harness_s_whatever_the_text_holds(worker: Any) -> None:
    # Text that looks like the fields a positional reader would look for.
    tricky = '","bytes":99},{"ok":true,"units":1}:7'
    raw = worker.render(Quiet(), 1, Limits().to_wire(), payload_of("append(variables.t)", {"t": tricky}))
    reply = json.loads(raw)
    assert reply["result"]["text"] == tricky
    assert reply["usage"]["output_bytes"] == len(tricky.encode("utf-8"))
    raw = worker.render(Quiet(), 2, Limits().to_wire(), payload_of("append(variables.t + 'é')", {"t": tricky}))
    assert json.loads(raw)["usage"]["output_bytes"] == len(tricky.encode("utf-8")) + 2


def test_read_status_reads_each_shape_the_harness_answers(module: Any) -> None:
    read = module.read_status
    done = read('{"ok":true,"text":"a:b","bytes":3}')
    assert (done.ok, done.bytes, done.units, done.pending, done.error) == (True, 3, None, None, None)
    lazy = read('{"ok":true,"text":"abc","units":3}')
    assert (lazy.ok, lazy.bytes, lazy.units) == (True, None, 3)
    pending = read('{"ok":null,"pending":"getvar:x","line":2,"column":5,"bytes":0}')
    assert (pending.ok, pending.pending) == (None, "getvar:x")
    failed = read('{"ok":false,"error":{"kind":"throw","name":"Error","message":"m"},"bytes":4}')
    assert failed.ok is False and failed.error == {"kind": "throw", "name": "Error", "message": "m"} and failed.bytes == 4
    unsettled = read('{"ok":null,"state":"running","bytes":0}')
    assert (unsettled.ok, unsettled.pending) == (None, None)
    assert done.raw == '{"ok":true,"text":"a:b","bytes":3}'  # passed on as the reply's result unchanged
    for bad in ('"text"', "[1]", '{"ok":"yes"}', "{"):
        with pytest.raises(ValueError):
            read(bad)


def test_the_null_probe_returns_an_outcome_not_a_reply(worker: Any) -> None:
    outcome = worker.probe(Quiet(), 3, Limits().to_wire(), payload_of("throw null"))
    worker.retired = None
    assert outcome.null_thrown and outcome.error is not None and outcome.result is None
    outcome = worker.probe(Quiet(), 4, Limits().to_wire(), payload_of("append(1)"))
    worker.retired = None
    assert not outcome.null_thrown and outcome.error is None and outcome.result is not None

"""Limits: defaults from issue 3, validation against hard maxima, codes named in docstrings."""

from __future__ import annotations

import ast
import inspect
from dataclasses import fields
from pathlib import Path

import pytest

from tavernbox.errors import CODES
from tavernbox.sandbox import Limits
from tavernbox.sandbox.limits import HARD_MAXIMA


def test_defaults_match_the_issue() -> None:
    lim = Limits()
    assert lim.template_chars == 131072
    assert lim.input_bytes == 2 * 1024 * 1024
    assert lim.output_bytes == 512 * 1024
    assert lim.memory_bytes == 16 * 1024 * 1024
    assert lim.stack_bytes == 256 * 1024
    assert lim.time_ms == 75.0
    assert lim.job_steps == 1000
    assert lim.new_lookups == 32
    assert lim.bridge_calls == 512
    assert lim.deadline_s == pytest.approx(1.075)


def test_every_field_docstring_names_an_existing_code() -> None:
    source = Path(inspect.getfile(Limits)).read_text()
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Limits")
    docs: dict[str, str] = {}
    body = cls.body
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            nxt = body[i + 1]
            assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant), node.target.id
            docs[node.target.id] = nxt.value.value
    assert set(docs) == {f.name for f in fields(Limits)}
    for name, doc in docs.items():
        named = [code for code in CODES if f"``{code}``" in doc]
        assert named, f"Limits.{name} names no error code"


@pytest.mark.parametrize("name", [f.name for f in fields(Limits)])
def test_values_outside_the_hard_maxima_are_refused(name: str) -> None:
    low, high = HARD_MAXIMA[name]
    is_float = name.endswith("_ms")
    too_high = high * 2 if is_float else int(high) + 1
    with pytest.raises(ValueError):
        Limits(**{name: too_high})
    if low > 0:
        too_low = low / 2 if is_float else int(low) - 1
        with pytest.raises(ValueError):
            Limits(**{name: too_low})
    Limits(**{name: high if is_float else int(high)})  # the maximum itself is allowed


def test_wrong_types_are_refused() -> None:
    with pytest.raises(TypeError):
        Limits(output_bytes=True)
    with pytest.raises(TypeError):
        Limits(output_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Limits(time_ms="75")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Limits(time_ms=float("nan"))
    assert Limits(time_ms=50).time_ms == 50  # an int is a number


def test_limits_are_frozen() -> None:
    lim = Limits()
    with pytest.raises(AttributeError):
        lim.time_ms = 1.0  # type: ignore[misc]

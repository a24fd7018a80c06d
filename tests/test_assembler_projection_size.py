"""Snapshot sizes are summed from their parts; the sum must equal serialising the whole snapshot."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox.assembler.limits import json_size
from tavernbox.assembler.projection import Logical, project_system

TEXT = st.text(alphabet=st.characters(blacklist_categories=()), max_size=30)  # controls, quotes, surrogates, astral


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6))
def test_json_size_of_a_join_is_the_sum_of_its_parts(parts: list[str]) -> None:
    joined = json_size("\n\n".join(parts)) - 2
    assert joined == sum(json_size(p) - 2 for p in parts) + 4 * (len(parts) - 1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["system", "user"]), TEXT.filter(bool)), min_size=1, max_size=8))
def test_projection_charge_equals_the_serialised_extra_messages(items: list[tuple[str, str]]) -> None:
    logical = [Logical({"id": f"m{i}", "role": role, "content": text}, False, [(0, len(text), {})])
               for i, (role, text) in enumerate(items)]
    projection = project_system(logical, system_prompt_update="in-history")
    assert projection.extra_bytes == sum(json_size(m) for m in projection.messages)

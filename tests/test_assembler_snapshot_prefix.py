"""A system snapshot repeating an earlier one reuses its ranges; provenance stays exact and unshared."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox.assembler.compose import build_provenance
from tavernbox.assembler.projection import Logical, SharedSpans, project_system

TEXT = st.text(alphabet=st.sampled_from("ab \n\U0001f600é"), min_size=0, max_size=8)
ITEM = st.tuples(st.sampled_from(["system", "system", "user"]), st.booleans(), TEXT, st.integers(0, 8))


def _logical(items: list[tuple[str, bool, str, int]]) -> list[Logical]:
    out = []
    for i, (role, native, text, cut) in enumerate(items):
        cut = min(cut, len(text))
        spans = [(s, e, {"src": f"m{i}", "at": s}) for s, e in ((0, cut), (cut, len(text))) if e > s]
        out.append(Logical({"id": f"m{i}", "role": role, "content": text}, native and role == "system", spans))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(ITEM, min_size=1, max_size=10))
def test_snapshot_ranges_point_at_their_source_text(items: list[tuple[str, bool, str, int]]) -> None:
    logical = _logical(items)
    texts = {item.message["id"]: item.message["content"] for item in logical}
    projection = project_system(logical, system_prompt_update="in-history")
    for message, spans in zip(projection.messages, projection.spans, strict=True):
        content = message["content"]
        for s, e, info in spans:
            assert content[s:e] == texts[info["src"]][info["at"]:info["at"] + e - s]


@settings(max_examples=300, deadline=None)
@given(st.lists(ITEM, min_size=1, max_size=10))
def test_provenance_of_a_repeated_snapshot_equals_a_fresh_build(items: list[tuple[str, bool, str, int]]) -> None:
    projection = project_system(_logical(items), system_prompt_update="in-history")
    source = [(m["id"], m["content"], spans) for m, spans in zip(projection.messages, projection.spans, strict=True)]
    plain = [(mid, text, list(spans)) for mid, text, spans in source]  # without the shared prefix
    built = build_provenance(source)
    assert built == build_provenance(plain)
    seen = [id(d) for message in built for d in message["spans"]]
    assert len(seen) == len(set(seen))  # every span dict is its own object


def test_a_later_snapshot_marks_the_earlier_one_as_its_prefix() -> None:
    items = [("system", False, "one", 0), ("user", False, "hi", 0), ("system", False, "two", 1)]
    projection = project_system(_logical(items), system_prompt_update="in-history")
    assert [m["content"] for m in projection.messages] == ["one", "hi", "one\n\ntwo"]
    later = projection.spans[2]
    assert isinstance(later, SharedSpans) and later.prefix == (0, 1)
    assert later[:1] == projection.spans[0]


def test_a_long_message_built_again_gets_fresh_dicts() -> None:
    from tavernbox.assembler.render import FrozenInfo

    infos = [FrozenInfo(rule_id="r", block_id=f"b{i % 3}", field=None) for i in range(3)]
    spans = [(i, i + 1, infos[i % 3]) for i in range(40)]  # long enough to be remembered
    first = build_provenance([("m", "x" * 40, spans)])
    expected = [{"start": i, "end": i + 1, "rule_id": "r", "block_id": f"b{i % 3}"} for i in range(40)]
    assert first[0]["spans"] == expected
    for d in first[0]["spans"]:
        d["start"] = -1  # the caller owns what it got
    second = build_provenance([("m", "x" * 40, list(spans))])
    assert second[0]["spans"] == expected
    other = [FrozenInfo(rule_id="q") for _ in range(3)]  # same ranges, other infos: not the kept dicts
    third = build_provenance([("m", "x" * 40, [(s, e, other[i % 3]) for i, (s, e, _) in enumerate(spans)])])
    assert third[0]["spans"] == [{"start": i, "end": i + 1, "rule_id": "q"} for i in range(40)]

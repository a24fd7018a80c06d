"""The activation loop's named parts: its options object and the prepared book's scan reach."""

from __future__ import annotations

import dataclasses
import random

import pytest

from tavernbox.errors import TemplateError
from tavernbox.worldinfo import WorldInfoSettings, normalize_books
from tavernbox.worldinfo.activation import ActivationOptions, _Prepared, scan_reach, sort_entries


def test_the_reach_kept_with_a_prepared_book_is_scan_reach() -> None:
    rnd = random.Random(30)
    for _ in range(40):
        entries = [{"uid": u, "key": ["k"], "scanDepth": rnd.choice([None, 0, 3, 40, True, "7"])}
                   for u in range(rnd.randint(0, 6))]
        books = normalize_books({"entries": entries})[0]
        prepared = _Prepared(sort_entries(books, 1)[0], WorldInfoSettings(), None)
        for _ in range(3):
            settings = WorldInfoSettings(depth=rnd.randint(0, 50), min_activations=rnd.choice([0, 0, 2]))
            assert prepared.reach(settings) == scan_reach(settings, prepared.entries)


def test_options_are_read_once_and_frozen() -> None:
    options = ActivationOptions.read({"world_info_depth": 5}, seed=3, forced=[("b", 1), ("b", "x")],
                                     context={"scenario": "s"}, generation_type="swipe")
    assert options.settings.depth == 5 and options.seed == 3 and options.context.scenario == "s"
    assert options.forced == frozenset({"b.1", "b.x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 4  # type: ignore[misc]
    assert ActivationOptions.read() == ActivationOptions()


@pytest.mark.parametrize(("kwargs", "path"), [({"generation_type": "later"}, None),
                                              ({"settings": {"world_info_depth": "deep"}}, "$.world_info_depth"),
                                              ({"context": {"scenery": "x"}}, "$.scenery")])
def test_a_bad_option_is_refused_with_its_code(kwargs: dict[str, object], path: str | None) -> None:
    with pytest.raises(TemplateError) as caught:
        ActivationOptions.read(**kwargs)  # type: ignore[arg-type]
    assert caught.value.code == "INPUT_INVALID" and caught.value.path == path

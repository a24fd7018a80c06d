"""Issue 14: a faster :class:`~tavernbox.testing.macro_generator.MacroTextGenerator` draws the same texts.

A fuzz campaign is replayed from its seed, so the generator's output for a seed is a contract: the
digests below were recorded from the generator as it stood before it was rewritten for speed
(``Random.choice`` replaced by scaled ``random()`` calls, each piece a method), and any rewrite must
reproduce them byte for byte. ``tavernbox fuzz`` shares one :class:`random.Random` between the
generator and its mutator, so the generator must also leave the rng exactly as the old one did:
the interleaved digest mixes generator calls with other draws from the same rng. The time per
input is measured by ``benchmarks/bench_fuzz.py`` (``generate``), not here.
"""

from __future__ import annotations

import copy
import hashlib
import pickle
import random

import pytest

from tavernbox.testing import macro_generator
from tavernbox.testing.macro_generator import MacroTextGenerator

#: seed -> (sha256 of 2,000 ``text()`` then 500 ``fragment()`` then the next ``random()``,
#:          sha256 of 1,500 steps mixing text, fragment(max_leaves=5) and other draws on one rng),
#: recorded from the generator before the speed rewrite (commit 8cdd277).
_DIGESTS = {
    0: ("6ba703663bd886525f6308a8b29f5143672952c3f40f4f97a3c0a2cabc820841",
        "1ffbb2aea9f03848c199ddef23f079652be3a05f46b1bdff11c48919703d0437"),
    1: ("96a13f087cfe9893ad6faf1dfbbb14e9f4fdfd6a0fa3bc79b4ce909d450622bf",
        "094975e43fc5f6e556eaea50e0ec3fc6fcb8f5ac05ee2de92352cfa890972226"),
    5: ("fb8ea168aaa2853a5c25167ab0c1e5a1d8c5c27a8d436c4aa8816606864b8a78",
        "59aaa6945e827eba8144cf526a5b495567a7b58fe9dad326db7d8234898e7c13"),
    2024: ("d63af8f92ad247bcb51e4cee320646668ff8fcb65f3f8920301284cffcec73b6",
           "2abd6ac43c2fc42fab50969dbe2f03642a06fb0da3371d2908683dd474d79555"),
    "1:fast": ("7974d69043578984346c4411a745ad9953179901993b7d3143d349793e947520",
               "0914550dfd45b6b865122468b9270495e05c1cdf1d0ec76b193dd4c3ec1730f4"),
}


class _CountingRandom(random.Random):
    """A subclass (so the generator cannot assume CPython's own ``random()``) that counts draws.

    ``getrandbits`` is overridden too, only so that ``randrange`` keeps drawing through it as a plain
    ``Random`` does (a subclass overriding ``random`` alone makes ``randrange`` use ``random()``).
    """

    draws = 0

    def random(self) -> float:
        self.draws += 1
        return super().random()

    def getrandbits(self, k: int) -> int:
        return super().getrandbits(k)


def _sequential(rng: random.Random) -> str:
    gen = MacroTextGenerator(rng)
    out = [gen.text() for _ in range(2000)] + [gen.fragment() for _ in range(500)]
    out.append(repr(rng.random()))
    return hashlib.sha256("\x00".join(out).encode()).hexdigest()


def _interleaved(rng: random.Random) -> str:
    # as in tavernbox fuzz: one rng for the texts, the fragments and the mutator's own draws
    text = MacroTextGenerator(rng).text
    fragment = MacroTextGenerator(rng, max_leaves=5).fragment
    out = []
    for _ in range(1500):
        step = rng.randrange(4)
        if step == 0:
            out.append(text())
        elif step == 1:
            out.append(fragment())
        elif step == 2:
            out.append(str(rng.randint(0, 1000)))
        else:
            out.append(repr(rng.random()))
    return hashlib.sha256("\x00".join(out).encode()).hexdigest()


@pytest.mark.parametrize("seed", list(_DIGESTS))
def test_the_generator_draws_the_texts_it_drew_before_the_speed_rewrite(seed: int | str) -> None:
    sequential, interleaved = _DIGESTS[seed]
    assert _sequential(random.Random(seed)) == sequential
    assert _interleaved(random.Random(seed)) == interleaved


@pytest.mark.parametrize("seed", [0, "1:fast"])
def test_a_random_subclass_gets_the_same_texts_by_its_own_draws(seed: int | str) -> None:
    # the shortcuts that read the Mersenne Twister's words (getrandbits) are only taken for a
    # plain Random; a subclass is drawn from through its own random(), and gets the same texts
    rng = _CountingRandom(seed)
    assert _sequential(rng) == _DIGESTS[seed][0]
    assert rng.draws > 2500 * 10
    assert _interleaved(_CountingRandom(seed)) == _DIGESTS[seed][1]


def test_a_random_method_set_on_the_instance_is_the_one_drawn_from() -> None:
    rng = random.Random(0)
    draws = []
    plain = rng.random

    def counted() -> float:
        draws.append(1)
        return plain()

    rng.random = counted  # type: ignore[method-assign]
    assert _sequential(rng) == _DIGESTS[0][0]
    assert len(draws) > 2500 * 10


def test_max_leaves_is_read_when_a_text_is_drawn() -> None:
    gen = MacroTextGenerator(random.Random(3), max_leaves=1)
    gen.max_leaves = 12
    again = MacroTextGenerator(random.Random(3), max_leaves=12)
    assert [gen.text() for _ in range(50)] == [again.text() for _ in range(50)]


def test_the_plain_character_table_holds_every_draw_of_its_bin() -> None:
    # every draw whose first word has top 16 bits ``top`` lies between these two; the character
    # only grows with the draw, so the table may name one only when both ends agree
    for top, char in enumerate(macro_generator._PLAIN_BY_TOP_HALF):
        low = macro_generator._draw_char(top << 37)
        high = macro_generator._draw_char(((top + 1) << 37) - 1)
        assert char == (low if low == high else None), top
    assert macro_generator._PLAIN_BY_TOP_HALF.count(None) < 64


def test_split_bins_are_drawn_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    # the digests above pass through the exact path for draws in a split bin: make sure they do
    calls = []
    exact = macro_generator._exact_plain

    def counting(data: bytes, n: int) -> str:
        calls.append(n)
        return exact(data, n)

    monkeypatch.setattr(macro_generator, "_exact_plain", counting)
    assert _sequential(random.Random(5)) == _DIGESTS[5][0]
    assert len(calls) >= 3



def test_a_copied_generator_goes_on_drawing_what_the_original_would() -> None:
    gen = MacroTextGenerator(random.Random(8), max_leaves=6)
    gen.text()
    twins = [pickle.loads(pickle.dumps(gen)), copy.deepcopy(gen)]
    expected = [gen.text() for _ in range(20)]
    for twin in twins:
        assert twin.max_leaves == 6
        assert [twin.text() for _ in range(20)] == expected

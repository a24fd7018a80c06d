"""cyrb53, seedrandom 3.0.5 and {{pick}} index vectors.

The expected values come from the digest (section 1.9) and from running bryc's cyrb53 and
seedrandom 3.0.5 under Node; 3,000 further random strings (astral characters included) agreed
bit for bit when the port was written.
"""

from __future__ import annotations

import pytest

from tavernbox.macros.prng import SeedRandom, cyrb53, pick_index, utf16_units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 3338908027751811),
        ("hello", 4625896200565286),
        ("a", 7929297801672961),
        ("{{pick::a::b::c}}", 8753091705824577),
        ("123456-8753091705824577-0", 4617431619458910),
        ("héllo wörld", 6390378405986613),
        ("emoji 😀 x", 2859292588782334),  # the astral character hashes as two UTF-16 units
        ("x" * 300, 7852700115354723),
        ("\u0000\uffff", 1201564478161790),
        ("日本語テキスト", 6345553917555456),
    ],
)
def test_cyrb53_vectors(text: str, expected: int) -> None:
    assert cyrb53(text) == expected


def test_cyrb53_seed() -> None:
    assert cyrb53("hello", 42) == 275510733060164
    assert cyrb53("hello", -1) == 4992902853281711


def test_utf16_units_split_astral_characters() -> None:
    assert utf16_units("a😀") == [0x61, 0xD83D, 0xDE00]


@pytest.mark.parametrize(
    ("seed", "expected"),
    [
        ("hello", [0.5463663768140734, 0.4397379377059223, 0.554769432473455, 0.7627046759719986, 0.4805307030523447]),
        ("", [0.23144008215179881, 0.27404636548159655, 0.7901279251811976]),
        ("123", [0.9201230811991686]),
        ("emoji 😀 x", [0.7720687002895393, 0.20170858754622162, 0.9332749511095564, 0.019785877000514075]),
        ("x" * 300, [0.952495823023581, 0.9378530102966817, 0.8504259399717166]),  # key wraps at 256
        ("\u0000\uffff", [0.4422899163510798, 0.3948655776697928]),
        ("日本語テキスト", [0.86047826976862, 0.7890519660710441]),
        ("123456-8753091705824577-0", [0.3615065652620458, 0.13123150485556279]),
        # number seeds are flattened with a trailing NUL, so 123 and "123" differ
        (123, [0.047035554534303387, 0.848563925739746, 0.7598672967721807]),
        (0, [0.038085370776470735, 0.08624634995353292]),
        (-5, [0.8848208137434884, 0.49705530889422217]),
        (4294967296, [0.6308349547862808, 0.47358438230804223]),
    ],
)
def test_seedrandom_sequences(seed: str | int, expected: list[float]) -> None:
    rng = SeedRandom(seed)
    assert [rng.random() for _ in expected] == expected


def test_seedrandom_is_callable_like_js() -> None:
    assert SeedRandom("hello")() == 0.5463663768140734


def test_seedrandom_rejects_fractional_number_seed() -> None:
    with pytest.raises(TypeError):
        SeedRandom(1.5)


@pytest.mark.parametrize(
    ("chat_hash", "content", "offset", "n", "reroll", "expected"),
    [
        (123456, "{{pick::a::b::c}}", 0, 3, None, 0),  # 'a'
        (123456, "{{pick::a::b::c}}{{pick::a::b::c}}", 0, 3, None, 1),  # 'b' ...
        (123456, "{{pick::a::b::c}}{{pick::a::b::c}}", 17, 3, None, 0),  # ... then 'a'
        (123456, "{{pick::a::b::c}}", 0, 3, "r1", 0),
        (987654321, "x {{pick::1::2::3::4::5::6::7}}", 2, 7, None, 3),
        (1, "😀{{pick::a::b}}", 2, 2, None, 0),
        ("123456", "{{pick::a::b::c}}{{pick::a::b::c}}", 0, 3, None, 1),
    ],
)
def test_pick_index_vectors(
    chat_hash: int | str, content: str, offset: int, n: int, reroll: str | None, expected: int
) -> None:
    assert pick_index(chat_hash, content, offset, n, reroll) == expected


def test_pick_empty_reroll_seed_is_ignored_like_st() -> None:
    content = "x {{pick::1::2::3::4::5::6::7}}"
    assert pick_index(987654321, content, 2, 7, "") == pick_index(987654321, content, 2, 7)


def test_pick_reroll_seed_changes_the_seed_string() -> None:
    content = "x {{pick::1::2::3::4::5::6::7::8::9::10::11::12}}"
    picks = {pick_index(5, content, 2, 12, f"r{i}") for i in range(20)}
    assert len(picks) > 1


def test_pick_index_needs_items() -> None:
    with pytest.raises(ValueError):
        pick_index(1, "x", 0, 0)

"""Bit-exact ports of the two pseudo-random pieces SillyTavern's ``{{pick}}`` depends on.

``{{pick}}`` must choose the same item SillyTavern 1.18 chooses for the same chat, input and offset,
so nothing here may be "close enough": every operation reproduces JavaScript's number semantics.

* :func:`cyrb53` is bryc's public-domain 53-bit string hash (ST's ``getStringHash``). It works on
  UTF-16 code units and 32-bit ``Math.imul`` products, so astral characters hash as two units.
* :class:`SeedRandom` is David Bau's ``seedrandom`` 3.0.5 default generator: an ARC4 keystream keyed
  by ``mixkey`` over the seed's UTF-16 units, with the first 256 bytes discarded and floats built
  from 52+ bits of keystream.
* :func:`pick_index` combines them the way ST's ``{{pick}}`` handler does.

The implementations follow the published algorithms; the test vectors in
``tests/test_macros_prng.py`` were produced by running the JavaScript originals.
"""

from __future__ import annotations

import threading
from functools import lru_cache

__all__ = ["DrawCursor", "SeedRandom", "cyrb53", "pick_index", "utf16_units"]

_MASK32 = 0xFFFFFFFF


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text`` (what JavaScript's ``charCodeAt`` walks).

    Lone surrogates (possible in a Python ``str`` read with ``surrogatepass``) are kept as the
    single unit they are, exactly as JavaScript stores them.
    """
    units: list[int] = []
    append = units.append
    for ch in text:
        cp = ord(ch)
        if cp < 0x10000:
            append(cp)
        else:
            cp -= 0x10000
            append(0xD800 | (cp >> 10))
            append(0xDC00 | (cp & 0x3FF))
    return units


def _imul(a: int, b: int) -> int:
    """``Math.imul`` as an unsigned 32-bit result (the sign is irrelevant to the XORs that follow)."""
    return ((a & _MASK32) * (b & _MASK32)) & _MASK32


def cyrb53(text: str, seed: int = 0) -> int:
    """bryc's cyrb53 hash of ``text``, identical to SillyTavern's ``getStringHash(text, seed)``.

    Returns an integer below 2**53 (so it prints the same as JavaScript's ``String(n)``).
    """
    h1 = (0xDEADBEEF ^ seed) & _MASK32
    h2 = (0x41C6CE57 ^ seed) & _MASK32
    for unit in utf16_units(text):
        h1 = _imul(h1 ^ unit, 2654435761)
        h2 = _imul(h2 ^ unit, 1597334677)
    h1 = _imul(h1 ^ (h1 >> 16), 2246822507) ^ _imul(h2 ^ (h2 >> 13), 3266489909)
    h2 = _imul(h2 ^ (h2 >> 16), 2246822507) ^ _imul(h1 ^ (h1 >> 13), 3266489909)
    return 4294967296 * (2097151 & h2) + h1


_WIDTH = 256  # ARC4 works on bytes
_CHUNKS = 6  # bytes drawn for the first part of each float
_START_DENOM = _WIDTH**_CHUNKS  # 2**48
_SIGNIFICANCE = 2**52
_OVERFLOW = 2**53


def _flatten_seed(seed: str | int | float | bool) -> str:
    """The string seedrandom mixes into its key for a scalar seed.

    seedrandom's ``flatten`` keeps a string as is but appends a NUL to any other scalar after
    JavaScript's string conversion; that is why ``seedrandom(123)`` and ``seedrandom("123")``
    differ.
    """
    if isinstance(seed, str):
        return seed
    if isinstance(seed, bool):
        return ("true" if seed else "false") + "\0"
    if isinstance(seed, int):
        return str(seed) + "\0"
    if isinstance(seed, float):
        if seed.is_integer() and abs(seed) < 1e21:
            return str(int(seed)) + "\0"
        raise TypeError("SeedRandom accepts non-integral float seeds only as strings")
    raise TypeError(f"unsupported seed type: {type(seed).__name__}")


def _mix_key(seed_text: str) -> list[int]:
    """seedrandom's ``mixkey``: fold the seed's UTF-16 units into an (at most) 256-byte key."""
    key: list[int] = []
    smear = 0
    for j, unit in enumerate(utf16_units(seed_text)):
        slot = j & 255
        # A slot not written yet reads as ``undefined`` in JS; ``undefined * 19`` is NaN and
        # ``smear ^= NaN`` leaves smear as it was, i.e. XOR with 0.
        previous = key[slot] if slot < len(key) else 0
        smear ^= previous * 19
        value = (smear + unit) & 255
        if slot < len(key):
            key[slot] = value
        else:
            key.append(value)
    return key


def _keyed_state(seed_text: str) -> tuple[tuple[int, ...], int, int]:
    """The keyed state of ``seed_text``, cached unless the seed is long (the cache keeps it)."""
    return _cached_state(seed_text) if len(seed_text) <= 512 else _key_schedule(seed_text)


def _key_schedule(seed_text: str) -> tuple[tuple[int, ...], int, int]:
    """ARC4's state after keying with ``seed_text`` and dropping 256 bytes (seedrandom's start).

    Keying costs ~500 Python steps, more than a whole small render; every render of one seed
    starts from the same state, so it is computed once per seed and copied.
    """
    key = _mix_key(seed_text)
    if not key:
        key = [0]
    keylen = len(key)
    s = list(range(_WIDTH))
    j = 0
    for i in range(_WIDTH):
        t = s[i]
        j = (j + key[i % keylen] + t) & 255
        s[i] = s[j]
        s[j] = t
    # RC4-drop[256]: discard the weak start of the keystream (the bytes themselves unused)
    i = j = 0
    for _ in range(_WIDTH):
        i = (i + 1) & 255
        t = s[i]
        j = (j + t) & 255
        s[i] = s[j]
        s[j] = t
    return tuple(s), i, j


_cached_state = lru_cache(maxsize=256)(_key_schedule)


class SeedRandom:
    """seedrandom 3.0.5's default ARC4-based generator, seeded like ``seedrandom(seed)``.

    ``SeedRandom("hello").random()`` returns the same float as ``seedrandom("hello")()``.
    A non-string seed is flattened as seedrandom does (``123`` mixes the text ``"123\\0"``).
    """

    __slots__ = ("_i", "_j", "_s")

    def __init__(self, seed: str | int | float) -> None:
        state, i, j = _keyed_state(_flatten_seed(seed))
        self._s = list(state)
        self._i = i
        self._j = j

    def _bytes(self, count: int) -> int:
        """The next ``count`` keystream bytes as one big-endian integer (ARC4's ``g``)."""
        s = self._s
        i, j = self._i, self._j
        r = 0
        for _ in range(count):
            i = (i + 1) & 255
            t = s[i]
            j = (j + t) & 255
            s[i] = s[j]
            s[j] = t
            r = (r << 8) | s[(s[i] + t) & 255]
        self._i, self._j = i, j
        return r

    def random(self) -> float:
        """A float in [0, 1) built from at least 52 bits of keystream, as seedrandom's ``prng()``.

        All intermediate values stay exact integers below 2**61, so Python's correctly rounded
        int division gives the same double as JavaScript's.
        """
        n = self._bytes(_CHUNKS)
        d = _START_DENOM
        x = 0
        while n < _SIGNIFICANCE:
            n = (n + x) * _WIDTH
            d *= _WIDTH
            x = self._bytes(1)
        while n >= _OVERFLOW:
            n //= 2  # n is a multiple of 256 here and at most 8 halvings happen: exact
            d //= 2
            x >>= 1
        return (n + x) / d

    __call__ = random


#: Draws of one seed kept by :class:`SeedStream`; a render drawing more continues privately.
STREAM_DRAWS = 1024


class SeedStream:
    """The draws of one seed, computed once and shared by every render that uses the seed.

    Every render with the same seed draws the same sequence from a fresh generator, so the
    first :data:`STREAM_DRAWS` values are kept and later renders read them instead of running
    ARC4 again. The list only grows (under a lock), so readers never see a value change.
    """

    __slots__ = ("_gen", "_lock", "values")

    def __init__(self, seed: str) -> None:
        self._gen = SeedRandom(seed)
        self._lock = threading.Lock()
        self.values: list[float] = []

    def draw(self, index: int) -> float | None:
        """Draw number ``index`` (0-based), or ``None`` past :data:`STREAM_DRAWS`."""
        with self._lock:
            values = self.values
            while len(values) <= index and len(values) < STREAM_DRAWS:
                values.append(self._gen.random())
            return values[index] if index < len(values) else None

    def continuation(self) -> SeedRandom:
        """A private generator positioned after the kept draws (for draw ``STREAM_DRAWS`` on)."""
        self.draw(STREAM_DRAWS)  # makes sure all kept draws were taken
        with self._lock:
            gen = SeedRandom.__new__(SeedRandom)
            gen._s = list(self._gen._s)
            gen._i = self._gen._i
            gen._j = self._gen._j
            return gen


seed_stream = lru_cache(maxsize=256)(SeedStream)


class DrawCursor:
    """One render's position in its seed's sequence of draws.

    The first draws of a seed are shared by every render with that seed (:class:`SeedStream`);
    past them the render continues on a private generator.
    """

    __slots__ = ("rng", "stream", "taken")

    def __init__(self, stream: SeedStream) -> None:
        self.stream = stream
        self.rng: SeedRandom | None = None
        self.taken = 0

    def random(self) -> float:
        """The next draw."""
        index = self.taken
        self.taken = index + 1
        stream = self.stream
        values = stream.values
        if index < len(values):
            return values[index]
        value = stream.draw(index)
        if value is not None:
            return value
        if self.rng is None:
            self.rng = stream.continuation()
        return self.rng.random()


def pick_index(
    chat_id_hash: int | str,
    content: str,
    offset: int,
    n: int,
    reroll_seed: str | int | None = None,
) -> int:
    """The index SillyTavern 1.18's ``{{pick}}`` chooses among ``n`` items.

    ``content`` is the whole top-level input string and ``offset`` the macro's offset in it. The
    seed string is ``"<chatIdHash>-<cyrb53(content)>-<offset>"`` plus ``"-<reroll>"`` when a
    reroll seed is set (ST drops an empty one); the generator is seeded with the *string* of that
    seed string's cyrb53 hash.
    """
    if n <= 0:
        raise ValueError("pick_index needs at least one item")
    parts = [str(chat_id_hash), str(cyrb53(content)), str(offset)]
    if reroll_seed is not None and reroll_seed != "" and reroll_seed != 0:
        parts.append(str(reroll_seed))
    rng = SeedRandom(str(cyrb53("-".join(parts))))
    return int(rng.random() * n)

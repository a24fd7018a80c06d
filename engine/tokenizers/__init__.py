"""Token counting as SillyTavern does it for chat completions.

SillyTavern fits a chat-completion request into ``openai_max_context - openai_max_tokens`` tokens,
counted with the model's tokenizer. Three come with tavernbox:

* ``o200k`` and ``cl100k``: OpenAI's BPE encodings (``o200k_base``, ``cl100k_base``), counted by
  the ``tiktoken`` package from encoding files shipped inside tavernbox (``data/*.tiktoken.gz``,
  checked against their published SHA-256): nothing is downloaded at run time.
* ``estimate``: SillyTavern's fallback when it has no tokenizer, one token per 3.35 characters
  (``guesstimate``), rounded up.
* ``words`` (whitespace-separated words) stays for the world-info conformance data.

Which model families use which (SillyTavern's ``getTokenizerModel``): GPT-4o, GPT-4.1, GPT-5, o1/o3/o4
and ``chatgpt-4o`` -> ``o200k``; GPT-4 and GPT-3.5 -> ``cl100k``; a model SillyTavern has no
tokenizer for -> ``estimate`` (Claude, Llama, Mistral, Gemini and others have their own tokenizers in
SillyTavern; tavernbox does not ship them, so their counts differ; pass your own, see below).

A user adds a tokenizer with :func:`register_tokenizer`: anything with ``count(text) -> int``
(the :class:`Tokenizer` protocol). :class:`MessageCounter` applies SillyTavern's per-message rules
and caches each message's count by content hash, so re-counting a long chat per request costs
only its new messages.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import math
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import TemplateError

__all__ = [
    "AT_MOST_UTF8_BYTES",
    "MessageCounter",
    "Tokenizer",
    "at_most_utf8_bytes",
    "get_tokenizer",
    "register_tokenizer",
    "tokenizer_for_model",
    "tokenizer_names",
]

_DATA = Path(__file__).resolve().parent / "data"
#: SillyTavern's characters-per-token ratio for its no-tokenizer estimate
CHARS_PER_TOKEN = 3.35


@runtime_checkable
class Tokenizer(Protocol):
    """Counts the tokens of a text. ``name`` identifies it in records and caches."""

    name: str

    def count(self, text: str) -> int:
        """The number of tokens ``text`` encodes to."""
        ...


#: A tokenizer may set ``at_most_utf8_bytes = True`` to promise it never counts more tokens than its
#: text has UTF-8 bytes. Budgets use the promise to skip counting (and loading the tokenizer) while
#: the bytes alone cannot reach the budget: the decisions are the ones exact counts give. The
#: shipped ones keep it: a byte-level BPE token is at least one byte, a word too, and the
#: estimate is ``ceil(characters / 3.35)``. A registered tokenizer without the attribute is
#: always counted.
AT_MOST_UTF8_BYTES = "at_most_utf8_bytes"


def at_most_utf8_bytes(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` promises counts no larger than its texts' UTF-8 lengths."""
    return getattr(tokenizer, AT_MOST_UTF8_BYTES, False) is True


class _Estimate:
    name = "estimate"
    at_most_utf8_bytes = True

    def count(self, text: str) -> int:
        return math.ceil(len(text) / CHARS_PER_TOKEN)


#: JavaScript's ``\\s`` as a class: words are the runs between these (the world-info conformance rule)
_WORDS = re.compile("[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+")


class _Words:
    name = "words"
    at_most_utf8_bytes = True

    def count(self, text: str) -> int:
        return len(_WORDS.findall(text))


#: (file, SHA-256 of the decompressed file, split pattern, special tokens): OpenAI's published
#: definitions of the two encodings
_ENCODINGS: dict[str, tuple[str, str, str, dict[str, int]]] = {
    "o200k": (
        "o200k_base",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "|".join([
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k": (
        "cl100k_base",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
         "<|endofprompt|>": 100276},
    ),
}


def _ranks(raw: bytes, *, in_order: bool = False) -> dict[bytes, int]:
    """The ``token rank`` lines of an encoding file as ``{token bytes: rank}``.

    Read in C loops (one split, ``map`` over the halves): the per-line Python loop took longer
    than building the encoding itself, and this runs on the first request of every process that
    counts tokens. A test checks it against the line-by-line reading for the shipped files.

    ``in_order``: the ranks are known to be 0, 1, 2... in line order (true of both shipped files,
    whose contents are pinned by their digests; a test checks it), so they are not parsed.
    """
    fields = raw.split()
    if len(fields) % 2:
        raise TemplateError("an encoding file has a line without a rank", code="INTERNAL_ERROR")
    tokens = map(binascii.a2b_base64, fields[0::2])
    if in_order:
        return dict(zip(tokens, range(len(fields) // 2)))
    return dict(zip(tokens, map(int, fields[1::2])))


class _Tiktoken:
    """An OpenAI encoding, loaded from the shipped file on first use."""

    at_most_utf8_bytes = True

    def __init__(self, name: str) -> None:
        self.name = name
        self._encoding: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._encoding is None:
                import tiktoken

                file, digest, pattern, special = _ENCODINGS[self.name]
                raw = gzip.decompress((_DATA / f"{file}.tiktoken.gz").read_bytes())
                if hashlib.sha256(raw).hexdigest() != digest:
                    raise TemplateError(f"the shipped {file} encoding file is damaged (hash mismatch)",
                                        code="INTERNAL_ERROR")
                ranks = _ranks(raw, in_order=True)  # the digest above pins a file whose ranks are in order
                self._encoding = tiktoken.Encoding(f"tavernbox-{file}", pat_str=pattern, mergeable_ranks=ranks,
                                                   special_tokens=special)
        return self._encoding

    def count(self, text: str) -> int:
        encoding = self._encoding or self._load()
        # special-token text in a prompt is ordinary text here, as SillyTavern's tokenizer treats it
        return len(encoding.encode_ordinary(text))


_REGISTRY: dict[str, Callable[[], Tokenizer]] = {
    "o200k": lambda: _Tiktoken("o200k"),
    "cl100k": lambda: _Tiktoken("cl100k"),
    "estimate": _Estimate,
    "words": _Words,
    # SillyTavern's Llama 3 tokenizer, read from the user's copy (hf_bpe.py says why)
    "llama3": lambda: _hf_bpe("llama3.json"),
}


def _sentencepiece(name: str) -> Tokenizer:
    from ..extras import require_extra
    from .sentencepiece_models import SentencePieceModel

    require_extra("tokenizers", f"the {name} tokenizer")

    return SentencePieceModel(name)


# SillyTavern's sentencepiece tokenizers, read from the user's copies (sentencepiece_models.py)
for _name in ("llama", "mistral", "yi", "gemma", "nerdstash", "nerdstash_v2", "jamba"):
    _REGISTRY[_name] = (lambda n: lambda: _sentencepiece(n))(_name)


def _hf_bpe(file_name: str) -> Tokenizer:
    from .hf_bpe import HfByteLevelBpe

    return HfByteLevelBpe(file_name)
_INSTANCES: dict[str, Tokenizer] = {}


def register_tokenizer(name: str, factory: Callable[[], Tokenizer] | Tokenizer) -> None:
    """Make a tokenizer available by ``name`` (a factory, or an instance with ``count(text) -> int``)."""
    if isinstance(factory, Tokenizer):
        instance = factory
        _REGISTRY[name] = lambda: instance
    else:
        _REGISTRY[name] = factory
    _INSTANCES.pop(name, None)


def tokenizer_names() -> list[str]:
    return sorted(_REGISTRY)


def get_tokenizer(name: str) -> Tokenizer:
    """The tokenizer registered as ``name`` (``INPUT_INVALID`` naming the known ones otherwise)."""
    found = _INSTANCES.get(name)
    if found is None:
        factory = _REGISTRY.get(name)
        if factory is None:
            raise TemplateError(f"unknown tokenizer {name!r} (known: {', '.join(tokenizer_names())})",
                                code="INPUT_INVALID")
        found = _INSTANCES[name] = factory()
    return found


def tokenizer_for_model(model: str) -> str:
    """SillyTavern's choice of tokenizer for a chat-completion model name (``getTokenizerModel``)."""
    m = model.lower()
    if any(k in m for k in ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4")):
        return "o200k"
    if "gpt-4" in m or "gpt-3.5" in m or "gpt-35" in m:
        return "cl100k"
    return "estimate"


class MessageCounter:
    """Chat-completion message counts with SillyTavern's overhead, cached by content.

    A message ``{"role", "content", "name"?}`` counts as its role's and content's tokens, plus 3,
    plus its name's tokens and 1 when it has a name (SillyTavern's tiktoken rule: 3 per message,
    1 per name, the request padding taken off per message). The estimate tokenizer counts the
    message's JSON text instead, as SillyTavern's fallback does.
    """

    def __init__(self, tokenizer: Tokenizer, *, cache_size: int = 200_000) -> None:
        self.tokenizer = tokenizer
        self._cache: dict[tuple[str, str, str], int] = {}
        self._cache_size = cache_size
        self.hits = 0
        self.misses = 0

    def text(self, text: str) -> int:
        return self.tokenizer.count(text)

    def message(self, message: Mapping[str, Any]) -> int:
        role = str(message.get("role") or "")
        content = message.get("content")
        content = content if isinstance(content, str) else str(content or "")
        name = str(message.get("name") or "")
        key = (role, content, name)
        found = self._cache.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        if isinstance(self.tokenizer, _Estimate):
            import json

            body = {"role": role, "content": content, **({"name": name} if name else {})}
            count = self.tokenizer.count(json.dumps([body], ensure_ascii=False, separators=(",", ":")))
        else:
            count = 3 + self.tokenizer.count(role) + self.tokenizer.count(content)
            if name:
                count += self.tokenizer.count(name) + 1
        if len(self._cache) >= self._cache_size:
            self._cache.clear()
        self._cache[key] = count
        return count

    def messages(self, messages: list[Mapping[str, Any]]) -> int:
        return sum(self.message(m) for m in messages)

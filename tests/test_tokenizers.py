"""Tokenizers: OpenAI's encodings from shipped files, SillyTavern's estimate and message overheads."""

from __future__ import annotations

import socket

import pytest

from tavernbox.errors import TemplateError
from tavernbox.tokenizers import MessageCounter, get_tokenizer, register_tokenizer, tokenizer_for_model


def test_o200k_and_cl100k_count_known_texts() -> None:
    # reference counts of OpenAI's encodings for these strings
    assert get_tokenizer("o200k").count("Hello world, how are you?") == 7
    assert get_tokenizer("cl100k").count("Hello world, how are you?") == 7
    assert get_tokenizer("o200k").count("") == 0
    # the two encodings differ on non-English text (o200k is denser)
    text = "Thành phố yên tĩnh trong đêm. 城市今晚很安静。"
    assert get_tokenizer("o200k").count(text) < get_tokenizer("cl100k").count(text)


def test_special_token_text_counts_as_ordinary_text() -> None:
    assert get_tokenizer("o200k").count("<|endoftext|>") > 1


def test_encodings_load_without_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a tokenizer tried to use the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    from tavernbox.tokenizers import _Tiktoken

    assert _Tiktoken("cl100k").count("offline") >= 1


def test_estimate_is_sillytaverns_guess() -> None:
    assert get_tokenizer("estimate").count("a" * 67) == 20  # ceil(67 / 3.35)


def test_message_overhead_is_three_plus_role_plus_name() -> None:
    counter = MessageCounter(get_tokenizer("o200k"))
    plain = counter.message({"role": "user", "content": "Hello world, how are you?"})
    assert plain == 3 + 1 + 7
    named = counter.message({"role": "user", "content": "Hello world, how are you?", "name": "Ash"})
    assert named == plain + get_tokenizer("o200k").count("Ash") + 1


def test_counts_are_cached_by_content() -> None:
    counter = MessageCounter(get_tokenizer("o200k"))
    chat = [{"role": "user", "content": f"message {i}"} for i in range(200)]
    counter.messages(chat)
    assert counter.misses == 200
    counter.messages(chat + [{"role": "assistant", "content": "new"}])
    assert (counter.misses, counter.hits) == (201, 200)


def test_a_user_tokenizer_is_anything_with_count() -> None:
    class Chars:
        name = "chars"

        def count(self, text: str) -> int:
            return len(text)

    register_tokenizer("chars", Chars())
    assert get_tokenizer("chars").count("abcd") == 4
    with pytest.raises(TemplateError) as err:
        get_tokenizer("nope")
    assert err.value.code == "INPUT_INVALID" and "o200k" in err.value.message


@pytest.mark.parametrize(("model", "name"), [("gpt-4o", "o200k"), ("gpt-4o-mini", "o200k"), ("gpt-4.1", "o200k"),
                                             ("gpt-4-turbo", "cl100k"), ("gpt-3.5-turbo", "cl100k"),
                                             ("claude-3-5-sonnet", "estimate")])
def test_model_families_map_to_tokenizers(model: str, name: str) -> None:
    assert tokenizer_for_model(model) == name

"""The continue's second size check (``checkPromptSize``), counted with a character count."""

from __future__ import annotations

from collections.abc import Callable

from tavernbox.instruct import PromptBudget
from tavernbox.instruct.fitting import Rechecked, recheck_continue


def _name_line(text: str) -> str:
    """Instruct off: ``modifyLastPromptLine`` puts ``Mira:`` on a line of its own."""
    return text + ("" if text.endswith("\n") else "\n") + "Mira:"


def _check(max_prompt: int, modify: Callable[[str], str] = _name_line, pin: bool = False) -> Rechecked:
    budget = PromptBudget(count=len, max_prompt=max_prompt, padding=0, pin_examples=pin)
    return recheck_continue(budget, story="S" * 10, examples=["E" * 10, "E" * 10], chat_start="",
                            messages=["a" * 40, "b" * 4, "c\n"], held="Mira: x", modify=modify)


def test_a_prompt_that_fits_is_counted_once() -> None:
    # 10 + 20 + (40 + 4 + len("c\nMira:")) + "\n" + "\nMira:" + 7 = 95
    assert _check(95) == Rechecked(dropped=0, examples=2, modified=1)


def test_examples_go_first_then_the_oldest_messages() -> None:
    # every count adds the name line to the newest message again (6 more characters):
    # 95, then 91 with one example, 87 with none, then 53 without the oldest message
    assert _check(91) == Rechecked(dropped=0, examples=1, modified=2)
    assert _check(60) == Rechecked(dropped=1, examples=0, modified=4)


def test_in_instruct_mode_a_continue_adds_no_prompt_line() -> None:
    # 10 + 20 + 46 + 1 + 0 + 7 = 84; 74 with one example; 64 with none; 24 without the oldest
    assert _check(84, modify=lambda text: text) == Rechecked(0, 2, 1)
    assert _check(60, modify=lambda text: text) == Rechecked(1, 0, 4)


def test_pinned_examples_stay_and_everything_else_can_go() -> None:
    # 95, 61, 63 (the name line grows faster than the messages go), then 44 with no message left
    assert _check(60, pin=True) == Rechecked(dropped=3, examples=2, modified=0)

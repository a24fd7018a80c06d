"""Shared helpers for the bridge tests: a scripted resolver and a render-or-code runner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tavernbox.bridge import (
    ActivationRecord,
    CharacterSource,
    LookupRequest,
    PresetSource,
    Resolution,
    Revocable,
    StaticVariables,
    TemplateSources,
    WorldBookSource,
    render_with_dependencies,
)
from tavernbox.errors import TemplateError

BOOK = {
    "name": "Lore",
    "entries": {
        "0": {"uid": 0, "comment": "Town", "content": "A quiet town. <%= 1 + 1 %> {{user}}"},
        "1": {"uid": 1, "comment": "Secret", "content": "hidden"},
        "7": {"uid": 7, "comment": "Castle gate", "content": "The gate."},
    },
}
OTHER_BOOK = {"name": "Extra", "entries": {"0": {"uid": 0, "comment": "Town", "content": "another town"}}}
PRESET = {"prompts": [{"identifier": "main", "name": "Main Prompt", "content": "Be helpful."},
                      {"identifier": "jb", "name": "Jailbreak", "content": "JB text"}]}
CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Alice", "description": "Alice is a <b>witch</b>.", "first_mes": "Hi"}}
VARS = {"a": {"b": [10, 20], "x.y": "quoted"}, "a.b": "exact", "n": None, "s": "str",
        "stat_data": {"hp": [42, "health"]}}


def sources(variables: Any = VARS, *, activated: dict[str, list[int]] | None = None, **kw: Any) -> TemplateSources:
    wb = WorldBookSource([BOOK, OTHER_BOOK], ActivationRecord.from_uids(activated or {"Lore": [0, 7], "Extra": [0]}))
    return TemplateSources(variables=StaticVariables(variables) if variables is not None else None, world_books=wb,
                           preset=PresetSource(PRESET, name="default"), character=CharacterSource(CARD), **kw)


def text(source: str, src: Any = None, **kw: Any) -> str:
    return render_with_dependencies(source, src if src is not None else sources(), **kw).text


def code(source: str, src: Any = None, **kw: Any) -> tuple[str, TemplateError]:
    try:
        result = render_with_dependencies(source, src if src is not None else sources(), **kw)
    except TemplateError as exc:
        return exc.code, exc
    raise AssertionError(f"expected an error, got {result.text!r}")


class Scripted:
    """A resolver answering every lookup from ``answer(request)`` with a revocable lease each."""

    def __init__(self, answer: Callable[[LookupRequest], Any] = lambda r: f"<{r.kind}:{','.join(map(str, r.args))}>",
                 on_resolve: Callable[[LookupRequest, Scripted], None] | None = None) -> None:
        self.answer = answer
        self.on_resolve = on_resolve
        self.calls: list[LookupRequest] = []
        self.leases: list[Revocable] = []

    def resolve(self, request: LookupRequest) -> Resolution:
        self.calls.append(request)
        if self.on_resolve is not None:
            self.on_resolve(request, self)
        lease = Revocable()
        self.leases.append(lease)
        return Resolution(f"test:{request.kind}", "test", self.answer(request), f"r{len(self.calls)}", None,
                          lease.check_current)

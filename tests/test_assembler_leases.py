"""Leases re-checked after ALL sources of an assembly resolved (research 10.4 step 6, fact 49).

A source hands the leases its blocks depend on back under the output key ``leases``; the registry
checks them once more after the last source resolved and before placement. A later source that
changes the MVU state a template read, or revokes a permission it ran under, fails the whole
request with the lease's code: never a partial result, never a fallback to a fresh read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from _assembler_support import rule

from tavernbox import TemplateError
from tavernbox.assembler import Assembler, SourceRegistry
from tavernbox.assembler.sources import BUILTINS
from tavernbox.assembler.templates import TEMPLATE_SOURCE_ID, prompt_template_source
from tavernbox.bridge import Management, MvuSource, Revocable, UsageDecision
from tavernbox.store.memory import MemorySnapshotStore

KIND = TEMPLATE_SOURCE_ID
MESSAGES = [{"id": "s", "role": "system", "content": "S"}, {"id": "u", "role": "user", "content": "hi"}]
READS_MVU = "HP <%= getvar('stat_data.hp') %>"


def template(tid: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"id": f"prompt-template:{tid}", "name": tid.title(), "content": content, "enabled": True,
            "session_ids": ["*"], **extra}


def later_source(action: Callable[[], None] | None, *, is_async: bool = False, sid: str = "test.later") -> dict[str, Any]:
    """A source that runs ``action`` during its own resolve, then contributes one system block."""

    def resolve(context: Any, rule: Any) -> dict[str, Any]:
        if action is not None:
            action()
        return {"blocks": [{"type": "text", "id": "later", "text": "LATER", "role": "system"}]}

    async def resolve_async(context: Any, rule: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return resolve(context, rule)

    return {"id": sid, "plugin_id": "test", "name": "Later", "resolve": resolve_async if is_async else resolve}


def registry(*extra: Any, mvu: dict[str, MvuSource] | None = None, management: Management | None = None) -> SourceRegistry:
    """The built-ins with the prompt-template source bound to live host state, plus ``extra`` sources."""
    reg = SourceRegistry()
    for d in BUILTINS:
        if d.id != TEMPLATE_SOURCE_ID:
            reg.register(d)
    reg.register(prompt_template_source(mvu=mvu, management=management))
    for source in extra:
        reg.register(source)
    return reg


def request(rules: list[dict[str, Any]], templates: list[dict[str, Any]]) -> dict[str, Any]:
    return {"preset": {"format": "dsh-tavern-request-assembly", "version": 1, "name": "t", "rules": rules},
            "messages": MESSAGES, "input_ids": ["u"], "session_id": "chat-1",
            "assets": {"prompt_templates": templates}}


def rules_with_later(first: str = KIND) -> list[dict[str, Any]]:
    order = [KIND, "test.later"] if first == KIND else ["test.later", KIND]
    return [rule("native-system"), *(rule(k) for k in order), rule("history"), rule("input")]


def hero() -> MvuSource:
    return MvuSource({"stat_data": {"hp": 10}}, resource_id="mvu:hero")


def test_control_nothing_changes_and_the_assembly_passes() -> None:
    live = hero()
    reg = registry(later_source(None), mvu={"mvu:hero": live})
    r = Assembler(reg).assemble(request(rules_with_later(), [template("a", READS_MVU, variable_resource_id="mvu:hero")]))
    assert r.messages[0]["content"] == "S\n\nHP 10\n\nLATER"
    assert live.reads == 1
    # the leases are host objects: nothing of them reaches the record of the template source's output
    recorded = json.dumps(r.record, ensure_ascii=False)
    assert '"leases"' not in recorded


def test_a_later_source_changing_the_mvu_state_fails_the_whole_assembly() -> None:
    live = hero()
    reg = registry(later_source(lambda: live.update({"stat_data": {"hp": 3}})), mvu={"mvu:hero": live})
    store = MemorySnapshotStore()
    with pytest.raises(TemplateError) as err:
        Assembler(reg, store=store).assemble(
            request(rules_with_later(), [template("a", READS_MVU, variable_resource_id="mvu:hero")]))
    assert err.value.code == "SOURCE_CONTENT_CHANGED"
    assert "after all sources resolved" in err.value.message and KIND in err.value.message
    assert store.load("chat-1").revision == 0  # nothing of the failed request was kept


def test_a_later_source_revoking_the_mvu_permission_fails_with_policy_changed() -> None:
    live = hero()
    reg = registry(later_source(lambda: live.lease.revoke()), mvu={"mvu:hero": live})
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request(rules_with_later(), [template("a", READS_MVU, variable_resource_id="mvu:hero")]))
    assert err.value.code == "SOURCE_POLICY_CHANGED"


def test_fact_49_a_later_asynchronous_source_invalidating_the_lease_fails_the_assembly() -> None:
    live = hero()
    reg = registry(later_source(lambda: live.lease.revoke(), is_async=True), mvu={"mvu:hero": live})
    req = request(rules_with_later(), [template("a", READS_MVU, variable_resource_id="mvu:hero")])
    with pytest.raises(TemplateError) as err:
        asyncio.run(Assembler(reg).assemble_async(req))
    assert err.value.code == "SOURCE_POLICY_CHANGED"
    calm = registry(later_source(None, is_async=True), mvu={"mvu:hero": hero()})
    assert asyncio.run(Assembler(calm).assemble_async(req)).messages[0]["content"] == "S\n\nHP 10\n\nLATER"


def test_a_later_source_revoking_the_template_decision_fails_the_assembly() -> None:
    management = Management()
    grant = Revocable()
    management.register_manager("prompt-template:a",
                                lambda req: UsageDecision(True, check_current=grant.check_current))
    reg = registry(later_source(lambda: management.unregister_manager("prompt-template:a")), management=management)
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request(rules_with_later(), [template("a", "managed text")]))
    assert err.value.code == "SOURCE_POLICY_CHANGED"
    grant_only = Management()
    withdrawn = Revocable()
    grant_only.register_manager("prompt-template:a",
                                lambda req: UsageDecision(True, check_current=withdrawn.check_current))
    reg = registry(later_source(lambda: withdrawn.revoke()), management=grant_only)
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request(rules_with_later(), [template("a", "managed text")]))
    assert err.value.code == "SOURCE_POLICY_CHANGED"


def test_a_change_before_the_template_ran_or_to_something_it_did_not_read_is_fine() -> None:
    live = hero()
    reg = registry(later_source(lambda: live.update({"stat_data": {"hp": 7}})), mvu={"mvu:hero": live})
    # ordered before the template: the template reads the new state and holds a current lease
    r = Assembler(reg).assemble(request(rules_with_later(first="test.later"),
                                        [template("a", READS_MVU, variable_resource_id="mvu:hero")]))
    assert r.messages[0]["content"] == "S\n\nLATER\n\nHP 7"
    # ordered after a template that never touches variables: it holds no MVU lease (fact 48)
    other = hero()
    reg = registry(later_source(lambda: other.update({"stat_data": {"hp": 1}})), mvu={"mvu:hero": other})
    r = Assembler(reg).assemble(request(rules_with_later(), [template("a", "STATIC", variable_resource_id="mvu:hero")]))
    assert r.messages[0]["content"] == "S\n\nSTATIC\n\nLATER" and other.reads == 0


def _forms(revocable: Revocable) -> list[Any]:
    """Every accepted ``leases`` value, each tied to ``revocable``."""
    from tavernbox.bridge import LeaseSet, Resolution

    lease_set = LeaseSet()
    lease_set.add("the set's lease", revocable.check_current)
    resolution = Resolution("mvu:x", "test", {}, "r1", None, revocable.check_current)

    class Expansion:
        def check_leases(self, when: str) -> None:
            lease_set.check(when)

    return [revocable.check_current, lease_set, resolution, Expansion(), [lease_set, resolution]]


def _holder_registry(form: Any, action: Callable[[], None] | None) -> SourceRegistry:
    reg = SourceRegistry()
    for d in BUILTINS:
        reg.register(d)
    reg.register({"id": "test.holder", "plugin_id": "test", "name": "Holder",
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "h", "text": "H", "role": "system"}],
                                           "leases": form}})
    reg.register(later_source(action))
    return reg


@pytest.mark.parametrize("index", range(5), ids=["callable", "LeaseSet", "Resolution", "check_leases", "list"])
def test_any_source_may_hand_back_leases_in_every_accepted_form(index: int) -> None:
    rules = [rule("native-system"), rule("test.holder"), rule("test.later"), rule("history"), rule("input")]
    revocable = Revocable()
    reg = _holder_registry(_forms(revocable)[index], lambda: revocable.revoke("content_changed"))
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request(rules, []))
    assert err.value.code == "SOURCE_CONTENT_CHANGED"
    calm = _holder_registry(_forms(Revocable())[index], None)
    assert Assembler(calm).assemble(request(rules, [])).messages[0]["content"] == "S\n\nH\n\nLATER"


def test_a_lease_that_is_not_a_lease_is_rejected_at_its_source() -> None:
    reg = SourceRegistry()
    for d in BUILTINS:
        reg.register(d)
    reg.register({"id": "test.holder", "plugin_id": "test", "name": "Holder",
                  "resolve": lambda c, r: {"blocks": [], "leases": ["not a lease"]}})
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request([rule("native-system"), rule("test.holder"), rule("input")], []))
    assert err.value.code == "ASSEMBLY_SOURCE_INVALID" and err.value.path == "$.leases[0]"


def test_a_check_leases_that_breaks_counts_as_revoked() -> None:
    class Broken:
        def check_leases(self, when: str) -> None:
            raise RuntimeError("store offline")

    reg = SourceRegistry()
    for d in BUILTINS:
        reg.register(d)
    reg.register({"id": "test.holder", "plugin_id": "test", "name": "Holder",
                  "resolve": lambda c, r: {"blocks": [], "leases": Broken()}})
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request([rule("native-system"), rule("test.holder"), rule("input")], []))
    assert err.value.code == "SOURCE_POLICY_CHANGED"

"""Native and managed sources: who may allow a template, or a template's dependency, to be used.

Seed 003 ("manager public contract"): a resource is *native* until a trusted manager registers for
it, and *managed* while one is registered; unregistering restores the default and invalidates
every permission given under the old registration. Generic usage handlers (listeners) may be
attached to either mode. Every handler is asked in turn (each call is an "await"); after each
one the registration epoch must be unchanged (``SOURCE_POLICY_CHANGED``).

For a template (``authorize_template``): native with no listener is allowed; a handler that
returns ``None`` abstains; an explicit denial, or a managed template with no allowing manager,
skips the template (``TEMPLATE_POLICY_SKIPPED``, not an error of the request). An allowance must
carry a ``check_current`` lease (``SOURCE_LEASE_REQUIRED``).

For a dependency (``authorize_dependency``, ``event.usage == "prompt-template-dependency"``): the
consumer template is context only, it lends no permission. Native with no listener keeps the
source's own permission; otherwise *every* listener (and the manager, when managed) must return
an explicit allowance with a lease; ``None``, a denial or an error fails the render
(``TEMPLATE_DEPENDENCY_DENIED``), never falling back to a raw read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import TemplateError
from .leases import CheckCurrent, LeaseCheck, StaleLease, lease_answer

__all__ = ["Management", "TemplateSkipped", "UsageDecision", "UsageHandler", "UsageRequest"]

Mode = Literal["native", "managed"]


@dataclass(frozen=True)
class UsageRequest:
    """What a usage handler is asked: resource ``id``, the event ``on``, ``scope``, ``event`` details."""

    id: str
    on: str
    scope: Mapping[str, Any]
    event: Mapping[str, Any]
    management_mode: Mode


@dataclass(frozen=True)
class UsageDecision:
    """A handler's answer: ``enabled`` with a ``check_current`` lease, or a denial."""

    enabled: bool
    config_revision: str | None = None
    check_current: CheckCurrent | None = field(default=None, compare=False)
    strategy: tuple[str, ...] | None = None


UsageHandler = Callable[[UsageRequest], "UsageDecision | None"]


class TemplateSkipped(TemplateError):
    """A usage decision denied the template: no output, and not a failure of the request."""

    default_code = "TEMPLATE_POLICY_SKIPPED"


@dataclass
class _Registration:
    handler: UsageHandler
    provider_id: str


class Management:
    """The trusted registry of managers and usage handlers, per resource id."""

    def __init__(self) -> None:
        self._managers: dict[str, _Registration] = {}
        self._listeners: dict[str, list[UsageHandler]] = {}
        self._epochs: dict[str, int] = {}

    def mode(self, resource_id: str) -> Mode:
        """``managed`` while a manager is registered for ``resource_id``, else ``native``."""
        return "managed" if resource_id in self._managers else "native"

    def register_manager(self, resource_id: str, handler: UsageHandler, provider_id: str = "manager") -> None:
        """Make ``resource_id`` managed by ``handler`` (permissions given before are void)."""
        self._managers[resource_id] = _Registration(handler, provider_id)
        self._bump(resource_id)

    def unregister_manager(self, resource_id: str) -> None:
        """Return ``resource_id`` to native; every lease given under the manager becomes stale."""
        if self._managers.pop(resource_id, None) is not None:
            self._bump(resource_id)

    def add_listener(self, resource_id: str, handler: UsageHandler) -> None:
        """Attach a generic usage handler (it does not change who manages the resource)."""
        self._listeners.setdefault(resource_id, []).append(handler)
        self._bump(resource_id)

    def _bump(self, resource_id: str) -> None:
        self._epochs[resource_id] = self._epochs.get(resource_id, 0) + 1

    def _epoch_lease(self, resource_id: str) -> CheckCurrent:
        epoch = self._epochs.get(resource_id, 0)
        return lambda: "current" if self._epochs.get(resource_id, 0) == epoch else "policy_changed"

    def _ask(self, resource_id: str, handler: UsageHandler, request: UsageRequest) -> UsageDecision | None | Exception:
        epoch = self._epochs.get(resource_id, 0)
        try:
            answer = handler(request)
        except Exception as exc:  # noqa: BLE001 - a failing handler is a refusal, recorded as such
            answer = exc
        if self._epochs.get(resource_id, 0) != epoch:
            raise TemplateError(f"the management of {resource_id} changed while its usage was being decided",
                                code="SOURCE_POLICY_CHANGED")
        if answer is not None and not isinstance(answer, (UsageDecision, Exception)):
            return TypeError("a usage handler returned something other than a UsageDecision")
        return answer

    def _handlers(self, resource_id: str) -> list[UsageHandler]:
        handlers = list(self._listeners.get(resource_id, ()))
        manager = self._managers.get(resource_id)
        if manager is not None:
            handlers.insert(0, manager.handler)
        return handlers

    def authorize_template(self, resource_id: str, scope: Mapping[str, Any] | None = None) -> list[CheckCurrent]:
        """Decide whether a template may run; return its leases or raise ``TemplateSkipped``."""
        mode = self.mode(resource_id)
        request = UsageRequest(resource_id, "before_model_request", dict(scope or {}),
                               {"usage": "prompt-template"}, mode)
        leases: list[CheckCurrent] = [self._epoch_lease(resource_id)]
        allowed_by_manager = False
        for index, handler in enumerate(self._handlers(resource_id)):
            is_manager = mode == "managed" and index == 0
            answer = self._ask(resource_id, handler, request)
            if answer is None:
                continue  # abstains
            if isinstance(answer, Exception) or not answer.enabled:
                why = f"a usage handler failed ({type(answer).__name__})" if isinstance(answer, Exception) \
                    else "a usage decision denied it"
                raise TemplateSkipped(f"template {resource_id} was skipped: {why}")
            if answer.check_current is None:
                raise TemplateError(f"the allowance for {resource_id} carries no lease (check_current)",
                                    code="SOURCE_LEASE_REQUIRED")
            leases.append(answer.check_current)
            allowed_by_manager = allowed_by_manager or is_manager
        if mode == "managed" and not allowed_by_manager:
            raise TemplateSkipped(f"template {resource_id} is managed and its manager gave no allowance")
        return leases

    def authorize_dependency(self, resource_id: str, consumer: Mapping[str, Any],
                             scope: Mapping[str, Any] | None = None) -> list[CheckCurrent]:
        """Decide whether a template may read ``resource_id``; return the leases or raise ``TEMPLATE_DEPENDENCY_DENIED``."""
        mode = self.mode(resource_id)
        request = UsageRequest(resource_id, "before_model_request", dict(scope or {}),
                               {"usage": "prompt-template-dependency", "consumer": dict(consumer)}, mode)
        leases: list[CheckCurrent] = [self._epoch_lease(resource_id)]
        for handler in self._handlers(resource_id):
            answer = self._ask(resource_id, handler, request)
            if answer is None or isinstance(answer, Exception) or not answer.enabled:
                why = ("no explicit permission" if answer is None else
                       f"the handler failed ({type(answer).__name__})" if isinstance(answer, Exception) else "denied")
                raise TemplateError(f"the dependency {resource_id} may not be used by {consumer.get('id')}: {why}",
                                    code="TEMPLATE_DEPENDENCY_DENIED")
            if answer.check_current is None:
                raise TemplateError(f"the permission for {resource_id} carries no lease (check_current)",
                                    code="TEMPLATE_DEPENDENCY_DENIED")
            leases.append(answer.check_current)
        return leases


def combine(checks: list[CheckCurrent]) -> CheckCurrent:
    """One lease that is current only while every lease in ``checks`` is."""

    def check() -> LeaseCheck | StaleLease:
        for c in checks:
            state, detail = lease_answer(c)
            if state != "current":
                return StaleLease(state, detail) if detail else state
        return "current"

    return check

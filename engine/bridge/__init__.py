"""The template API's only door to the world: lookups, leases, replays and the sources they read.

A template (restricted EJS, run by ``tavernbox.sandbox``) reads variables, world-info entries,
preset prompts and the character through ``getvar``/``getwi``/``getpreset``/``getchar``. The VM
answers from a table of already-authorised JSON; a miss voids the pass, the host resolves it
through a trusted :class:`DependencyResolver` and replays the template in a fresh VM. Every
answer carries a lease (:class:`Resolution`) that is re-checked at every step and once more after
the whole assembly (:meth:`BridgeResult.check_leases`).
"""

from __future__ import annotations

from .character import CharacterSource
from .leases import AssetLease, InputLeases, LeaseCheck, LeaseError, LeaseSet, Resolution, Revocable, StaleLease
from .management import Management, TemplateSkipped, UsageDecision, UsageRequest
from .metadata import Decorator, TemplateMetadata, inspect_template_metadata
from .mvu import MvuSource, expand_mvu_macros
from .preset import PresetSource
from .replay import BridgeResult, DependencyRead, render_with_dependencies
from .resolver import KINDS, DependencyResolver, LookupRequest
from .resources import PromptTemplateResource, TemplateExpansion, expand_prompt_template
from .sources import StaticVariables, TemplateSources, render_with_sources, sources_from_inputs
from .worldbook import ActivationRecord, WorldBookSource
from .mvu_update import MvuUpdate, apply_mvu_reply

__all__ = [
    "KINDS",
    "ActivationRecord",
    "AssetLease",
    "BridgeResult",
    "CharacterSource",
    "Decorator",
    "DependencyRead",
    "DependencyResolver",
    "InputLeases",
    "LeaseCheck",
    "LeaseError",
    "LeaseSet",
    "LookupRequest",
    "Management",
    "MvuSource",
    "PresetSource",
    "PromptTemplateResource",
    "Resolution",
    "Revocable",
    "StaleLease",
    "StaticVariables",
    "TemplateExpansion",
    "TemplateMetadata",
    "TemplateSkipped",
    "TemplateSources",
    "UsageDecision",
    "UsageRequest",
    "WorldBookSource",
    "expand_mvu_macros",
    "expand_prompt_template",
    "inspect_template_metadata",
    "render_with_dependencies",
    "render_with_sources",
    "sources_from_inputs",
    "MvuUpdate",
    "apply_mvu_reply",
]

"""SillyTavern's world-info fields, in one table: an entry's fields and the global settings.

Two layers read them and must agree: the asset importers (``assets/worldbooks.py``: the world-file
model, SillyTavern's new-entry template, which fields may hold ``null``) and world-info activation
(``worldinfo/entries.py``: which field becomes which :class:`~tavernbox.worldinfo.entries.Entry`
attribute and how its value is read; ``worldinfo/settings.py``: the settings' names), as does the
request file (``sillytavern/request.py``: the settings a request may set, with their bounds).
Each builds its models, defaults and name maps from the rows below, so a field is added or changed
here, once. This module sits below both layers and imports nothing of the project.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["ENTRY_FIELDS", "ENTRY_KINDS", "NO_DEFAULT", "SETTING_FIELDS", "EntryField", "SettingField"]

#: the shapes an entry field's value takes, as activation reads them (``worldinfo/entries.py``) and the
#: world-file model declares them (``assets/worldbooks.py``)
ENTRY_KINDS = {
    "uid": "an integer or a string (the entry's id; required in the model)",
    "strings": "a list of strings",
    "text": "a string",
    "content": "the entry's text (its leading @@decorator lines are split off for activation)",
    "bool": "true or false",
    "optbool": "true, false or null (null: the global setting decides)",
    "int": "an integer",
    "optint": "an integer or null",
    "num": "a number",
    "delay": "true (level 1), false, or a recursion level number",
    "filter": "a character filter object {isExclude, names, tags}",
}


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: the default of a field that is not part of SillyTavern's new-entry template
NO_DEFAULT: Any = _NoDefault()


class EntryField(NamedTuple):
    """One field of a world-book entry."""

    #: SillyTavern's name in a world file (``selectiveLogic``)
    st_name: str
    #: ours: the models' attribute name, also the card book's ``extensions`` name (``selective_logic``)
    attr: str
    #: the value's shape, one of :data:`ENTRY_KINDS`
    kind: str
    #: SillyTavern 1.18's new-entry template value (``newWorldInfoEntryDefinition``), or :data:`NO_DEFAULT`
    st_default: Any = NO_DEFAULT
    #: activation reads it (an :class:`~tavernbox.worldinfo.entries.Entry` attribute)
    activation: bool = True
    #: an exported book may hold ``null`` here, kept as ``null`` (fields whose default is ``null`` may too)
    nullable: bool = False
    #: SillyTavern does arithmetic on it: integers past 2^53-1 are flagged on import
    arithmetic: bool = False


#: Every entry field, in SillyTavern's template order (``uid`` first, ``displayIndex`` last).
ENTRY_FIELDS: tuple[EntryField, ...] = (
    EntryField("uid", "uid", "uid", arithmetic=True),
    EntryField("key", "key", "strings", []),
    EntryField("keysecondary", "keysecondary", "strings", []),
    EntryField("comment", "comment", "text", ""),
    EntryField("content", "content", "content", ""),
    EntryField("constant", "constant", "bool", False),
    EntryField("vectorized", "vectorized", "bool", False),
    EntryField("selective", "selective", "bool", True),
    EntryField("selectiveLogic", "selective_logic", "int", 0),
    EntryField("addMemo", "add_memo", "bool", False, activation=False),
    EntryField("order", "order", "num", 100, arithmetic=True),
    EntryField("position", "position", "int", 0),
    EntryField("disable", "disable", "bool", False),
    EntryField("ignoreBudget", "ignore_budget", "bool", False),
    EntryField("excludeRecursion", "exclude_recursion", "bool", False),
    EntryField("preventRecursion", "prevent_recursion", "bool", False),
    EntryField("matchPersonaDescription", "match_persona_description", "bool", False),
    EntryField("matchCharacterDescription", "match_character_description", "bool", False),
    EntryField("matchCharacterPersonality", "match_character_personality", "bool", False),
    EntryField("matchCharacterDepthPrompt", "match_character_depth_prompt", "bool", False),
    EntryField("matchScenario", "match_scenario", "bool", False),
    EntryField("matchCreatorNotes", "match_creator_notes", "bool", False),
    EntryField("delayUntilRecursion", "delay_until_recursion", "delay", 0),
    EntryField("probability", "probability", "num", 100, arithmetic=True),
    EntryField("useProbability", "use_probability", "bool", True),
    EntryField("depth", "depth", "int", 4, arithmetic=True),
    EntryField("outletName", "outlet_name", "text", ""),
    EntryField("group", "group", "text", ""),
    EntryField("groupOverride", "group_override", "bool", False),
    EntryField("groupWeight", "group_weight", "num", 100, arithmetic=True),
    EntryField("scanDepth", "scan_depth", "optint", None, arithmetic=True),
    EntryField("caseSensitive", "case_sensitive", "optbool", None),
    EntryField("matchWholeWords", "match_whole_words", "optbool", None),
    EntryField("useGroupScoring", "use_group_scoring", "optbool", None),
    EntryField("automationId", "automation_id", "text", ""),
    #: 0 system, 1 user, 2 assistant; ``null`` (common in exported books) means system
    EntryField("role", "role", "int", 0, nullable=True),
    EntryField("sticky", "sticky", "int", None, arithmetic=True),
    EntryField("cooldown", "cooldown", "int", None, arithmetic=True),
    EntryField("delay", "delay", "int", None, arithmetic=True),
    EntryField("triggers", "triggers", "strings", []),
    EntryField("characterFilter", "character_filter", "filter", {"isExclude": False, "names": [], "tags": []}),
    EntryField("displayIndex", "display_index", "optint", activation=False),
)


class SettingField(NamedTuple):
    """One global world-info setting (or one the world-info budget needs)."""

    #: SillyTavern's name (``world_info_depth``)
    st_name: str
    #: ours (``depth``): the attribute of :class:`~tavernbox.worldinfo.settings.WorldInfoSettings`
    attr: str
    #: its type: ``int``, ``float``, ``bool`` or ``str``
    kind: type
    #: SillyTavern's shipped default (``default/content/settings.json``)
    default: Any
    #: the bounds and choices a request file enforces (``None``: none)
    ge: float | None = None
    le: float | None = None
    choices: tuple[Any, ...] | None = None
    #: read by the scan (a :class:`~tavernbox.worldinfo.settings.WorldInfoSettings` attribute)
    scan: bool = True
    #: a request file's ``world_info`` object may set it
    request: bool = True


#: The settings, in the order :class:`~tavernbox.worldinfo.settings.WorldInfoSettings` reads them.
SETTING_FIELDS: tuple[SettingField, ...] = (
    SettingField("world_info_depth", "depth", int, 2, ge=0, le=1000),
    SettingField("world_info_budget", "budget", float, 25, ge=0, le=100),
    SettingField("world_info_budget_cap", "budget_cap", int, 0, ge=0),
    SettingField("world_info_include_names", "include_names", bool, True),
    SettingField("world_info_recursive", "recursive", bool, True),
    SettingField("world_info_case_sensitive", "case_sensitive", bool, False),
    SettingField("world_info_match_whole_words", "match_whole_words", bool, True),
    #: 0 evenly, 1 character first, 2 global first
    SettingField("world_info_character_strategy", "character_strategy", int, 1, choices=(0, 1, 2)),
    SettingField("world_info_min_activations", "min_activations", int, 0, ge=0),
    SettingField("world_info_min_activations_depth_max", "min_activations_depth_max", int, 0, ge=0),
    SettingField("world_info_max_recursion_steps", "max_recursion_steps", int, 0, ge=0),
    SettingField("world_info_use_group_scoring", "use_group_scoring", bool, False),
    #: SillyTavern warns when the budget overflows; the scan itself does not read it
    SettingField("world_info_overflow_alert", "overflow_alert", bool, False, scan=False),
    #: tokens the budget percentage applies to (a request takes it from ``budget``)
    SettingField("max_context", "max_context", int, 4096, request=False),
    #: how the budget counts tokens: ``"words"`` or ``"estimate"`` (not SillyTavern's)
    SettingField("tokenizer", "tokenizer", str, "words", request=False),
)

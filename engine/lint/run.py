"""``lint_files``: load every file, run the per-kind checks, lint every prompt, then the cross-file checks.

Order matters for the checks that look across files: all files are loaded first, so ``getwi``
titles, preset prompt names, card overrides and MVU variables are known before any prompt is
linted; variables read and set are compared only once every prompt has been walked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..assets.cards import PNG_SIGNATURE, CharacterCard, read_png_card
from ..assets.decoding import decode_bytes
from ..assets.loader import load_asset, parse_structured
from ..assets.paths import join_path
from ..errors import TemplateError
from ..macros.registry import MacroRegistry
from ..worldinfo.settings import WorldInfoSettings
from .cards import card_book_entries, card_prompt_paths
from .codes import LINT_CODES
from .ejs import lint_ejs
from .locate import JsonLocator
from .macros import lint_macros
from .model import SEVERITY_RANK, Facts, Finding, LintReport, Prompt
from .mvu import initvar_names, mvu_names
from ..regexscripts import Placement
from .presets import PresetFacts, lint_preset, preset_prompt_paths
from .regex import RegexTargets, ScriptFile, is_regex_export, lint_regex_scripts, scripts_of
from .templates import is_resource, resource_prompt, template_prompt
from .worldinfo import BookEntry, lint_book, read_entries

__all__ = ["lint_files"]

_STRUCTURED = {".json", ".json5", ".yaml", ".yml", ".png"}
_INITVAR = re.compile(r"\[initvar\]", re.IGNORECASE)


@dataclass
class _Run:
    settings: WorldInfoSettings
    registry: MacroRegistry
    facts: Facts = field(default_factory=Facts)
    findings: list[Finding] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    books: list[tuple[str, str, str, list[BookEntry], bool, int | None]] = field(default_factory=list)
    presets: list[PresetFacts] = field(default_factory=list)
    locators: dict[str, JsonLocator] = field(default_factory=dict)
    regex_sources: list[ScriptFile] = field(default_factory=list)
    regex_targets: RegexTargets = field(default_factory=RegexTargets)

    def unreadable(self, file: str, exc: TemplateError) -> None:
        where = f" at {exc.line}:{exc.column}" if exc.line is not None else ""
        self.findings.append(Finding("FILE_UNREADABLE", "error", file, f"{exc.code}: {exc.message}{where}",
                                     exc.path, exc.line, exc.column, "run `tavernbox import` for the details",
                                     exc.line, exc.column))

    def locate(self, file: str, path: str) -> Any:
        locator = self.locators.get(file)
        return locator.locator(path) if locator is not None else None

    # ---- loading ------------------------------------------------------------------------------
    def load(self, file: str) -> None:
        p = Path(file)
        try:
            data = p.read_bytes()
        except OSError as exc:
            self.unreadable(file, TemplateError(f"cannot read {file}: {exc.strerror or exc}", code="INPUT_INVALID"))
            return
        suffix = p.suffix.lower()
        if suffix == ".jsonl":
            self.chat(file, data)
            return
        if data.startswith(PNG_SIGNATURE):
            try:
                asset = load_asset(data, name=p.stem)
                raw, _, _ = read_png_card(data)
            except TemplateError as exc:
                self.unreadable(file, exc)
                return
            self.asset(file, asset.kind, raw, asset.model, p.stem)
            return
        try:
            text = decode_bytes(data).text
        except TemplateError as exc:
            self.unreadable(file, exc)
            return
        if suffix not in _STRUCTURED:
            self.prompts.append(template_prompt(file, text, p.stem))
            return
        try:
            raw, syntax, _ = parse_structured(text, suffix=suffix)
        except TemplateError as exc:
            if suffix in (".yaml", ".yml"):
                self.prompts.append(template_prompt(file, text, p.stem))
            else:
                self.unreadable(file, exc)
            return
        if syntax == "json":
            self.locators[file] = JsonLocator(text)
        if is_resource(raw):
            found, prompt = resource_prompt(file, raw, self.locate(file, "$.content"))
            self.findings.extend(found)
            if prompt is not None:
                self.prompts.append(prompt)
            return
        if is_regex_export(raw):
            self.add_scripts(scripts_of(file, raw, "export"))
            return
        try:
            asset = load_asset(data, name=p.stem)
        except TemplateError as exc:
            if exc.code == "ASSET_KIND_UNKNOWN" and suffix in (".yaml", ".yml"):
                self.prompts.append(template_prompt(file, text, p.stem))  # a YAML-wrapped template or notes
            else:
                self.unreadable(file, exc)
            return
        self.asset(file, asset.kind, raw, asset.model, p.stem)

    def asset(self, file: str, kind: str, raw: Any, model: Any, stem: str) -> None:
        if kind == "preset" and isinstance(raw, Mapping):
            self.preset(file, raw)
        elif kind == "card" and isinstance(raw, Mapping):
            self.card(file, raw, model)
        elif kind == "world_book":
            entries_raw = raw.get("entries") if isinstance(raw, Mapping) else raw
            base = "$.entries" if isinstance(raw, Mapping) else "$"
            name = model.name or stem
            self.book(file, "$", name, read_entries(entries_raw, name, base), None, None)
        elif kind == "mvu":
            self.facts.data_sets.update(("local", n) for n in mvu_names(raw))

    def chat(self, file: str, data: bytes) -> None:
        """A chat (SillyTavern's ``.jsonl`` export): its messages are what the regex scripts target."""
        from ..assets.chats import parse_chat_text

        try:
            chat = parse_chat_text(decode_bytes(data).text, hint=Path(file).name)
        except TemplateError as exc:
            self.unreadable(file, exc)
            return
        for message in chat.messages:
            self.regex_targets.add(Placement.USER_INPUT if message.role == "user" else Placement.AI_OUTPUT,
                                   message.content)
            self.regex_targets.add(Placement.REASONING, message.reasoning)

    def add_scripts(self, scripts: ScriptFile | None) -> None:
        if scripts is not None:
            self.regex_sources.append(scripts)

    def preset(self, file: str, raw: Mapping[str, Any]) -> None:
        self.add_scripts(scripts_of(file, raw, "preset"))
        found, facts = lint_preset(raw, file)
        self.findings.extend(found)
        self.presets.append(facts)
        self.facts.has_preset = True
        for identifier, name, path in preset_prompt_paths(raw):
            self.facts.preset_prompts.update(x for x in (identifier, name) if x)
            text = _at(raw, path)
            if isinstance(text, str):
                self.prompts.append(Prompt(file, path, text, locate=self.locate(file, path)))

    def card(self, file: str, raw: Mapping[str, Any], card: CharacterCard) -> None:
        self.add_scripts(scripts_of(file, raw, "card"))
        for path, text in card_prompt_paths(raw):
            self.prompts.append(Prompt(file, path, text, locate=self.locate(file, path)))
        self.facts.cards.append((file, card.name, bool(card.system_prompt.strip()),
                                 bool(card.post_history_instructions.strip())))
        embedded = card_book_entries(raw, card)
        if embedded is not None:
            name, entries, book = embedded
            recursive = book.get("recursive_scanning")
            budget = book.get("token_budget")
            base = "$.data.character_book" if isinstance(raw.get("data"), Mapping) else "$.character_book"
            self.book(file, base, name, entries, recursive if isinstance(recursive, bool) else None,
                      budget if isinstance(budget, int) and not isinstance(budget, bool) else None)

    def book(self, file: str, path: str, name: str, entries: list[BookEntry], recursive: bool | None,
             budget: int | None) -> None:
        titles = self.facts.books.setdefault(name, set())
        for be in entries:
            titles.add(be.entry.comment)
            titles.add(str(be.entry.uid))
            if _INITVAR.search(be.entry.comment):
                self.facts.data_sets.update(("local", n) for n in initvar_names(be.entry.content))
            raw_content = be.raw.get("content")
            if isinstance(raw_content, str) and raw_content:
                self.regex_targets.add(Placement.WORLD_INFO, raw_content)
                content_path = join_path(be.path, "content")
                self.prompts.append(Prompt(file, content_path, raw_content, title=be.entry.comment,
                                           locate=self.locate(file, content_path), decorators=False))
            elif be.entry.comment and "[" in be.entry.comment:
                self.prompts.append(Prompt(file, join_path(be.path, "comment"), "", title=be.entry.comment,
                                           decorators=False))
        self.books.append((file, path, name, entries, self.settings.recursive if recursive is None else recursive,
                           budget))

    # ---- checks -------------------------------------------------------------------------------
    def check(self) -> None:
        for file, path, name, entries, recursive, budget in self.books:
            self.findings.extend(lint_book(entries, file=file, book_path=path, book_name=name,
                                           settings=self.settings, recursive=recursive, token_budget=budget))
        for prompt in self.prompts:
            if prompt.macros:
                self.findings.extend(lint_macros(prompt, self.facts, self.registry))
            if prompt.ejs:
                self.findings.extend(lint_ejs(prompt, self.facts))
        self.variables()
        self.overrides()
        self.findings.extend(lint_regex_scripts(self.regex_sources, self.regex_targets))

    def variables(self) -> None:
        facts = self.facts
        for key, uses in facts.reads.items():
            if key in facts.sets or key in facts.data_sets:
                continue
            first = uses[0]
            scope, name = key
            self.findings.append(first.prompt.finding(
                "VARIABLE_NEVER_SET", f"{scope} variable {name!r} is read ({len(uses)}x) but no linted file sets it",
                first.start, suggestion="lint it together with the files that set it, or set it with {{setvar::...}}"))
        for key, uses in facts.sets.items():
            if key in facts.reads:
                continue
            first = uses[0]
            scope, name = key
            self.findings.append(first.prompt.finding(
                "VARIABLE_NEVER_READ", f"{scope} variable {name!r} is set ({len(uses)}x) but no linted file reads it",
                first.start))

    def overrides(self) -> None:
        for preset in self.presets:
            for file, card_name, has_system, has_post in self.facts.cards:
                for identifier, present, what in (("main", has_system, "system_prompt"),
                                                  ("jailbreak", has_post, "post_history_instructions")):
                    path = preset.overridable.get(identifier)
                    if present and path is not None:
                        self.findings.append(Finding(
                            "PRESET_OVERRIDE_REPLACED", LINT_CODES["PRESET_OVERRIDE_REPLACED"].severity, preset.file,
                            f"the {identifier!r} prompt is replaced by the {what} of card {card_name!r} ({file})",
                            path, suggestion="set forbid_overrides on the prompt to keep it, or merge the texts "
                            "with {{original}} in the card"))


def _at(value: Any, path: str) -> Any:
    """The value at a JSON path written by ``join_path`` (``$.a[0].b``), or None."""
    for key, index in re.findall(r'\.([A-Za-z_$][\w$]*|\d+)|\[(\d+)\]', path[1:]):
        if index:
            if not isinstance(value, list) or int(index) >= len(value):
                return None
            value = value[int(index)]
        else:
            if not isinstance(value, Mapping) or key not in value:
                return None
            value = value[key]
    return value


def _natural(path: str) -> tuple[Any, ...]:
    """A JSON path's sort key with its numbers compared as numbers (``[2]`` before ``[10]``)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path))


def lint_files(files: Iterable[str | Path], *, settings: WorldInfoSettings | None = None,
               registry: MacroRegistry | None = None) -> LintReport:
    """Lint ``files`` as one asset set and return the report (findings sorted by file and position).

    Never raises for bad input: a file that cannot be read is a ``FILE_UNREADABLE`` finding.
    ``settings`` are the global world-info settings (SillyTavern's shipped defaults when absent);
    ``registry`` the macro catalogue (the built-ins by default; a host adds its own macros).
    """
    run = _Run(settings or WorldInfoSettings(), registry or MacroRegistry.default_shared())
    names = [str(f) for f in files]
    for name in names:
        run.load(name)
    run.check()
    order = {name: i for i, name in enumerate(names)}
    run.findings.sort(key=lambda f: (order.get(f.file, len(order)), _natural(f.path or ""), f.line or 0,
                                     f.column or 0, -SEVERITY_RANK[f.severity], f.code))
    return LintReport(run.findings, names)

"""Macro expansion speed: tavernbox against Jinja2's SandboxedEnvironment, in the same run.

Three questions, each answered with the best of several repeats:

1. A ~3 KB preset prompt holding ~20 macros (names, card fields, variables, ``{{if}}``/``{{else}}``,
   ``{{random}}``, ``{{roll}}``, ``{{trim}}``, time, a comment), expanded by ``expand_macros``:
   * **cold**: every render sees a text it has never seen (a unique comment is appended), so it
     pays for parsing;
   * **cached**: the text is parsed once and only evaluated per render, through
     ``tavernbox.macros.compile_macros(text).expand(context)`` when the engine offers it; without
     it the figure is reported as unavailable rather than guessed.
   The equivalent Jinja2 template is rendered by a ``SandboxedEnvironment``: compiled once
   (cached) and compiled per render (cold). Ratios are tavernbox time / Jinja2 time.
2. A cold parse of a 10 KB text holding 200 macros (``parse_macros``), each iteration on a text
   not seen before. Target: <= 3 ms.

3. Cached expansion of a plain prompt (prose with ``{{user}}``/``{{char}}``) at 3 KB and at 30 KB,
   and of the 3 KB preset ten times over, against Jinja2 (issue 14); with ``--hostile``, the CPU
   time and memory of issue 14's 200,000-fragment hostile texts, each in a fresh interpreter.

4. Cached expansion of a preset-like prompt (:data:`PRESET_LIKE`: comments and ``{{trim}}`` heading
   each section, a line of ``{{setvar}}``, several ``{{getvar}}``/name macros a line) against the same
   prompt in Jinja2 (``{% set %}``, locals, ``{#- -#}``), with the same context every render and
   with a new ``user`` each render (issue 29: <= 0.5x Jinja2).

5. The parser's paths: a macro of the 10 KB documents by the region path and by the whole-document
   path, and a region of texts made of distinct or repeated regions (what the fast paths save).

Targets from issue 2: cached <= 0.5x Jinja2; 10 KB cold parse <= 3 ms. Issue 14: cached plain
prompts <= 0.5x Jinja2 at 3 KB and 30 KB; each hostile text <= 1 s and <= 100 MB. This script reports;
it does not assert (``tests/test_bench_smoke.py`` only checks that it keeps running).

Run: ``python benchmarks/bench_macros.py`` (``--iterations N`` or the environment variable
``TAVERNBOX_BENCH_ITERATIONS`` sets the loop count; ``--json`` prints the figures as JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import tavernbox
from tavernbox.macros import parse_macros

NOW = "2026-11-30T21:15:00Z"

CONTEXT: dict[str, Any] = {
    "user": "Ash",
    "char": "Mira",
    "persona": "Ash is a courier who missed the last ferry and carries a sealed letter.",
    "character": {
        "description": "Mira keeps the lighthouse on the northern cape. She is practical, dry-humoured and "
        "suspicious of strangers who arrive during storms.",
        "personality": "practical, wry, protective, curious about the outside world",
        "scenario": "A storm has cut the cape off from the mainland; Ash knocks on the lighthouse door.",
    },
    "chat": [
        {"role": "assistant", "name": "Mira", "content": "In, quickly. The kettle is already on."},
        {"role": "user", "name": "Ash", "content": "Thank you. Is the storm going to last?"},
    ],
    "chat_id_hash": 424242,
    "seed": 7,
    "now": NOW,
    "variables": {"local": {"storm_hours": 3}, "global": {}},
}

# Instruction prose of a typical preset (no macros): it is most of the 3 KB, as in real presets.
_PROSE = [
    "Stay in character at all times and never speak for the other party. Describe actions, sounds and "
    "smells with concrete detail, and keep each reply between two and four paragraphs.",
    "Advance the scene: introduce a small complication or a new detail every few replies, but let the "
    "user decide the important choices. Do not summarise what already happened.",
    "Dialogue goes in double quotes; thoughts in italics. Avoid purple prose, repeated phrases and "
    "rhetorical questions at the end of a reply. Vary sentence length.",
    "Track the physical state of the room: the lamp, the fire, the door, the weather outside. Objects "
    "that were moved stay moved; wounds stay until treated; wet clothes stay wet.",
    "If the user's message is short, answer briefly; if it is long, engage with each point it raises. "
    "Never break the fourth wall and never mention these instructions.",
    "Characters have their own goals and may refuse, lie or change the subject when it suits them. Let "
    "silences happen; not every line needs an answer. Keep secrets until the story earns them.",
    "Use the senses a person in the scene would actually notice first. Name specific objects instead of "
    "categories, and prefer verbs over adjectives. End on an action or a line of dialogue, not a summary.",
]

MACRO_TEMPLATE = (
    "{{// Main prompt of a lighthouse roleplay preset. }}\n"
    "You are {{char}}, in a slow-burn story with {{user}}. Write {{char}}'s next reply only.\n\n"
    + "\n\n".join(_PROSE)
    + "\n\n[{{char}}'s description]\n{{description}}\n\n"
    "[Personality] {{personality}}\n[Scenario] {{scenario}}\n[{{user}}] {{persona}}\n\n"
    + "\n\n".join(_PROSE)
    + "\n\n{{setvar::tone::wary}}It is {{weekday}}, {{date}}. The storm has {{getvar::storm_hours}} hours left.\n"
    "{{if {{getvar::tone}}}}Keep {{char}}'s tone {{getvar::tone}} towards {{user}}.{{else}}Keep the tone light.{{/if}}\n"
    "Tonight's mood: {{random::quiet::tense::warm}}. Dice for the lamp: {{roll::1d20}}.\n"
    "{{trim}}\n"
    "Last thing said: \"{{lastMessage}}\"\n"
)

JINJA_TEMPLATE = (
    "{# Main prompt of a lighthouse roleplay preset. #}"
    "You are {{ char }}, in a slow-burn story with {{ user }}. Write {{ char }}'s next reply only.\n\n"
    + "\n\n".join(_PROSE)
    + "\n\n[{{ char }}'s description]\n{{ description }}\n\n"
    "[Personality] {{ personality }}\n[Scenario] {{ scenario }}\n[{{ user }}] {{ persona }}\n\n"
    + "\n\n".join(_PROSE)
    + "\n\n{% set tone = 'wary' %}It is {{ weekday() }}, {{ date() }}. The storm has {{ vars.storm_hours }} hours left.\n"
    "{% if tone %}Keep {{ char }}'s tone {{ tone }} towards {{ user }}.{% else %}Keep the tone light.{% endif %}\n"
    "Tonight's mood: {{ random_choice(['quiet', 'tense', 'warm']) }}. Dice for the lamp: {{ roll('1d20') }}."
    "{#- trim -#}\n"
    "Last thing said: \"{{ last_message }}\"\n"
)


#: issue 29's prompt "as presets write them": a comment and ``{{trim}}`` heading each section,
#: a line of ``{{setvar}}`` settings, several macros a line (``{{getvar}}``, names); ~2.7 KB
_PRESET_SECTIONS = [
    ("Language", "All narration and speech are woven in **{{getvar::lang}}**; {{char}} answers {{user}} in "
     "{{getvar::lang}} unless the scene demands a foreign tongue, translated alongside."),
    ("Tone", "Keep {{char}}'s tone {{getvar::tone}} towards {{user}}, shifting only when {{user}} earns it. "
     "Strangers meet a {{getvar::tone}} {{char}} too."),
    ("Length", "Each reply runs {{getvar::length}}: shorter when {{user}} writes briefly, never longer than "
     "{{getvar::length}} and a closing line of dialogue."),
    ("Point of view", "Narrate in the {{getvar::pov}}, addressing {{user}} directly; {{char}}'s inner thoughts stay "
     "in the {{getvar::pov}}, in italics."),
    ("Pacing", "The story moves at a {{getvar::pacing}} pace: {{char}} notices, hesitates, decides. Let silences "
     "happen; do not rush {{user}} through a scene."),
    ("Continuity", "Objects moved stay moved, wounds stay until treated, and {{char}} remembers what {{user}} said. "
     "Contradictions are errors, not style."),
]
_PRESET_SETTINGS = [("lang", "English"), ("tone", "wary"), ("length", "three paragraphs"), ("pov", "second person"),
                    ("pacing", "slow")]
PRESET_LIKE = (
    "{{// Prompt variables: edit the values, nothing else. }}{{trim}}\n"
    + "".join("{{setvar::%s::%s}}" % kv for kv in _PRESET_SETTINGS) + "{{trim}}\n"
    + "".join(
        "{{// %s: do not edit below. }}{{trim}}\n### %s\n%s\n" % (title, title, prose)
        + "Stay in character; never describe {{user}}'s choices for them, and keep {{char}} consistent with the "
        "card. Describe actions, sounds and smells with concrete detail, and end on an action or a line of dialogue.\n\n"
        for title, prose in _PRESET_SECTIONS
    )
)


def jinja_preset_like() -> str:
    """:data:`PRESET_LIKE` as Jinja2 writes it: ``{% set %}`` for ``{{setvar}}``, a local for
    ``{{getvar}}``, ``{#- -#}`` for a comment followed by ``{{trim}}`` (same output)."""
    import re

    text = re.sub(r"\{\{//(.*?)\}\}\{\{trim\}\}\n", r"{#-\1-#}", PRESET_LIKE)
    text = re.sub(r"\{\{setvar::(\w+)::([^}]*)\}\}", r"{% set \1 = '\2' %}", text)
    text = re.sub(r"\{\{getvar::(\w+)\}\}", r"{{ \1 }}", text).replace("{{trim}}\n", "{#- -#}")
    return text.replace("{{char}}", "{{ char }}").replace("{{user}}", "{{ user }}")


def _preset_like_rows(iterations: int) -> dict[str, Any]:
    """Cached expansion of :data:`PRESET_LIKE` against Jinja2 cached: with the same context every
    render, and with a different ``user`` each render (the level is evaluated every time)."""
    from jinja2.sandbox import SandboxedEnvironment

    template = tavernbox.macros.compile_macros(PRESET_LIKE)
    jinja = SandboxedEnvironment(keep_trailing_newline=True).from_string(jinja_preset_like())
    users = [f"Ash{i}" for i in range(iterations)]
    contexts = [tavernbox.MacroContext.from_dict({**CONTEXT, "user": user}) for user in users]
    jinja_contexts = [{"user": user, "char": CONTEXT["char"]} for user in users]
    if template.expand(contexts[0]).text != jinja.render(jinja_contexts[0]):
        raise AssertionError("the Jinja2 preset-like prompt renders differently")
    same, jinja_same = contexts[0], jinja_contexts[0]
    out: dict[str, Any] = {
        "preset_like_bytes": len(PRESET_LIKE.encode("utf-8")),
        "preset_like_macros": PRESET_LIKE.count("{{"),
        "preset_like_cached_s": _best_per_call(lambda i: template.expand(same).text, iterations),
        "preset_like_jinja_cached_s": _best_per_call(lambda i: jinja.render(jinja_same), iterations),
        "preset_like_varying_s": _best_per_call(lambda i: template.expand(contexts[i]).text, iterations),
        "preset_like_jinja_varying_s": _best_per_call(lambda i: jinja.render(jinja_contexts[i]), iterations),
    }
    out["preset_like_ratio_cached"] = out["preset_like_cached_s"] / out["preset_like_jinja_cached_s"]
    out["preset_like_ratio_varying"] = out["preset_like_varying_s"] / out["preset_like_jinja_varying_s"]
    return out


def _jinja_draws() -> dict[str, Any]:
    """Per-render random callables: tavernbox seeds every render (the same seed gives the same
    text), so the Jinja2 side does too instead of drawing on across renders."""
    rng = random.Random(7)
    return {"random_choice": rng.choice, "roll": lambda formula: rng.randint(1, int(formula.split("d")[1]))}


def _jinja_context() -> dict[str, Any]:
    """The same values as CONTEXT, as Jinja2 variables and callables."""
    now = datetime(2026, 11, 30, 21, 15, tzinfo=timezone.utc)
    card = CONTEXT["character"]
    return {
        "user": CONTEXT["user"],
        "char": CONTEXT["char"],
        "persona": CONTEXT["persona"],
        "description": card["description"],
        "personality": card["personality"],
        "scenario": card["scenario"],
        "vars": dict(CONTEXT["variables"]["local"]),
        "last_message": CONTEXT["chat"][-1]["content"],
        "weekday": lambda: now.strftime("%A"),
        "date": lambda: now.strftime("%B %d, %Y"),
    }


_REPEATS = 5


def _best_per_call(fn: Callable[[int], object], iterations: int, repeats: int = _REPEATS) -> float:
    """Seconds per call: the best mean over ``repeats`` runs of ``iterations`` calls.

    Timed in this process's CPU time (``time.process_time``), not wall time: the machines this
    runs on are shared, and time spent running other processes would otherwise land on
    whichever side happened to be measured then. Both sides are timed the same way.
    """
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for i in range(iterations):
            fn(i)
        best = min(best, (time.process_time() - start) / iterations)
    return best


def _cached_expander(text: str) -> Callable[[int], str] | None:
    """A render of a once-parsed template, if the engine offers one; ``None`` otherwise.

    The engine has to expose ``tavernbox.macros.compile_macros(text)`` returning an object whose
    ``expand(context)`` gives the same ``MacroResult`` as ``expand_macros(text, context)``.
    Nothing private is reached into: a figure for a path the engine does not offer would
    measure this script, not tavernbox.
    """
    import tavernbox.macros as macros

    compile_macros = getattr(macros, "compile_macros", None)
    if compile_macros is None:
        return None
    template = compile_macros(text)
    if template.expand(CONTEXT).text != tavernbox.expand_macros(text, CONTEXT).text:
        raise AssertionError("compile_macros(text).expand() disagrees with expand_macros()")
    # the context is read once, as the Jinja2 side builds its context dict once
    context = tavernbox.MacroContext.from_dict(CONTEXT)
    return lambda _: template.expand(context).text


def _ten_kb_documents(count: int, size: int = 10_240, macros: int = 200) -> list[str]:
    """Distinct ~10 KB texts with 200 macros each (inline, nested, scoped and shorthand).

    A macro is counted per opening tag (``{{if {{getvar::x}}}}a{{else}}b{{/if}}`` holds three);
    prose fills the rest of the size evenly between them.
    """
    shapes = [
        "{{user}}", "{{char}}", "{{getvar::v%d}}", "{{setvar::v%d::%d}}", "{{random::a::b::c}}",
        "{{roll::2d6+%d}}", "{{reverse::abc%d}}", "{{if {{getvar::v%d}}}}yes{{else}}no{{/if}}",
        "{{.v%d += %d}}", "{{// note %d }}",
    ]
    words = " ".join(_PROSE).split()
    docs = []
    for n in range(count):
        rnd = random.Random(n)
        chosen: list[str] = []
        counted = 0
        while counted < macros:
            shape = shapes[len(chosen) % len(shapes)]
            chosen.append(shape.replace("%d", str(rnd.randint(0, 99)), 1).replace("%d", str(n)))
            counted += shape.count("{{") - shape.count("{{/")
        filler = max(1, (size - sum(len(m) for m in chosen)) // len(chosen))
        parts = []
        for macro in chosen:
            start = rnd.randrange(len(words))
            prose = " ".join(words[start:] + words[:start])[: filler - 1]
            parts.append(prose + " " + macro)
        docs.append("".join(parts))
    return docs


def plain_prompt(size: int) -> str:
    """Preset prose of about ``size`` characters with a ``{{user}}`` and a ``{{char}}`` per paragraph
    (issue 14: such a prompt cost 367 us at 30 KB against Jinja2's 97 us, though less than
    Jinja2 at 3 KB; levels of over 400 parts left the unrolled plan for a loop)."""
    parts: list[str] = []
    count = 0
    i = 0
    while count < size:
        tail = " {{user}} looks at {{char}}.\n" if i % 2 == 0 else " {{char}} nods to {{user}}.\n"
        piece = _PROSE[i % len(_PROSE)] + tail
        parts.append(piece)
        count += len(piece)
        i += 1
    return "".join(parts)


def _plain_rows(iterations: int) -> dict[str, Any]:
    """Cached expansion of :func:`plain_prompt` at 3 KB and 30 KB, against Jinja2 cached."""
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(keep_trailing_newline=True)
    out: dict[str, Any] = {}
    for label, size in (("3kb", 3 * 1024), ("30kb", 30 * 1024)):
        text = plain_prompt(size)
        cached = _cached_expander(text)
        assert cached is not None
        jinja = env.from_string(text.replace("{{user}}", "{{ user }}").replace("{{char}}", "{{ char }}"))
        jinja_ctx = {"user": CONTEXT["user"], "char": CONTEXT["char"]}
        if jinja.render(jinja_ctx) != cached(0):
            raise AssertionError("the Jinja2 plain prompt renders differently")
        ours = _best_per_call(cached, iterations)
        theirs = _best_per_call(lambda i, t=jinja, c=jinja_ctx: t.render(c), iterations)
        out[f"plain_{label}_bytes"] = len(text.encode("utf-8"))
        out[f"plain_{label}_macros"] = text.count("{{")
        out[f"plain_{label}_cached_s"] = ours
        out[f"plain_{label}_jinja_cached_s"] = theirs
        out[f"plain_{label}_ratio_cached"] = ours / theirs
    # the 3 KB preset (variables, draws, time: not a pure function of the context) ten times over
    rich = MACRO_TEMPLATE * 10
    cached = _cached_expander(rich)
    assert cached is not None
    compiled = env.from_string(JINJA_TEMPLATE * 10)
    jinja_ctx = _jinja_context()
    out["rich_30kb_bytes"] = len(rich.encode("utf-8"))
    out["rich_30kb_cached_s"] = _best_per_call(cached, iterations)
    out["rich_30kb_jinja_cached_s"] = _best_per_call(lambda i: compiled.render(jinja_ctx, **_jinja_draws()), iterations)
    out["rich_30kb_ratio_cached"] = out["rich_30kb_cached_s"] / out["rich_30kb_jinja_cached_s"]
    return out


#: the parser's paths (``macros/parser.py`` and the modules it joins), each as ``(label, text
#: builder, unit count)``: what a fast path saves against the plain path on the same text
PARSER_TEXTS: list[tuple[str, Callable[[int], str], str]] = [
    ("distinct malformed regions, each recovered", lambda n: "".join("{{a%d:}}" % i for i in range(n)), "region"),
    ("one malformed region repeated (recovered once)", lambda n: "{{#}}" * n, "region"),
    ("distinct nested regions, each lexed and parsed", lambda n: "".join("{{a%d::{{b::{{c}}}}}}" % i for i in range(n)), "region"),
    ("one nested region repeated (parsed once)", lambda n: "{{a::{{b::{{c}}}}}}" * n, "region"),
]


def parser_rows(count: int = 20_000) -> dict[str, Any]:
    """Per macro or region: the region path against the whole-document path
    (``Shortcuts(regions=False)``) on the 10 KB documents, and the region path on
    :data:`PARSER_TEXTS` (a repeat of a region is neither lexed nor parsed again)."""
    from tavernbox.macros.parser import document_items
    from tavernbox.shortcuts import Shortcuts

    whole = Shortcuts(regions=False)
    docs = _ten_kb_documents(30)
    out: dict[str, Any] = {}
    regions = _best_per_call(lambda i: document_items(docs[i]), len(docs), repeats=3) / 200
    plain = _best_per_call(lambda i: document_items(docs[i], shortcuts=whole), len(docs), repeats=3) / 200
    out["parser 10 KB documents, a macro: regions / whole document (us)"] = (regions * 1e6, plain * 1e6)
    for label, build, _unit in PARSER_TEXTS:
        text = build(count)
        out[f"parser {label}, a region (us)"] = _best_per_call(lambda i, t=text: document_items(t), 1, repeats=3) / count * 1e6
    return out


#: issue 14's hostile texts: (label, repeated fragment); 200,000 repeats stay under the 2 MiB limit
HOSTILE = (("if_1", "{{if 1}}"), ("getvar_open", "{{getvar::"), ("half_closed", "{{a}"))

#: one expansion of ``argv[1] * argv[2]`` in a fresh interpreter: CPU seconds and peak RSS growth
HOSTILE_PROBE = (
    "import json, sys, time\n"
    "from tavernbox.testing.memory import peak_rss_kib\n"
    "from tavernbox.macros import expand_macros\n"
    "expand_macros('{{user}} {{getvar::x}} {{if 1}}a{{/if}} {{a}', {})\n"
    "text = sys.argv[1] * int(sys.argv[2])\n"
    "base = peak_rss_kib()\n"
    "t0 = time.process_time()\n"
    "r = expand_macros(text, {}, time_limit=None)\n"  # the engine's own cost
    "cpu = time.process_time() - t0\n"
    "peak = peak_rss_kib()\n"
    "print(json.dumps({'cpu_s': cpu, 'growth_mb': (peak - base) / 1024, 'peak_mb': peak / 1024,\n"
    "                  'diagnostics': len(r.diagnostics)}))\n"
)

#: ``tavernbox assemble`` (in process, warmed up by a one-macro preset) of a preset whose main prompt
#: is ``argv[1] * argv[2]``: CPU seconds and peak RSS growth of that one command (issue 14's
#: "320 KB preset prompt built this way"); ``tests/test_macros_hostile_scale.py`` runs it too
ASSEMBLE_PROBE = r"""
import json, sys, tempfile, time
from tavernbox.testing.memory import peak_rss_kib
from pathlib import Path
from click.testing import CliRunner
from tavernbox.cli.main import main

def preset(content):
    return {"prompts": [{"identifier": "main", "name": "Main", "role": "system", "content": content, "system_prompt": True},
                        {"identifier": "chatHistory", "name": "Chat History", "marker": True, "system_prompt": True}],
            "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                                {"identifier": "chatHistory", "enabled": True}]}],
            "openai_max_context": 2000000, "max_context_unlocked": True}

tmp = Path(tempfile.mkdtemp())
(tmp / "chat.json").write_text(json.dumps([{"id": "m1", "role": "user", "content": "hi"}]))
(tmp / "small.json").write_text(json.dumps(preset("{{if 1}}")))
(tmp / "big.json").write_text(json.dumps(preset(sys.argv[1] * int(sys.argv[2]))))
args = ["assemble", "--strategy", "builtin-st", "--chat", str(tmp / "chat.json"), "--preset"]
assert CliRunner().invoke(main, [*args, str(tmp / "small.json")]).exit_code == 0  # imports and tables warm
base = peak_rss_kib()
t0 = time.process_time()
done = CliRunner().invoke(main, [*args, str(tmp / "big.json")])
cpu = time.process_time() - t0
peak = peak_rss_kib()
print(json.dumps({"cpu_s": cpu, "growth_mb": (peak - base) / 1024, "exit": done.exit_code, "stdout": len(done.stdout),
                  "warnings": done.stderr.count("MACRO_ARITY"), "summary": "MACRO_DIAGNOSTICS_LIMIT" in done.stderr}))
"""


#: texts at the 2 MiB input limit where one stage alone costs seconds (issue 14's "any input
#: within the limits"): each must stop at the render's CPU budget (``MACRO_TIME_LIMIT``)
_LIMIT = 2 * 1024 * 1024 - 64


def _numbered(fmt: str) -> str:
    """``fmt`` with ``N`` numbered 0, 1, 2... up to about 2 MiB: no two units alike (no repeat shortcut)."""
    parts, size, i = [], 0, 0
    while size < _LIMIT:
        part = fmt.replace("N", str(i))
        parts.append(part)
        size += len(part)
        i += 1
    return "".join(parts)[:_LIMIT]


COSTLY: dict[str, Any] = {
    # the recovery parser, region by region (~50 us each)
    "distinct malformed": lambda: _numbered("{{aN:}}"),
    # the lexer: one region that never closes
    "one unclosed filter region": lambda: "{{a|" + "x|" * (_LIMIT // 2),
    # the whole-document recovery parser, token by token
    "colons": lambda: "{{a:" + ":" * _LIMIT,
    # one simple macro of 700,000 arguments (the region parse, then the evaluator)
    "arguments": lambda: "{{a::" + "x::" * (_LIMIT // 3) + "}}",
    # the LALR parser and nested evaluation
    "nested arguments": lambda: "{{a::" + "{{b}}::" * (_LIMIT // 7) + "}}",
    # a variable's value of 400,000 inner macros
    "value macros": lambda: "{{.x=" + "{{b}}" * (_LIMIT // 5) + "}}",
    # the evaluator: scoped pairs, all different
    "scoped pairs": lambda: _numbered("{{if N}}a{{/if}}"),
    # the evaluator: dice
    "rolls": lambda: _numbered("{{roll:1dN}}"),
}

#: one expansion of ``COSTLY[argv[1]]`` in a fresh interpreter, with the default budget unless
#: ``argv[2]`` is "none": CPU seconds, peak RSS growth and the outcome
COSTLY_PROBE = (
    "import json, sys, time\n"
    "from tavernbox.testing.memory import peak_rss_kib\n"
    "sys.path.insert(0, sys.argv[3])\n"
    "from bench_macros import COSTLY\n"
    "from tavernbox.errors import TemplateError\n"
    "from tavernbox.macros import expand_macros\n"
    "expand_macros('{{user}} {{getvar::x}} {{if 1}}a{{/if}} {{a}', {})\n"
    "text = COSTLY[sys.argv[1]]()\n"
    "base = peak_rss_kib()\n"
    "t0 = time.process_time()\n"
    "try:\n"
    "    expand_macros(text, {}, **({'time_limit': None} if sys.argv[2] == 'none' else {}))\n"
    "    outcome = 'rendered'\n"
    "except TemplateError as exc:\n"
    "    outcome = exc.code\n"
    "cpu = time.process_time() - t0\n"
    "peak = peak_rss_kib()\n"
    "print(json.dumps({'cpu_s': cpu, 'growth_mb': (peak - base) / 1024, 'outcome': outcome}))\n"
)


def costly_rows(unlimited: bool = False) -> dict[str, Any]:
    """Each :data:`COSTLY` text under the default CPU budget (and, with ``unlimited``, without one)."""
    import subprocess

    here = str(Path(__file__).resolve().parent)
    out: dict[str, Any] = {}
    for name in COSTLY:
        for mode in ("default", "none") if unlimited else ("default",):
            done = subprocess.run([sys.executable, "-c", COSTLY_PROBE, name, mode, here],
                                  capture_output=True, text=True, check=True)
            out[f"costly {name} ({mode})"] = json.loads(done.stdout)
    return out


def _probe(script: str, unit: str, count: int) -> dict[str, Any]:
    import subprocess

    done = subprocess.run([sys.executable, "-c", script, unit, str(count)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def hostile_rows(count: int = 200_000) -> dict[str, Any]:
    """CPU seconds and peak memory growth of one expansion of each hostile text, each in a fresh
    interpreter (target: <= 1 s and <= 100 MB each), at ``count`` and at a quarter of it (linear
    growth: the same cost per fragment), and of ``tavernbox assemble`` on the 320 KB preset."""
    out: dict[str, Any] = {}
    for label, unit in HOSTILE:
        out[f"hostile_{label}"] = _probe(HOSTILE_PROBE, unit, count)
        out[f"hostile_{label}_quarter"] = _probe(HOSTILE_PROBE, unit, count // 4)
    out["hostile_assemble_320kb"] = _probe(ASSEMBLE_PROBE, "{{if 1}}", 40_000)
    out.update(costly_rows())
    return out


def run(iterations: int) -> dict[str, Any]:
    """Measure everything; returns the figures (seconds per call and ratios)."""
    from jinja2.sandbox import SandboxedEnvironment

    figures: dict[str, Any] = {
        "template_bytes": len(MACRO_TEMPLATE.encode("utf-8")),
        "template_macros": MACRO_TEMPLATE.count("{{") - MACRO_TEMPLATE.count("{{/"),
        "iterations": iterations,
    }

    start = time.perf_counter()
    tavernbox.expand_macros("{{user}}", CONTEXT)  # first use builds the LALR parser
    figures["first_use_s"] = time.perf_counter() - start

    # expand_macros keeps the compiled templates of recent texts, so "cold" needs a text never
    # seen in any repeat: one per call, not one per iteration index
    cold_texts = iter([MACRO_TEMPLATE + "{{// render %d }}" % i for i in range(iterations * _REPEATS)])
    figures["tavernbox_cold_s"] = _best_per_call(
        lambda i: tavernbox.expand_macros(next(cold_texts), CONTEXT), iterations
    )

    cached = _cached_expander(MACRO_TEMPLATE)
    figures["tavernbox_cached_s"] = _best_per_call(cached, iterations) if cached is not None else None

    env = SandboxedEnvironment()
    jinja_ctx = _jinja_context()
    compiled = env.from_string(JINJA_TEMPLATE)
    figures["jinja_cached_s"] = _best_per_call(lambda i: compiled.render(jinja_ctx, **_jinja_draws()), iterations)
    jinja_cold_texts = [JINJA_TEMPLATE + "{# render %d #}" % i for i in range(iterations)]
    figures["jinja_cold_s"] = _best_per_call(
        lambda i: env.from_string(jinja_cold_texts[i]).render(jinja_ctx, **_jinja_draws()), iterations
    )

    figures["ratio_cold"] = figures["tavernbox_cold_s"] / figures["jinja_cold_s"]
    figures["ratio_cold_vs_jinja_cached"] = figures["tavernbox_cold_s"] / figures["jinja_cached_s"]
    if figures["tavernbox_cached_s"] is not None:
        figures["ratio_cached"] = figures["tavernbox_cached_s"] / figures["jinja_cached_s"]

    parse_iterations = max(1, iterations // 4)
    docs = _ten_kb_documents(parse_iterations * 3)
    figures["parse_10kb_bytes"] = round(sum(len(d.encode("utf-8")) for d in docs) / len(docs))
    parse_docs = iter(docs)
    figures["parse_10kb_cold_s"] = _best_per_call(lambda i: parse_macros(next(parse_docs)), parse_iterations, repeats=3)
    expand_docs = iter(docs)  # parse_macros keeps nothing, so the same texts are still unseen here
    figures["expand_10kb_cold_s"] = _best_per_call(
        lambda i: tavernbox.expand_macros(next(expand_docs), CONTEXT), parse_iterations, repeats=3
    )
    figures.update(_plain_rows(iterations))
    figures.update(_preset_like_rows(iterations))
    figures.update(parser_rows())
    return figures


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:8.3f} ms"


def report(f: dict[str, Any]) -> str:
    lines = [
        f"3 KB preset prompt: {f['template_bytes']} bytes, {f['template_macros']} macros, "
        f"{f['iterations']} iterations (first use, building the parser: {_ms(f['first_use_s']).strip()})",
        f"  tavernbox cold    {_ms(f['tavernbox_cold_s'])}",
        f"  tavernbox cached  {_ms(f['tavernbox_cached_s'])}"
        + ("" if f["tavernbox_cached_s"] is not None else "  (the engine offers no compile_macros(): no parse cache to measure)"),
        f"  jinja2 cold       {_ms(f['jinja_cold_s'])}   (compile + render)",
        f"  jinja2 cached     {_ms(f['jinja_cached_s'])}   (render of a compiled template)",
        f"  ratio cold   tavernbox/jinja2 = {f['ratio_cold']:.2f}x"
        f"   (vs jinja2 cached: {f['ratio_cold_vs_jinja_cached']:.2f}x)",
    ]
    if "ratio_cached" in f:
        verdict = "meets" if f["ratio_cached"] <= 0.5 else "misses"
        lines.append(f"  ratio cached tavernbox/jinja2 = {f['ratio_cached']:.2f}x   ({verdict} the <= 0.5x target)")
    verdict = "meets" if f["parse_10kb_cold_s"] <= 0.003 else "misses"
    lines += [
        f"10 KB / 200 macros ({f['parse_10kb_bytes']} bytes):",
        f"  cold parse        {_ms(f['parse_10kb_cold_s'])}   ({verdict} the <= 3 ms target)",
        f"  cold expand       {_ms(f['expand_10kb_cold_s'])}",
    ]
    for label in ("3kb", "30kb"):
        ratio = f[f"plain_{label}_ratio_cached"]
        verdict = "meets" if ratio <= 0.5 else "misses"
        lines.append(
            f"plain {{{{user}}}}/{{{{char}}}} prompt, {f[f'plain_{label}_bytes']} bytes, {f[f'plain_{label}_macros']} macros: "
            f"cached {_ms(f[f'plain_{label}_cached_s']).strip()} vs jinja2 {_ms(f[f'plain_{label}_jinja_cached_s']).strip()}"
            f" = {ratio:.2f}x ({verdict} the <= 0.5x target)"
        )
    lines.append(
        f"the 3 KB preset x10 ({f['rich_30kb_bytes']} bytes): cached {_ms(f['rich_30kb_cached_s']).strip()} vs jinja2 "
        f"{_ms(f['rich_30kb_jinja_cached_s']).strip()} = {f['rich_30kb_ratio_cached']:.2f}x"
    )
    verdict = "meets" if f["preset_like_ratio_cached"] <= 0.5 else "misses"
    lines += [
        f"preset-like prompt (comments, {{{{trim}}}}, {{{{setvar}}}}/{{{{getvar}}}}, several macros a line), "
        f"{f['preset_like_bytes']} bytes, {f['preset_like_macros']} macros:",
        f"  same context:      cached {_ms(f['preset_like_cached_s']).strip()} vs jinja2 "
        f"{_ms(f['preset_like_jinja_cached_s']).strip()} = {f['preset_like_ratio_cached']:.2f}x ({verdict} the <= 0.5x target)",
        f"  a new user each render: cached {_ms(f['preset_like_varying_s']).strip()} vs jinja2 "
        f"{_ms(f['preset_like_jinja_varying_s']).strip()} = {f['preset_like_ratio_varying']:.2f}x",
    ]
    lines.append("parser paths (CPU per unit, the region path unless said):")
    for key, value in f.items():
        if key.startswith("parser "):
            shown = " / ".join(f"{v:.1f}" for v in value) if isinstance(value, tuple | list) else f"{value:.1f}"
            lines.append(f"  {key[len('parser '):]}: {shown}")
    for label, _unit in HOSTILE:
        row = f.get(f"hostile_{label}")
        if row is not None:
            verdict = "meets" if row["cpu_s"] <= 1.0 and row["growth_mb"] <= 100 else "misses"
            quarter = f[f"hostile_{label}_quarter"]
            lines.append(
                f"hostile {label} x200,000: {row['cpu_s']:.2f} s CPU, +{row['growth_mb']:.0f} MB "
                f"(peak RSS {row['peak_mb']:.0f} MB), "
                f"{row['diagnostics']} diagnostics ({verdict} the <= 1 s, <= 100 MB target); "
                f"x50,000: {quarter['cpu_s']:.2f} s (x4 the fragments: {row['cpu_s'] / max(quarter['cpu_s'], 1e-9):.1f}x the time)"
            )
    for name in COSTLY:
        row = f.get(f"costly {name} (default)")
        if row is not None:
            verdict = "meets" if row["cpu_s"] <= 1.0 and row["growth_mb"] <= 100 else "misses"
            lines.append(
                f"2 MiB of {name}, default budget: {row['outcome']} after {row['cpu_s']:.2f} s CPU, "
                f"+{row['growth_mb']:.0f} MB ({verdict} the <= 1 s, <= 100 MB target)"
            )
    row = f.get("hostile_assemble_320kb")
    if row is not None:
        verdict = "meets" if row["cpu_s"] <= 1.0 and row["growth_mb"] <= 100 else "misses"
        lines.append(
            f"tavernbox assemble, a 320 KB preset prompt of {{{{if 1}}}} x40,000 (warm CLI): {row['cpu_s']:.2f} s CPU, "
            f"+{row['growth_mb']:.0f} MB ({verdict} the <= 1 s, <= 100 MB target)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--iterations",
        type=int,
        default=int(os.environ.get("TAVERNBOX_BENCH_ITERATIONS", "200")),
        help="loop count per measurement (default 200, or $TAVERNBOX_BENCH_ITERATIONS)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--hostile", action="store_true",
                        help="also expand issue 14's 200,000-fragment hostile texts and assemble its 320 KB preset (about 20 s more)")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    figures = run(args.iterations)
    if args.hostile:
        figures.update(hostile_rows())
    print(json.dumps(figures, indent=2) if args.json else report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Handlebars story-string speed: tavernbox.handlebars against Jinja2's SandboxedEnvironment.

A story string of the shape SillyTavern's context templates have (a dozen ``{{#if field}}{{field}}
{{/if}}`` sections, a ``{{#each}}`` over 20 example lines with ``@index``, a ``{{trim}}``) is rendered
by ``tavernbox.handlebars`` and, in the same run, by Jinja2's ``SandboxedEnvironment`` on the
equivalent Jinja template (the peer: a template engine in the same process). Reported as
tavernbox time / Jinja2 time, each the best of several repeats, the two interleaved so both see the
same machine load:

1. **warm**: render a compiled template (what a text-completion assembly does per request once the
   context template is cached);
2. **cold**: parse and render a template never seen before (a unique comment appended).

No target is set yet (the issue's speed target is for the whole text-completion assembly, which
renders one story string a request): Jinja2 compiles templates to Python functions, this engine
walks the tree with JavaScript's semantics at every step, and the ratio shows the price of that.
The script reports; it does not assert.

Run: ``python benchmarks/bench_handlebars.py [--iterations N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from jinja2.sandbox import SandboxedEnvironment

from tavernbox.handlebars import RenderSettings, compile_template

FIELDS = ("anchorBefore", "system", "wiBefore", "description", "personality", "scenario", "wiAfter", "persona",
          "anchorAfter", "mesExamples", "loreBefore", "loreAfter")
HBS = "".join(f"{{{{#if {f}}}}}{{{{{f}}}}}\n{{{{/if}}}}" for f in FIELDS) + (
    "{{#each lines}}{{@index}}: {{this}}\n{{/each}}{{trim}}")
JINJA = "".join(f"{{% if {f} %}}{{{{ {f} }}}}\n{{% endif %}}" for f in FIELDS) + (
    "{% for line in lines %}{{ loop.index0 }}: {{ line }}\n{% endfor %}{{ '{{trim}}' }}")
DATA = {f: (f"The {f} text, a sentence or two long. " * 3 if i % 3 else "") for i, f in enumerate(FIELDS)}
DATA["lines"] = [f"example line {i}" for i in range(20)]
SETTINGS = RenderSettings(helpers={"trim": lambda p, o: "{{trim}}"}, missing=lambda name: "{{" + name + "}}")


def best(fn: Callable[[], object], iterations: int, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        times.append((time.perf_counter() - start) / iterations)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = SandboxedEnvironment(autoescape=False)
    compiled = compile_template(HBS)
    jinja = env.from_string(JINJA)
    assert compiled.render(DATA, SETTINGS).replace("{{trim}}", "") == jinja.render(**DATA).replace("{{trim}}", "")
    counter = iter(range(10**9))
    figures = {}
    ours_warm = best(lambda: compiled.render(DATA, SETTINGS), args.iterations)
    theirs_warm = best(lambda: jinja.render(**DATA), args.iterations)
    ours_cold = best(lambda: compile_template(HBS + f"{{{{! {next(counter)} }}}}").render(DATA, SETTINGS),
                     max(1, args.iterations // 10))
    theirs_cold = best(lambda: env.from_string(JINJA + f"{{# {next(counter)} #}}").render(**DATA),
                       max(1, args.iterations // 10))
    figures = {"warm_us": ours_warm * 1e6, "jinja_warm_us": theirs_warm * 1e6, "warm_ratio": ours_warm / theirs_warm,
               "cold_us": ours_cold * 1e6, "jinja_cold_us": theirs_cold * 1e6, "cold_ratio": ours_cold / theirs_cold}
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    print(f"warm: {figures['warm_us']:.0f} us vs Jinja2 {figures['jinja_warm_us']:.0f} us "
          f"= {figures['warm_ratio']:.2f}x")
    print(f"cold: {figures['cold_us']:.0f} us vs Jinja2 {figures['jinja_cold_us']:.0f} us = {figures['cold_ratio']:.2f}x")


if __name__ == "__main__":
    main()

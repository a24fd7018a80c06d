"""Assembly benchmark: a 300-prompt preset, a 400-entry activated book, chats of 200/400/800 messages.

Run: ``/work/venv/bin/python benchmarks/bench_assemble.py [REPEAT] [--core-only]``. Prints the median time per assembly
for each chat length and the growth ratio (linear growth means ~2x per doubling). The 300 prompts
come from a source returning 300 text blocks (the SillyTavern prompt-manager source is a later
issue; the core work per block is the same), 20 of them at a depth. World-info activation is its own
stage (benchmarks/bench_worldinfo.py): the assembler receives the activated entries, here 40 of a
400-entry book, 5 of them at a depth. Every text block goes through the Tavern renderer (the macro
engine when installed). Times are process CPU time, which is steadier than wall time on a shared
machine.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from tavernbox.assembler import Assembler, AssemblyRequest, SourceRegistry, parse_preset
from tavernbox.assembler.render import TAVERN


def _prompts(context: Any, rule: Any) -> dict[str, Any]:
    blocks = []
    for i in range(300):
        block: dict[str, Any] = {"type": "text", "id": f"p{i}", "text": f"Prompt {i}: {{{{char}}}} keeps to the style guide. " * 3,
                                 "role": "system"}
        if i % 15 == 0:
            block["depth"], block["order"], block["role"] = i % 7, i, "user"
        blocks.append(block)
    return {"blocks": blocks}


def registry() -> SourceRegistry:
    reg = SourceRegistry.with_builtins()
    reg.register({"id": "bench.prompts", "plugin_id": "bench", "name": "300 prompts", "resolve": _prompts,
                  "renderer": TAVERN})
    return reg


def request(n_messages: int) -> AssemblyRequest:
    messages = [{"id": "sys", "role": "system", "content": "You are a narrator."}]
    for i in range(n_messages):
        if i % 20 == 10:
            messages.append({"id": f"m{i}", "role": "assistant", "content": None,
                             "tool_calls": [{"id": f"c{i}", "name": "roll", "arguments": "{}"}]})
        elif i % 20 == 11:
            messages.append({"id": f"m{i}", "role": "tool", "content": "4", "tool_call_id": f"c{i - 1}"})
        else:
            messages.append({"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                             "content": f"Message {i} about the dragon and the inn. " * 4})
    if messages[-1]["role"] != "user":
        messages.append({"id": "last", "role": "user", "content": "What now?"})
    book = [{"id": i, "content": f"Lore entry {i}: the dragon sleeps under the inn.", "comment": f"e{i}",
             "position": "at_depth" if i % 8 == 0 else ("before" if i % 2 else "after"), "depth": i % 5, "order": i,
             "role": "user" if i % 8 == 0 else "system"}
            for i in range(400) if i % 10 == 0]  # a 400-entry book of which 40 entries activated
    rules = [{"id": "native", "kind": "native-system"}, {"id": "prompts", "kind": "bench.prompts", "lifetime": "request"},
             {"id": "persona", "kind": "persona"}, {"id": "character", "kind": "character"},
             {"id": "wb", "kind": "worldbook"}, {"id": "history", "kind": "history"}, {"id": "input", "kind": "input"},
             {"id": "phi", "kind": "phi", "text": "Stay in character."}]
    preset = parse_preset({"format": "dsh-tavern-request-assembly", "version": 1, "name": "bench", "placement": "st",
                           "rules": rules})
    assets = {"character": {"data": {"name": "Seraphina", "description": "A guardian of the glade. " * 40,
                                     "personality": "Kind.", "scenario": "A forest."}},
              "persona": {"name": "Ann", "description": "A traveller."}, "world_info": book}
    return AssemblyRequest(preset, tuple(messages), (messages[-1]["id"],), assets, system_prompt_update="in-history",
                           max_profile_bytes=2 * 1024 * 1024)


def measure(n: int, repeat: int) -> float:
    assembler = Assembler(registry())
    req = request(n)
    assembler.assemble(req)  # warm-up (imports, macro parse caches)
    times = []
    for _ in range(repeat):
        start = time.process_time()
        assembler.assemble(req)
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = int(args[0]) if args else 9
    if "--core-only" in sys.argv:  # the assembler alone: Tavern text kept as written
        import tavernbox.macros

        if hasattr(tavernbox.macros, "expand_macros"):
            del tavernbox.macros.expand_macros
    results = {n: measure(n, repeat) for n in (200, 400, 800)}
    for n, ms in results.items():
        print(f"{n:4d} messages: {ms:7.2f} ms CPU per assembly (median of {repeat})")
    print(f"growth 200->400: {results[400] / results[200]:.2f}x, 400->800: {results[800] / results[400]:.2f}x")


if __name__ == "__main__":
    main()

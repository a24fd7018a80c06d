"""Text completion against chat completion: warm assembly of the same request (issue 27's target).

The request is the largest card of ``../shared/corpora`` (``de-quoc-la-ma-than-thanh.vi.v3.json``,
1.7 MB) with the 850 KB book ``prolix-zzz-lorebook-vector.json`` and a 200-message chat, given as
paths. Chat completion assembles it with the 1.2 MB preset ``hoxilo-it-takes-two-v5.2.vi.json``;
text completion with ChatML-shaped instruct and context templates (written here, in SillyTavern's
field names) and no preset. Both are warm (assembled once before), interleaved, and the median of
``REPEAT`` runs each is compared, so a busy machine slows both sides.

Target: text completion <= 1.2x chat completion. The script reports; it does not assert.
Run: ``python benchmarks/bench_text_completion.py [REPEAT] [--json]`` (default 15).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tavernbox.sillytavern.assemble import assemble_request
from tavernbox.sillytavern.text_completion import assemble_text_completion

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
PRESET = CORPORA / "presets" / "hoxilo-it-takes-two-v5.2.vi.json"
CARD = CORPORA / "cards" / "de-quoc-la-ma-than-thanh.vi.v3.json"
BOOK = CORPORA / "worldbooks" / "prolix-zzz-lorebook-vector.json"
TARGET_X = 1.2

INSTRUCT = {"name": "chatml-like", "input_sequence": "<|im_start|>user", "output_sequence": "<|im_start|>assistant",
            "system_sequence": "<|im_start|>system", "stop_sequence": "<|im_end|>", "input_suffix": "<|im_end|>\n",
            "output_suffix": "<|im_end|>\n", "system_suffix": "<|im_end|>\n", "wrap": True, "macro": True,
            "names_behavior": "force", "story_string_prefix": "<|im_start|>system", "story_string_suffix": "<|im_end|>\n"}
CONTEXT = {"name": "plain", "example_separator": "", "chat_start": "", "use_stop_strings": False,
           "story_string": "{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}"
                           "{{description}}\n{{/if}}{{#if personality}}{{personality}}\n{{/if}}{{#if scenario}}"
                           "{{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}"
                           "{{trim}}"}
SYSPROMPT = {"name": "short", "content": "Write {{char}}'s next reply.", "post_history": ""}


def request(text: bool) -> dict[str, Any]:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Message {i}: " + "words " * 30}
                for i in range(200)]
    data: dict[str, Any] = {"card": str(CARD), "books": [str(BOOK)], "chat": {"messages": messages}}
    if text:
        data["text_completion"] = {"instruct": INSTRUCT, "context": CONTEXT, "sysprompt": SYSPROMPT}
    else:
        data["preset"] = str(PRESET)
    return data


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = int(args[0]) if args else 15
    chat_req, text_req = request(False), request(True)
    assemble_request(chat_req)
    assemble_text_completion(text_req)
    chat_times, text_times = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        assemble_request(chat_req)
        chat_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        assemble_text_completion(text_req)
        text_times.append(time.perf_counter() - start)
    chat_ms, text_ms = statistics.median(chat_times) * 1e3, statistics.median(text_times) * 1e3
    figures = {"chat_completion_ms": chat_ms, "text_completion_ms": text_ms, "ratio": text_ms / chat_ms,
               "target": TARGET_X}
    if "--json" in sys.argv:
        print(json.dumps(figures, indent=1))
        return
    print(f"warm chat completion {chat_ms:.1f} ms, text completion {text_ms:.1f} ms: "
          f"{figures['ratio']:.2f}x (target <= {TARGET_X}x)")


if __name__ == "__main__":
    main()

"""Issue 12's scaling figure: a 5,000-message chat trimmed to a 32k budget against a 200-message chat.

Both chats go through :func:`tavernbox.assemble_request` with the largest corpus preset
(``hoxilo-it-takes-two-v5.2.vi.json``) and the Seraphina card, ``budget.max_context`` 32,000 and
``max_tokens`` 1,000, measured in one run (best CPU time of ``REPEAT`` warm calls each; a fresh chat
object each call, as a host sends one; the two sizes take turns). Two shapes:

- ``short`` messages (about 25 tokens): the 200-message chat fits whole, the 5,000-message chat
  sends about 1,000; the ratio then includes the extra messages sent.
- ``long`` messages (about 250 tokens): both chats fill the budget and send about 120, so the ratio
  is the cost of trimming itself (target <= 2x).

``counting``: the per-message token counter's misses when one message is added to a counted chat
(growth in new text only: 2 expected, the new message and the preset's prompt that quotes it
through ``{{lastUserMessage}}``).

What keeps the 5,000-message chat near the 200-message one (``sillytavern/history.py``): the
chat is read in one C-speed pass, only the history the budget can reach is built, expanded and
counted, the chat macros get the few messages they read plus ``chat_omitted``, and world info a
``ChatTail`` as deep as its deepest scan.

Run: ``python benchmarks/bench_budget.py [REPEAT] [--sizes 200,5000] [--json]``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
PRESET = CORPORA / "presets" / "hoxilo-it-takes-two-v5.2.vi.json"
CARD = CORPORA / "cards" / "st-default-seraphina.v2.json"
TARGET_X = 2.0


def _chat(n: int, words: int) -> dict[str, Any]:
    tail = " and talks about the war with the envoy" * words
    return {"messages": [{"role": "user" if i % 2 else "assistant",
                          "content": f"Message {i}: the king walks to the city gate{tail}."} for i in range(n)]}


def _best_cpu(sizes: tuple[int, int], words: int, repeat: int) -> list[tuple[float, int, int]]:
    """``(best CPU ms, sent, left out)`` per size; the sizes take turns, so a load that comes and goes
    on a shared machine weighs on both sides of the ratio alike."""
    from tavernbox import assemble_request

    def request(n: int) -> dict[str, Any]:
        return {"preset": str(PRESET), "card": str(CARD), "chat": _chat(n, words),
                "budget": {"max_context": 32_000, "max_tokens": 1_000}}

    out = []
    for n in sizes:
        assemble_request(request(n))  # warm: assets cached, tokenizer built, counts remembered
        out.append([float("inf"), 0, 0])
    for _ in range(repeat):
        for n, row in zip(sizes, out):
            req = request(n)
            start = time.process_time()
            result = assemble_request(req)
            row[0] = min(row[0], time.process_time() - start)
            row[1] = len(result.messages)
            row[2] = len(result.budget.dropped_messages) if result.budget is not None else 0
    return [(row[0] * 1000, int(row[1]), int(row[2])) for row in out]


def run(repeat: int, sizes: tuple[int, int] = (200, 5000)) -> dict[str, Any]:
    from tavernbox.sillytavern import budget as st_budget

    out: dict[str, Any] = {}
    for shape, words in (("short", 1), ("long", 30)):
        small, large = _best_cpu(sizes, words, repeat)
        out[shape] = {f"{sizes[0]}_cpu_ms": small[0], f"{sizes[1]}_cpu_ms": large[0], "sent": [small[1], large[1]],
                      "dropped": [small[2], large[2]], "ratio": large[0] / small[0]}
    counter = st_budget._counters.get("o200k")
    if counter is not None:
        before = counter.misses
        chat = _chat(sizes[1], 30)
        chat["messages"].append({"role": "user", "content": "One more message, never counted before."})
        from tavernbox import assemble_request

        assemble_request({"preset": str(PRESET), "card": str(CARD), "chat": chat,
                          "budget": {"max_context": 32_000, "max_tokens": 1_000}})
        out["counting"] = {"new_counts_for_one_new_message": counter.misses - before}
    return out


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = int(args[0]) if args else 5
    sizes = (200, 5000)
    for a in sys.argv[1:]:
        if a.startswith("--sizes="):
            small, large = a.split("=", 1)[1].split(",")
            sizes = (int(small), int(large))
    if not PRESET.exists() or not CARD.exists():
        print("skipped: the corpora live in ../shared beside the repository")
        return
    res = run(repeat, sizes)
    if "--json" in sys.argv:
        print(json.dumps({"repeat": repeat, "sizes": sizes, "target_x": TARGET_X, **res}, indent=2))
        return
    for shape in ("short", "long"):
        r = res[shape]
        print(f"{shape} messages: {sizes[0]} -> {r[f'{sizes[0]}_cpu_ms']:.1f} ms CPU (sent {r['sent'][0]}), "
              f"{sizes[1]} -> {r[f'{sizes[1]}_cpu_ms']:.1f} ms CPU (sent {r['sent'][1]}, left out {r['dropped'][1]}): "
              f"{r['ratio']:.2f}x" + (f"; target <= {TARGET_X:.0f}x: {'met' if r['ratio'] <= TARGET_X else 'MISSED'}"
                                      if shape == "long" else ""))
    if "counting" in res:
        print(f"counting: one new message costs {res['counting']['new_counts_for_one_new_message']} new count(s) "
              "(2 expected: the message and the preset prompt quoting it)")


if __name__ == "__main__":
    main()

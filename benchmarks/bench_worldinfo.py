"""World-info activation at scale: 10,000 entries over 50 messages, against a naive per-entry scan.

The naive scan is SillyTavern's own shape: for every entry, assemble its buffer string, lower-case
it, and test each key with a substring search or a freshly built whole-word regex. tavernbox
answers the same questions from indexes built once per scan (a word-run dict for whole-word keys,
one ``str.find`` over the concatenated chat for substring keys, per-piece memos for recursion), so
its cost grows with the text plus the keys rather than their product.

Books are normalised once (as a chat session does) and scanned again for every message; the first
scan of a book builds its key index, later scans reuse it. The naive baseline runs the initial pass
only (its recursion passes would take minutes at this size); ``--check`` asserts that both initial
passes activate the same entries. Figures are CPU time, so other load on the machine does not
inflate them. Run: ``python benchmarks/bench_worldinfo.py [--entries N] [--messages M] [--check]``.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from typing import Any

from tavernbox.worldinfo import activate_world_info, normalize_books
from tavernbox.worldinfo.regexes import js_regex_search, parse_js_regex

SETTINGS = {
    "world_info_depth": 50,
    "world_info_budget": 100,
    "world_info_recursive": True,
    "world_info_case_sensitive": False,
    "world_info_match_whole_words": True,
    "world_info_include_names": False,
    "max_context": 10_000_000,
}


def make_world(n_entries: int, n_messages: int, seed: int = 7) -> tuple[dict[str, Any], list[str]]:
    """A book of mixed keys (single words, multi-word phrases, regexes, secondary keys) and a chat."""
    rnd = random.Random(seed)
    vocab = [f"w{i:05d}" for i in range(20_000)]
    filler = ["the", "a", "and", "then", "said", "with", "over", "under", "quickly", "river", "Gate", "tower"]
    chat = []
    for _ in range(n_messages):
        words = [rnd.choice(vocab) if rnd.random() < 0.4 else rnd.choice(filler) for _ in range(rnd.randint(20, 40))]
        chat.append(" ".join(words).capitalize() + ".")
    entries: dict[str, Any] = {}
    for uid in range(n_entries):
        kind = rnd.random()
        if kind < 0.01:
            keys = [f"/{rnd.choice(vocab)}\\s+(?:the|a)/i"]
        elif kind < 0.2:
            keys = [f"{rnd.choice(vocab)} {rnd.choice(filler)}"]
        else:
            keys = [rnd.choice(vocab) for _ in range(rnd.randint(1, 3))]
        entry: dict[str, Any] = {"uid": uid, "key": keys, "content": f"Entry {uid} says {rnd.choice(vocab)}.",
                                 "order": rnd.randint(1, 500)}
        if rnd.random() < 0.1:
            entry["keysecondary"] = [rnd.choice(vocab), rnd.choice(filler)]
            entry["selectiveLogic"] = rnd.randint(0, 3)
        if rnd.random() < 0.05:
            entry["matchWholeWords"] = False
        entries[str(uid)] = entry
    return {"entries": entries}, chat


# ------------------------------------------------------------------------------------------------
# the naive reference: per entry, per key, on the assembled string (one initial pass + recursion)


def _naive_match(haystack: str, needle: str, whole: bool) -> bool:
    rx = parse_js_regex(needle)
    if rx is not None and rx.status == "ok":
        return js_regex_search(rx, haystack)
    haystack = haystack.lower()
    needle = needle.lower()
    if whole and len(needle.split()) == 1:
        return re.search(r"(?:^|[^A-Za-z0-9_])" + re.escape(needle) + r"(?:$|[^A-Za-z0-9_])", haystack) is not None
    return needle in haystack


def naive_initial_pass(book: dict[str, Any], chat: list[str]) -> set[int]:
    """The initial pass the naive way: every entry assembles and scans its own buffer."""
    messages = [m.strip() for m in reversed(chat)]
    activated: set[int] = set()
    for entry in sorted(book["entries"].values(), key=lambda e: -e["order"]):
        text = "\x01" + "\n\x01".join(messages[: SETTINGS["world_info_depth"]])
        whole = entry.get("matchWholeWords", SETTINGS["world_info_match_whole_words"])
        if not any(_naive_match(text, k.strip(), whole) for k in entry["key"]):
            continue
        secondary = entry.get("keysecondary") or []
        if secondary:
            hits = [_naive_match(text, k.strip(), whole) for k in secondary]
            logic = entry.get("selectiveLogic", 0)
            if not [any(hits), not all(hits), not any(hits), all(hits)][logic]:
                continue
        activated.add(entry["uid"])
    return activated


def _time(fn: Any, repeat: int) -> tuple[float, Any]:
    """Median CPU time of ``repeat`` runs (CPU time: the figure should not depend on other load)."""
    times = []
    result = None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), result


def _loop_speed() -> float:
    """CPU time of a plain 1M-iteration Python loop, to put the figures in proportion to the machine."""
    start = time.process_time()
    total = 0
    for i in range(1_000_000):
        total += i
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="assert the initial pass agrees with the naive scan")
    args = parser.parse_args(argv)

    book, chat = make_world(args.entries, args.messages)
    n_keys = sum(len(e["key"]) + len(e.get("keysecondary", [])) for e in book["entries"].values())
    print(f"entries={args.entries} keys={n_keys} messages={args.messages} chat_chars={sum(len(m) for m in chat)}")
    print(f"machine: a 1M-iteration Python loop takes {_loop_speed() * 1000:.0f} ms CPU here")

    load, books = _time(lambda: normalize_books(book)[0], 1)
    cold, activation = _time(lambda: activate_world_info(books, chat, SETTINGS), 1)
    warm, activation = _time(lambda: activate_world_info(books, chat, SETTINGS), args.repeat)
    trace_cost, _ = _time(lambda: len(activate_world_info(books, chat, SETTINGS).trace), args.repeat)
    one = {**SETTINGS, "world_info_max_recursion_steps": 1}
    ours_one, first = _time(lambda: activate_world_info(books, chat, one), args.repeat)
    naive, naive_uids = _time(lambda: naive_initial_pass(book, chat), 1)
    print(f"load (normalise {args.entries} entry dicts, once per book):    {load * 1000:8.1f} ms")
    print(f"activate, first scan of these books (builds the key index):     {cold * 1000:8.1f} ms")
    print(f"activate, every later scan ({len(activation.activated)} activated, "
          f"{len(activation.trace.steps)} passes):         {warm * 1000:8.1f} ms")
    print(f"  the same plus reading the full trace:                         {trace_cost * 1000:8.1f} ms")
    print(f"initial pass only (max_recursion_steps=1):                      {ours_one * 1000:8.1f} ms")
    print(f"naive per-entry initial pass:                                   {naive * 1000:8.1f} ms "
          f"({naive / ours_one:.0f}x slower)")
    for label, (n, m) in {"2x entries": (args.entries * 2, args.messages),
                          "2x messages": (args.entries, args.messages * 2)}.items():
        b2, c2 = make_world(n, m)
        prepared = normalize_books(b2)[0]
        activate_world_info(prepared, c2, one)
        t2, _ = _time(lambda: activate_world_info(prepared, c2, one), args.repeat)
        print(f"linearity, initial pass with {label}: {t2 * 1000:.1f} ms ({t2 / ours_one:.2f}x)")
    if args.check:
        ours_uids = set(first.uids)
        if ours_uids != naive_uids:
            print(f"MISMATCH: only ours {sorted(ours_uids - naive_uids)[:10]}, "
                  f"only naive {sorted(naive_uids - ours_uids)[:10]}")
            return 1
        print(f"check: the initial pass activates the same {len(ours_uids)} entries as the naive scan")
    return 0


if __name__ == "__main__":
    sys.exit(main())

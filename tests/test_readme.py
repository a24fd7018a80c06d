"""The README's Python snippets run as written (from the repository root), and its commands work."""

from __future__ import annotations

import os
import re
from typing import Any
from pathlib import Path

import pytest
from click.testing import CliRunner

from tavernbox.cli.main import main as cli

ROOT = Path(__file__).resolve().parents[1]


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def snippets(shared: Any = None) -> list[str]:
    """The README's Python snippets."""
    return re.findall(r"```python\n(.*?)```", readme(), re.S)


@pytest.mark.cases("snippet", lambda shared: [pytest.param(s, id=str(i)) for i, s in enumerate(snippets())])
def test_readme_python_snippet_runs(snippet: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(snippet, "README.md snippet", "exec"), {"__name__": "readme"})


def test_readme_try_it_command_assembles_the_bundled_request(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "tavernbox assemble --request corpora/sample-request.json" in readme()
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(cli, ["assemble", "--request", "corpora/sample-request.json"])
    assert res.exit_code == 0, res.output
    # the card, the persona, the constant and the keyed world-info entries, the chat: all in the request
    for text in ("Mira keeps the lighthouse", "Ash is a courier", "Gull Rock is a bare island",
                 "The Gull Rock light is a hundred years old", "Is the storm going to last?"):
        assert text in res.stdout
    assert os.path.exists(ROOT / "corpora" / "sample-chat.jsonl")

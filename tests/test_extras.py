"""A core install for embedding (issue 28): the engines and the CLI work without the service, PostgreSQL or
fuzzing packages, and a command whose extra is missing says which ``pip install`` brings it.

A child process makes the extras' packages unimportable (``sys.modules[name] = None``, as if they were not
installed) before anything of tavernbox is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTRA_MODULES = ("fastapi", "starlette", "uvicorn", "httpx", "psycopg", "hypothesis")

_CORE = r"""
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
sys.argv = ["tavernbox", *sys.argv[2:]]
if sys.argv[1:] == ["--api"]:
    import tavernbox
    sent = tavernbox.assemble_request({"preset": "corpora/sample-preset.json", "card": "corpora/sample-card.json",
                                       "chat": "corpora/sample-chat.jsonl"})
    print(len(sent.messages), tavernbox.expand_macros("{{user}}", {"user": "Ash"}).text,
          tavernbox.render_template("<%= 6 * 7 %>").text)
    raise SystemExit(0)
from tavernbox.cli.main import main
main()
"""


def _core(*args: str, blocked: tuple[str, ...] = EXTRA_MODULES) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CORE, ",".join(blocked), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_the_core_dependencies_leave_the_extras_out() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = " ".join(project["dependencies"])
    for name in ("fastapi", "uvicorn", "httpx", "psycopg", "hypothesis", "sentencepiece"):
        assert name not in core
    extras = project["optional-dependencies"]
    assert {"serve", "postgres", "fuzz", "tokenizers", "all", "test"} <= set(extras)
    assert "tavernbox[all]" in extras["test"] and extras["all"] == ["tavernbox[serve,postgres,fuzz,tokenizers]"]


def test_the_public_api_works_without_the_extras() -> None:
    done = _core("--api")
    assert done.returncode == 0, done.stderr
    count, user, answer = done.stdout.split()
    assert int(count) > 3 and user == "Ash" and answer == "42"


@pytest.mark.parametrize("args", [
    ["assemble", "--request", "corpora/sample-request.json", "--messages"],
    ["macros", "--card", "corpora/sample-card.json", "--context", "corpora/sample-context.json",
     "corpora/sample-prompt.txt"],
    ["import", "--json", "corpora/sample-card.json"],
    ["lint", "corpora/sample-preset.json"],
    ["cache-report", "--request", "corpora/sample-request.json", "--format", "json"],
], ids=lambda a: a[0])
def test_the_cli_commands_of_the_engines_work_without_the_extras(args: list[str]) -> None:
    done = _core(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    if "--json" in args or "--messages" in args or "json" in args:
        json.loads(done.stdout)


@pytest.mark.parametrize(("args", "blocked", "extra"), [
    (["serve", "--port", "0"], EXTRA_MODULES, "serve"),
    (["serve", "--port", "0", "--database", "postgresql://nobody@127.0.0.1:1/none"], ("psycopg",), "postgres"),
    (["fuzz", "--target", "macros", "--seconds", "1"], EXTRA_MODULES, "fuzz"),
], ids=["serve", "postgres", "fuzz"])
def test_a_command_whose_extra_is_missing_names_its_install(args: list[str], blocked: tuple[str, ...],
                                                             extra: str) -> None:
    done = _core(*args, blocked=blocked)
    assert done.returncode in (1, 2) and done.stdout == ""
    assert "error INSTALL_EXTRA_MISSING" in done.stderr and f"pip install 'tavernbox[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr

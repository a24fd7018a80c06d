"""The test suite itself: importing a test module reads no data, so a fresh clone collects without ``../shared``.

Each test module is imported in a child process whose audit hook records every file opened and every folder listed
while it imports; nothing but Python's own modules may be among them (data is read inside a test, a fixture or a
``cases`` loader, see ``conftest.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

_PROBE = r"""
import importlib, json, os, sys
tests, names = sys.argv[1], sys.argv[2:]
sys.path.insert(0, tests)
import conftest  # pytest imports it before any test module
seen = []
recording = [False]
def hook(event, args):
    if not recording[0] or event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    if not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    if path.endswith((".py", ".pyc", ".so", ".pth")) or "__pycache__" in path or not os.path.isabs(path):
        return
    recording[0] = False  # sys._getframe is audited too
    try:
        caller = sys._getframe(1).f_code.co_filename
    except ValueError:
        caller = ""
    recording[0] = True
    # not Python's import system (or importlib.metadata, for a library's entry points) listing sys.path's folders
    if not caller.startswith("<frozen importlib") and f"{os.sep}importlib{os.sep}" not in caller:
        seen.append((module, event, path))
sys.addaudithook(hook)
for module in names:
    recording[0] = True
    importlib.import_module(module)
    recording[0] = False
print(json.dumps(seen))
"""


def test_no_test_module_reads_files_or_folders_when_imported() -> None:
    names = sorted(p.stem for p in TESTS.glob("test_*.py"))
    done = subprocess.run([sys.executable, "-c", _PROBE, str(TESTS), *names], capture_output=True, text=True,
                          timeout=600, cwd=TESTS.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    repository = str(TESTS.parent.parent)
    reads = [(module, event, path) for module, event, path in json.loads(done.stdout.splitlines()[-1])
             if path.startswith(repository) and "site-packages" not in path]
    assert not reads, "read while importing:\n" + "\n".join(f"{m}: {e} {p}" for m, e, p in reads)


@pytest.mark.parametrize("ci", ["", "true"])
def test_missing_shared_data_skips_with_its_reason_and_fails_under_ci(tmp_path: Path, ci: str) -> None:
    """A clone without ``../shared`` beside it: its shared-data tests skip, naming the path; under CI they fail."""
    clone = tmp_path / "clone" / "tests"
    clone.mkdir(parents=True)
    (clone / "conftest.py").write_text((TESTS / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    (clone / "test_needs.py").write_text(
        "import pytest\n"
        "@pytest.mark.needs_shared('corpora/MANIFEST.tsv')\n"
        "def test_marked():\n    pass\n"
        "def test_fixture(shared):\n    shared('conformance', 'st-macros.jsonl')\n"
        "@pytest.mark.cases('path', lambda shared: sorted(shared('corpora', 'cards').iterdir()))\n"
        "def test_cases(path):\n    pass\n"
        "@pytest.mark.cases(('kind', 'name'), lambda shared: [('x', 'y')] if shared('corpora', 'cards') else [])\n"
        "def test_pairs(kind, name):\n    pass\n", encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "CI": ci, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(clone)],
                          capture_output=True, text=True, timeout=120, cwd=clone.parent, env=env)
    out = done.stdout
    if ci:
        assert done.returncode == 1, out
        assert "1 failed, 3 errors" in out and "under CI=true the shared data must be present" in out
    else:
        assert done.returncode == 0, out
        assert "4 skipped" in out
        for relative in ("corpora/MANIFEST.tsv", "conformance/st-macros.jsonl", "corpora/cards"):
            assert f"needs ../shared/{relative}" in out, out

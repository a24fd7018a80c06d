"""What ``tavernbox serve`` tells and where it keeps its data (issue 28): every environment variable it reads is in
``--help`` and the README; the default database lives in the user's data folder, not the current directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from service_support import RunningService

from tavernbox.cli.main import main
from tavernbox.cli.serve import ENVIRONMENT, default_database

ROOT = Path(__file__).resolve().parents[1]


def test_every_environment_variable_is_in_the_help_and_the_readme() -> None:
    shown = CliRunner().invoke(main, ["serve", "--help"], prog_name="tavernbox")
    assert shown.exit_code == 0
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert {"TAVERNBOX_TOKEN", "TAVERNBOX_UPSTREAM_KEY"} <= set(ENVIRONMENT)
    for name in ENVIRONMENT:
        assert name in shown.stdout and name in readme, name
    assert "The default database:" in shown.stdout


def test_the_default_database_is_in_the_users_data_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_database() == tmp_path / "tavernbox" / "tavernbox.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_database() == Path.home() / ".local" / "share" / "tavernbox" / "tavernbox.db"


def test_serve_without_database_writes_there_and_not_in_the_current_directory(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "clone"
    work.mkdir()
    monkeypatch.chdir(work)
    data = tmp_path / "data"
    with RunningService(None, extra_env={"XDG_DATA_HOME": str(data)}) as svc:
        assert svc.client is not None
        assert svc.client.put("/v1/library/presets/p", json={"prompts": [], "prompt_order": []}).status_code == 201
        assert str(data / "tavernbox" / "tavernbox.db") in svc.printed
    assert (data / "tavernbox" / "tavernbox.db").is_file()
    assert list(work.iterdir()) == []

"""What the test modules share with pytest itself: the data beside the clone, and cases read at collection.

``../shared`` (the corpora, SillyTavern's conformance rows, the oracle's tools) lives beside the repository, not in
it. A test that needs it says so, and is then skipped with a visible reason on a clone without it, or fails when it
is missing under CI (``CI=true``), where the data must be there:

- ``@pytest.mark.needs_shared("corpora/presets/x.json", ...)`` on a test or a module (``pytestmark``);
- the ``shared`` fixture, ``shared("corpora", "cards")``, for a path read inside a test or another fixture;
- ``@pytest.mark.cases(argnames, loader, ids=...)``: parametrize with ``loader(shared)`` at collection time (never at
  import: no test module touches the file system when it is imported). A loader that asks for missing shared data
  gives one case, skipped (failed under CI) with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

#: ``../shared`` beside the repository.
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def under_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as CI services set it): missing data is then a failure."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing(relative: str) -> str:
    return f"needs ../shared/{relative} ({SHARED / relative}), which is not beside this clone"


def shared_path(*parts: str) -> Path:
    """``../shared/<parts>``; when it is absent the calling test is skipped with the reason, or fails under CI."""
    relative = "/".join(parts)
    path = SHARED / relative
    if not path.exists():
        if under_ci():
            pytest.fail(_missing(relative) + "; under CI=true the shared data must be present", pytrace=False)
        pytest.skip(_missing(relative))
    return path


@pytest.fixture(scope="session")
def shared() -> Callable[..., Path]:
    """:func:`shared_path` for a test or fixture: ``shared("corpora", "cards")``."""
    return shared_path


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_shared(*paths): the test reads these paths under ../shared")
    config.addinivalue_line("markers", "cases(argnames, loader, ids=None): parametrize with loader(shared) "
                                       "at collection time")
    config.addinivalue_line("markers", "shared_missing(outcome): the cases could not be read (set by conftest)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for marker in metafunc.definition.iter_markers("cases"):
        argnames, loader = marker.args
        try:
            values = list(loader(shared_path))
        except (pytest.skip.Exception, pytest.fail.Exception) as missing:
            names = argnames.split(",") if isinstance(argnames, str) else list(argnames)
            metafunc.parametrize(argnames, [pytest.param(*[None] * len(names), id="shared-data-missing",
                                                         marks=pytest.mark.shared_missing(missing))])
            continue
        metafunc.parametrize(argnames, values, ids=marker.kwargs.get("ids"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("shared_missing"):
        raise marker.args[0]  # the skip, or under CI the failure, that reading the cases met
    for marker in item.iter_markers("needs_shared"):
        for relative in marker.args:
            shared_path(relative)

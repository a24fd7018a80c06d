"""Run ``tavernbox serve`` as a real process on a free loopback port, for the HTTP tests.

:class:`RunningService` starts the console command (``python -m tavernbox.cli.main serve --port
0``), reads the URL it prints, waits for ``/healthz`` and stops the process (SIGTERM, then
SIGKILL) when the ``with`` block ends; its stderr (the request log) is kept for assertions.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

TOKEN = "test-token-0123456789"


def die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGTERM when the test process dies (no orphaned service)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class RunningService:
    """One ``tavernbox serve`` process; ``base`` is its URL, ``client`` an authorised httpx client."""

    def __init__(self, database: str | None, *, token: str | None = TOKEN, upstream: str | None = None,
                 extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.database = database
        self.args = args
        self.token = token
        self.upstream = upstream
        self.extra_env = extra_env or {}
        self.base = ""
        self.printed = ""
        self._log = tempfile.NamedTemporaryFile(prefix="tavernbox-serve-", suffix=".log", delete=False)
        self.proc: subprocess.Popen[str] | None = None
        self.client: httpx.Client | None = None

    def __enter__(self) -> RunningService:
        env = {k: v for k, v in os.environ.items() if k != "TAVERNBOX_TOKEN"}
        if self.token is not None:
            env["TAVERNBOX_TOKEN"] = self.token
        env.update(self.extra_env)
        args = [sys.executable, "-m", "tavernbox.cli.main", "serve", "--port", "0"]
        if self.database is not None:  # None: the default database
            args += ["--database", self.database]
        if self.upstream:
            args += ["--upstream", self.upstream]
        args += list(self.args)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
                                     preexec_fn=die_with_parent if sys.platform == "linux" else None)
        assert self.proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Bearer" in line or "docs" in line and self.token is not None:
                break
        self.printed = "".join(lines)
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", self.printed)
        if match is None:
            self.stop()
            raise AssertionError(f"the service did not start: {self.printed!r} {self.log()!r}")
        self.base = match.group(1)
        token = self.token or re.search(r"Bearer (\S+)", self.printed).group(1)  # type: ignore[union-attr]
        self.client = httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/healthz", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("the service never answered /healthz")

    def log(self) -> str:
        """What the process wrote to stderr so far."""
        return Path(self._log.name).read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the process (and wait for it)."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self._log.close()
        os.unlink(self._log.name)

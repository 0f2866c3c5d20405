"""Real gunicorn processes serving ``wsgi:app``, started and stopped by the tests.

Each server binds 127.0.0.1 on a free port, has its own SQLite file (or shares one on purpose),
its own instance folder, no gunicorn control socket, and writes its log to a file that a failing
test shows (see conftest.py). Nothing of bread_sync is imported or mocked here.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx

MAIN = Path(__file__).resolve().parents[2]
GUNICORN = MAIN / ".venv" / "bin" / "gunicorn"

READY_SECONDS = 30.0
POLL_SECONDS = 0.05
STOP_SECONDS = 10.0
KILL_SECONDS = 5.0
BIND_ATTEMPTS = 3
#: Settings of the developer's shell that would change what the servers under test do.
_SCRUBBED = ("GUNICORN_CMD_ARGS", "WEB_CONCURRENCY", "REDIS_URL")

#: Every server started in this pytest process, for the failure report.
STARTED: list[Server] = []


class ServerFailed(RuntimeError):
    """A server did not come up; the message carries its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(proc: subprocess.Popen, port: int, log: Path) -> None:
    """Return once ``GET /health`` on 127.0.0.1:``port`` answers 200; ServerFailed, with the
    log, if ``proc`` exits first or READY_SECONDS pass. For servers these tests start otherwise
    than as a :class:`Server` (``bread-sync start``, ``bread-sync dev``)."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        try:  # the pause between polls doubles as the watch for an early exit
            code = proc.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            continue
        raise ServerFailed(f"exited with {code} before it served:\n{log.read_text()}")
    raise ServerFailed(f"not serving within {READY_SECONDS:g} s:\n{log.read_text()}")


@dataclass(eq=False)
class Server:
    """One gunicorn master (and its workers) on one port."""

    name: str
    home: Path
    db: Path | str  # a SQLite file, or a Postgres database's URL
    transport: str = "http-sse"
    worker: str = "gevent"
    workers: int = 1
    threads: int | None = None
    graceful_timeout: float = 5.0
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    started_at: float | None = None
    stopped_at: float | None = None
    _proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / f"{self.name}.log"

    def start(self) -> Server:
        """Start the process and return once ``GET /health`` answers 200."""
        self.home.mkdir(parents=True, exist_ok=True)
        if self not in STARTED:
            STARTED.append(self)
        for attempt in range(1, BIND_ATTEMPTS + 1):
            self.port = free_port()
            self._spawn()
            try:
                self._wait_ready()
                return self
            except ServerFailed:
                self.stop()
                if attempt == BIND_ATTEMPTS or "in use" not in self.log():
                    raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BREAD_") and k not in _SCRUBBED}
        env.update(
            BREAD_DB=str(self.db),
            BREAD_INSTANCE=str(self.home / f"{self.name}-instance"),
            BREAD_TRANSPORT=self.transport,
            # the demo's word-counter calls this server's own MCP endpoint
            BREAD_DEMO_MCP_URL=f"http://127.0.0.1:{self.port}/mcp",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.env)
        cmd = [
            str(GUNICORN), "-c", "gunicorn.conf.py", "-k", self.worker, "-w", str(self.workers),
            "-b", f"127.0.0.1:{self.port}", "--no-control-socket",
            "--graceful-timeout", f"{self.graceful_timeout:g}",
        ]  # fmt: skip
        if self.threads is not None:
            cmd += ["--threads", str(self.threads)]
        cmd.append("wsgi:app")
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== {' '.join(cmd)}\n".encode())
            log.flush()
            # The log is a file, not a pipe: nothing to drain, nothing left open.
            self._proc = subprocess.Popen(
                cmd, cwd=MAIN, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.started_at, self.stopped_at = time.monotonic(), None

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        with httpx.Client(timeout=1.0) as client:
            for _ in range(int(READY_SECONDS / POLL_SECONDS)):
                if time.monotonic() > deadline:
                    break
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                try:  # the pause between polls doubles as the watch for an early exit
                    code = self._proc.wait(timeout=POLL_SECONDS)
                except subprocess.TimeoutExpired:
                    continue
                raise ServerFailed(f"{self.name} exited with {code} before it was ready:\n{self.log()}")
        raise ServerFailed(f"{self.name} was not ready within {READY_SECONDS:g} s:\n{self.log()}")

    @property
    def pid(self) -> int | None:
        """The master's pid, while it runs."""
        return None if self._proc is None else self._proc.pid

    def worker_pids(self) -> list[int]:
        """The master's children, its workers (Linux: read from /proc)."""
        if self._proc is None or self._proc.poll() is not None:
            return []
        children = Path(f"/proc/{self._proc.pid}/task/{self._proc.pid}/children").read_text()
        return [int(pid) for pid in children.split()]

    def kill(self) -> None:
        """SIGKILL the master and its workers at once, as a machine that loses power would."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this server leads, nothing else
            proc.wait(timeout=KILL_SECONDS)
        self.stopped_at = time.monotonic()

    def wait(self, seconds: float) -> int:
        """Wait for the master to exit (after :meth:`terminate`); its exit code."""
        assert self._proc is not None, "the server was not started"
        code = self._proc.wait(timeout=seconds)
        self._proc, self.stopped_at = None, time.monotonic()
        return code

    def terminate(self) -> None:
        """Ask the server to stop (SIGTERM) without waiting; :meth:`stop` waits."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL to its process group (master and workers) after a deadline."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the group this server leads, nothing else
                proc.wait(timeout=KILL_SECONDS)
        self.stopped_at = time.monotonic()

    def restart(self) -> Server:
        """Stop this process and start a new one with the same settings (a new port)."""
        self.stop()
        return self.start()

    def log(self, limit: int = 20_000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return text[-limit:]


class ServerPool:
    """Servers kept for a whole session, started on first use: one per wire format, a second
    process on the same SQLite file as each (the same again per ``BREAD_CONFIG`` a test names),
    and one with a small body limit."""

    def __init__(self, root: Path):
        self.root = root
        self._servers: dict[str, Server] = {}

    def _get(self, key: str, make) -> Server:
        server = self._servers.get(key)
        if server is None:
            server = self._servers[key] = make()
            server.start()
        return server

    def primary(self, transport: str, config: str | None = None) -> Server:
        """The server for ``transport``; with ``config`` (``module:attribute``, passed as
        ``BREAD_CONFIG``) another one, on a SQLite file of its own, serving that config."""
        key = _keyed(transport, config)
        return self._get(
            key, lambda: Server(f"{key}-a", self.root, self.root / f"{key}.db", transport, env=_config_env(config))
        )

    def peer(self, transport: str, config: str | None = None) -> Server:
        """A second process sharing the primary's SQLite file; nothing else is shared."""
        db, key = self.primary(transport, config).db, _keyed(transport, config)
        return self._get(f"{key}-peer", lambda: Server(f"{key}-b", self.root, db, transport, env=_config_env(config)))

    def limited(self, max_body_bytes: int) -> Server:
        env = {"BREAD_MAX_BODY_BYTES": str(max_body_bytes)}
        return self._get("limited", lambda: Server("limited", self.root, self.root / "limited.db", env=env))

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.terminate()
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


def _keyed(transport: str, config: str | None) -> str:
    """The pool's key (and file name stem) of a server: the transport, and the config's module."""
    return transport if config is None else f"{transport}-{config.partition(':')[0].rpartition('.')[2]}"


def _config_env(config: str | None) -> dict[str, str]:
    return {} if config is None else {"BREAD_CONFIG": config}


#: What ``bread-sync worker`` prints once its consumer runs.
WORKER_READY = b"greenlets driving queued runs"


@dataclass(eq=False)
class Worker:
    """One ``bread-sync worker`` process (the runs' driver when ``BREAD_EXECUTOR=huey``): no
    fork, so its pid is the owner its runs' records name."""

    name: str
    home: Path
    db: Path | str
    env: dict[str, str] = field(default_factory=dict)
    greenlets: int = 8
    _proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.home / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> Worker:
        """Start the process and return once its consumer runs."""
        self.home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BREAD_") and k not in _SCRUBBED}
        env.update(BREAD_DB=str(self.db), BREAD_INSTANCE=str(self.home / f"{self.name}-instance"), PYTHONUNBUFFERED="1")
        env.update(self.env)
        cmd = [str(MAIN / ".venv" / "bin" / "bread-sync"), "worker", "--workers", str(self.greenlets)]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd, cwd=MAIN, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + READY_SECONDS
        while WORKER_READY not in self.log_path.read_bytes():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise ServerFailed(f"{self.name} did not start:\n{self.log()}")
            time.sleep(POLL_SECONDS)
        return self

    def kill(self) -> None:
        """SIGKILL the worker, as a machine that loses power would."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=KILL_SECONDS)

    def stop(self) -> int | None:
        """SIGTERM (a warm shutdown), then SIGKILL after a deadline; its exit code."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout=KILL_SECONDS)

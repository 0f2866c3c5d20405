"""A real Postgres for the tests: ``initdb``/``postgres`` found on PATH, else the server binaries
the ``pgserver`` wheel ships (so a fresh machine needs nothing but pip).

The server runs as a subprocess on a free loopback port, its data in a folder of its own that
is removed at the end. Postgres refuses to run as root, and CI runs as root: there it runs as
``nobody`` (through ``runuser``) in a folder that user owns, with a copy of the binaries where
``nobody`` cannot reach the wheel's. Only the binaries of pgserver are used, never its Python.
A test can stop the server and start it again on the same port and data.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

READY_SECONDS = 30.0
STOP_SECONDS = 10.0
POLL_SECONDS = 0.05
#: The unprivileged user a root process starts the server as.
UNPRIVILEGED = "nobody"
#: For tests only: no fsync (a crash of the machine, not of the server, would lose commits).
SETTINGS = {
    "listen_addresses": "127.0.0.1", "fsync": "off", "full_page_writes": "off", "max_connections": "300",
    "log_min_messages": "warning",
}  # fmt: skip


def postgres_bindir(path: str | None = None) -> Path | None:
    """The folder of ``initdb`` and ``postgres``: on ``path`` (default PATH), else pgserver's."""
    found = shutil.which("initdb", path=path)
    if found and shutil.which("postgres", path=path):
        return Path(found).resolve().parent  # Debian links them from /usr/local/bin
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    bundled = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"
    return bundled if (bundled / "postgres").exists() else None


def unavailable() -> str | None:
    """Why no Postgres can be started here, or None when one can."""
    if importlib.util.find_spec("psycopg") is None:
        return 'psycopg is not installed: pip install "bread-sync[test]"'
    if postgres_bindir() is None:
        return 'no Postgres: set DATABASE_URL, put initdb and postgres on PATH, or pip install "bread-sync[test]"'
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root, and no runuser to start Postgres as an unprivileged user"
    return None


def database_url(admin_url: str, name: str) -> str:
    """``admin_url`` with its database replaced by ``name``."""
    parts = urlsplit(admin_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_database(admin_url: str, name: str) -> str:
    """A new empty database ``name`` on the server of ``admin_url``; its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """One ``postgres`` process: ``start()``, ``stop()``, ``start()`` again, same port and data;
    ``remove()`` deletes its folder."""

    def __init__(self, bindir: Path | None = None):
        self.bindir = bindir or postgres_bindir()
        if self.bindir is None:
            raise RuntimeError('no Postgres: put initdb and postgres on PATH or pip install "bread-sync[test]"')
        self.home = Path(tempfile.mkdtemp(prefix="bread-pg-"))
        self.port = free_port()
        self._as_user = UNPRIVILEGED if os.geteuid() == 0 else None
        self._proc: subprocess.Popen | None = None
        if self._as_user:
            shutil.chown(self.home, self._as_user)
            self.bindir = self._reachable(self.bindir)
        self._run(["initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync",
                   "--no-locale"])  # fmt: skip

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def log_path(self) -> Path:
        return self.home / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        settings = [arg for name, value in SETTINGS.items() for arg in ("-c", f"{name}={value}")]
        cmd = [*self._prefix(), str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
               "-k", str(self.home), *settings]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_SECONDS
        while not self.answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"postgres did not start on {self.port}:\n{self.log_path.read_text()}")
            time.sleep(POLL_SECONDS)  # the pause between polls, bounded by the deadline
        return self

    def answers(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url(), connect_timeout=1).close()
            return True
        except psycopg.OperationalError:
            return False

    def stop(self, mode: int = signal.SIGINT) -> None:
        """Stop the server: SIGINT is Postgres's fast shutdown (clients are disconnected, what
        was committed is on disk), SIGQUIT its immediate one (a crash, recovered at the next
        start)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        postmaster = self._postmaster_pid() or proc.pid  # under runuser, not the child we hold
        try:
            os.kill(postmaster, mode)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.kill(postmaster, signal.SIGKILL)
            proc.wait(timeout=STOP_SECONDS)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def _prefix(self) -> list[str]:
        return ["runuser", "-u", self._as_user, "--"] if self._as_user else []

    def _run(self, args: list[str]) -> None:
        cmd = [*self._prefix(), str(self.bindir / args[0]), *args[1:]]
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=self.home)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")

    def _reachable(self, bindir: Path) -> Path:
        """``bindir``, or a copy of its installation in our folder when the user cannot run it."""
        probe = subprocess.run([*self._prefix(), str(bindir / "postgres"), "--version"], capture_output=True)
        if probe.returncode == 0:
            return bindir
        # The wheel's package, and beside it the libraries its binaries find relative to
        # themselves (auditwheel's ``pgserver.libs``, their RPATH is $ORIGIN/../../../).
        package = bindir.parent.parent
        for folder in (package, package.with_name(f"{package.name}.libs")):
            if folder.exists():
                shutil.copytree(folder, self.home / folder.name, symlinks=True)
                subprocess.run(["chown", "-R", self._as_user, str(self.home / folder.name)], check=True)
        return self.home / package.name / bindir.parent.name / "bin"

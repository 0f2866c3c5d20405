"""Fixtures of the integration suite: real gunicorn servers and an HTTP client.

Servers that tests can share (one per wire format, a second process on the same SQLite file,
one with a small body limit) live for the whole session; tests that stop or reconfigure a
server get fresh ones from ``start_server``. A failing test shows the logs of the servers that
were up while it ran.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytest.register_assert_rewrite("tests.integration.client")

from . import servers  # noqa: E402
from .a2a_fixtures import a2a  # noqa: E402, F401 - the A2A tests' server
from .client import TRANSPORTS, WIRES, new_client  # noqa: E402

_TEST_STARTED = pytest.StashKey[float]()
#: The npm package the official JavaScript clients are installed into, and those clients.
NODE = Path(__file__).resolve().parent.parent / "node"
NODE_CLIENTS = ("@ag-ui/client", "@ai-sdk/react", "@modelcontextprotocol/sdk", "ai", "esbuild", "openai")


@pytest.fixture(params=WIRES)
def wire(request) -> str:
    """The wire format under test: ``sse`` (http-sse) or ``ndjson`` (http-chunked)."""
    return request.param


@pytest.fixture(scope="session")
def pool(tmp_path_factory):
    pool = servers.ServerPool(tmp_path_factory.mktemp("shared-servers"))
    yield pool
    pool.stop_all()


@pytest.fixture
def server(pool, wire) -> servers.Server:
    """The session's server for this wire format (gevent, one worker)."""
    return pool.primary(TRANSPORTS[wire])


@pytest.fixture
def peer(pool, wire) -> servers.Server:
    """A second server process on the same SQLite file as ``server``; no shared transport."""
    return pool.peer(TRANSPORTS[wire])


@pytest.fixture
def start_server(tmp_path):
    """Start a server of this test's own, stopped when the test ends."""
    started: list[servers.Server] = []

    def start(name: str = "fresh", *, db=None, transport: str = "http-sse", **settings) -> servers.Server:
        server = servers.Server(name, tmp_path, db or tmp_path / "bread.db", transport, **settings)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.terminate()
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """tests/node with the official npm clients installed (``npm ci`` from its package-lock) if
    they are not there yet; reused by later runs."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not on PATH: the tests of the official npm clients need them")
    # One install at a time: the suite's workers (pytest-xdist) may all ask at once.
    with open(NODE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((NODE / "node_modules" / name / "package.json").exists() for name in NODE_CLIENTS):
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE, capture_output=True, text=True,
                                  timeout=300)  # fmt: skip
            assert done.returncode == 0, done.stderr
    return NODE


@pytest.fixture
def http():
    with new_client() as client:
        yield client


def pytest_runtest_setup(item) -> None:
    item.stash[_TEST_STARTED] = time.monotonic()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        since = item.stash.get(_TEST_STARTED, 0.0)
        for server in servers.STARTED:
            if server.started_at is not None and (server.stopped_at is None or server.stopped_at >= since):
                report.sections.append((f"gunicorn log: {server.name} ({server.url})", server.log(8000)))
    return report

"""The listen rules of http-api.md, through the real ``bread-sync start`` (gunicorn, gevent):
every combination of auth / authorize / loopback or public bind either answers /health, or exits
non-zero before it listens. The config is :func:`config` below, chosen by the environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bread_sync import ServerSettings
from bread_sync.demo import config as demo_config
from bread_sync.server import auth_plugin
from bread_sync.server.listen import LOOPBACK_WARNING

ROOT = Path(__file__).resolve().parent.parent
BREAD_SYNC = Path(sys.executable).parent / "bread-sync"
KEY = "listen-rules-key-0123456789"
DEADLINE = 30.0  # seconds for a server to come up or a refusal to exit; generous for a loaded CI


def config():
    """The demo agents, with the auth plugin and an authorize function when the env says so."""
    plugins = [auth_plugin(api_keys=[KEY])] if os.environ.get("LISTEN_AUTH") == "1" else []
    authorize = (lambda identity, action, args: True) if os.environ.get("LISTEN_AUTHORIZE") == "1" else None
    return demo_config().model_copy(
        update={"plugins": plugins, "server": ServerSettings(authorize=authorize), "store": "memory"}
    )


COMBINATIONS = [
    # auth, authorize, host, outcome
    (False, False, "127.0.0.1", "warn"),
    (False, True, "127.0.0.1", "warn"),
    (False, False, "0.0.0.0", "refuse"),
    (False, True, "0.0.0.0", "refuse"),
    (True, False, "127.0.0.1", "refuse"),
    (True, False, "0.0.0.0", "refuse"),
    (True, True, "127.0.0.1", "listen"),
    (True, True, "0.0.0.0", "listen"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def spawn(tmp_path):
    """Start ``bread-sync`` with a combination; every process is killed in teardown."""
    started = []

    def start(auth: bool, authorize: bool, *args: str, command=(str(BREAD_SYNC),), env=None):
        child = {k: v for k, v in os.environ.items() if not k.startswith(("BREAD_", "LISTEN_", "WEB_"))}
        child.update(BREAD_CONFIG="tests.test_listen_rules:config", BREAD_INSTANCE=str(tmp_path / "instance"),
                     PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", LISTEN_AUTH=str(int(auth)),
                     LISTEN_AUTHORIZE=str(int(authorize)), **(env or {}))  # fmt: skip
        log = tmp_path / f"server-{len(started)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([*command, *args], cwd=ROOT, env=child, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        started.append(proc)
        return proc, log

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def get(port: int, path: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def wait_for_health(proc: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            if get(port, "/health") == 200:
                return
        except OSError:
            pass
        if proc.poll() is not None:
            pytest.fail(f"exited with {proc.returncode} before answering /health:\n{log.read_text()}")
        time.sleep(0.2)
    pytest.fail(f"/health did not answer within {DEADLINE:g} s:\n{log.read_text()}")


def assert_refused(proc: subprocess.Popen, port: int, log: Path) -> None:
    assert proc.wait(timeout=DEADLINE) != 0
    text = log.read_text()
    assert "AUTH_NOT_CONFIGURED" in text and "Listening at" not in text, text
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(("auth", "authorize", "host", "outcome"), COMBINATIONS)
def test_bread_sync_start_obeys_the_listen_rules(spawn, auth, authorize, host, outcome):
    port = free_port()
    proc, log = spawn(auth, authorize, "start", "--host", host, "--port", str(port), "--workers", "1")
    if outcome == "refuse":
        assert_refused(proc, port, log)
        return
    wait_for_health(proc, port, log)
    if outcome == "warn":
        assert get(port, "/agents") == 200
        assert LOOPBACK_WARNING in log.read_text()
    else:
        assert get(port, "/agents") == 401
        assert get(port, "/agents", {"Authorization": f"Bearer {KEY}", "Host": "api.example.com"}) == 200


@pytest.mark.parametrize("name", ["BREAD_API_KEYS", "BREAD_SECRET"])
def test_bread_sync_start_refuses_credentials_no_auth_plugin_reads(spawn, name):
    """A key set without the auth plugin would be ignored and every local request served."""
    port = free_port()
    proc, log = spawn(False, False, "start", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                      env={name: "k" * 32})  # fmt: skip
    assert_refused(proc, port, log)
    assert f"sets {name}, but no auth plugin reads it: add auth_plugin()" in log.read_text()


def test_a_key_in_the_environment_with_the_auth_plugin_is_required(spawn):
    port = free_port()
    env_key = "env-listen-key-0123456789"
    proc, log = spawn(True, True, "start", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                      env={"BREAD_API_KEYS": env_key, "BREAD_SECRET": "s" * 32})  # fmt: skip
    wait_for_health(proc, port, log)
    assert get(port, "/agents") == 401
    assert get(port, "/agents", {"Authorization": f"Bearer {env_key}"}) == 200


def test_bread_sync_dev_refuses_a_public_bind_without_auth(spawn):
    port = free_port()
    proc, log = spawn(False, True, "dev", "--host", "0.0.0.0", "--port", str(port))
    assert_refused(proc, port, log)


def test_gunicorn_with_the_shipped_conf_refuses_auth_without_authorize(spawn):
    port = free_port()
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    proc, log = spawn(True, False, "-c", "gunicorn.conf.py", "wsgi:app", command=(gunicorn,),
                      env={"BREAD_BIND": f"0.0.0.0:{port}"})  # fmt: skip
    assert_refused(proc, port, log)
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(
    ("auth", "env", "said"),
    [(True, {}, "AUTH_NOT_CONFIGURED"), (False, {"BREAD_API_KEYS": "k" * 32}, "but no auth plugin reads it")],
    ids=["auth-without-authorize", "unread-keys"],
)
def test_gunicorn_without_the_shipped_conf_never_serves_a_broken_auth_setup(spawn, tmp_path, auth, env, said):
    """The conf's start-up hook is not the only guard: wsgi.py itself refuses to build the app,
    so the worker never boots whatever launched it (here another -c, without the hook)."""
    port = free_port()
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    other = tmp_path / "other.conf.py"
    other.write_text('worker_class = "gevent"\n')
    proc, log = spawn(auth, False, "-c", str(other), "-w", "1", "-b", f"127.0.0.1:{port}", "--no-control-socket",
                      "wsgi:app", command=(gunicorn,), env=env)  # fmt: skip
    assert proc.wait(timeout=DEADLINE) != 0
    text = log.read_text()
    assert said in text and "Booting worker" in text, text
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def _listening(path: Path) -> bool:
    """Whether the server listens on the Unix socket ``path`` (the master binds it; a request
    then waits for a worker to accept it, however long that worker takes to boot)."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:  # no socket file yet, or bound and not listening yet
            return False
    return True


def test_a_unix_socket_bind_without_auth_is_local_and_served(spawn, tmp_path):
    """Only this machine reaches a Unix socket: the listen rules let it be bound without auth,
    and its callers, who have no peer address, are local to the loopback-peer rule."""
    import httpx2 as httpx

    path = tmp_path / "bread.sock"
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    proc, log = spawn(False, False, "-c", "gunicorn.conf.py", "-w", "1", "-b", f"unix:{path}", "wsgi:app",
                      command=(gunicorn,))  # fmt: skip
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), timeout=DEADLINE) as client:
        deadline = time.monotonic() + DEADLINE
        while not _listening(path):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert client.get("http://localhost/health").status_code == 200
        assert client.get("http://localhost/agents").status_code == 200
        assert client.get("http://localhost/agents", headers={"Host": "evil.example"}).status_code == 403

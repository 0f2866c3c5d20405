"""The conformance plugin as a third party runs it (``pytest -p bread_sync.client.conformance``
beside a conftest.py that defines ``agent_client_transport``): a sound transport passes, one
that drops a single event fails."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CONFTEST = '''
import pytest

from bread_sync import create_bread
from bread_sync.client import local
from bread_sync.demo import config


class DropsOne:
    """The in-process transport, but each run stream a send opens loses its second frame."""

    def __init__(self, transport):
        self._transport = transport

    def __getattr__(self, name):
        return getattr(self._transport, name)

    def send(self, *args, **kwargs):
        stream = self._transport.send(*args, **kwargs)
        return Dropping(stream)


class Dropping:
    def __init__(self, stream):
        self._stream, self.run_id = stream, stream.run_id

    def __iter__(self):
        for n, item in enumerate(self._stream):
            if n != 1:
                yield item

    def close(self):
        self._stream.close()


@pytest.fixture
def agent_client_transport():
    bread = create_bread(config().model_copy(update={"store": "memory", "blob_store": "memory"})).start()
    yield WRAP(local.transport(bread))
    bread.close()
'''


def run_suite(tmp_path, wrap: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST.replace("WRAP", wrap))
    env = {**os.environ, "BREAD_INSTANCE": str(tmp_path / "instance")}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "bread_sync.client.conformance", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("wrap", ["", "DropsOne"])
def test_the_suite_passes_a_sound_transport_and_fails_one_that_drops_an_event(tmp_path, wrap):
    done = run_suite(tmp_path, wrap)
    summary = done.stdout.strip().splitlines()[-1]
    if not wrap:
        assert done.returncode == 0 and "16 passed" in summary, done.stdout[-3000:]
        return
    assert done.returncode == 1, done.stdout[-3000:]
    failed = sorted(
        line.split("::")[-1].split(" ")[0] for line in done.stdout.splitlines() if line.startswith("FAILED")
    )
    # Each test that reads a sent run's frames catches the loss; the rest still pass.
    assert "test_send_streams_a_run_to_its_end_as_its_log_has_it" in failed, done.stdout[-3000:]
    assert "test_a_pause_is_answered_and_the_run_goes_on" in failed or len(failed) >= 1
    assert "test_what_bread_cannot_do_is_refused_by_name[upload_file]" not in failed


def test_importing_the_plugin_without_pytest_says_what_to_install(tmp_path):
    script = textwrap.dedent("""
        import builtins, sys
        real = builtins.__import__
        def no_pytest(name, *args, **kwargs):
            if name == "pytest":
                raise ImportError("No module named 'pytest'")
            return real(name, *args, **kwargs)
        builtins.__import__ = no_pytest
        try:
            import bread_sync.client.conformance
        except ImportError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert 'pip install "bread-sync[test]"' in done.stdout, done.stdout + done.stderr

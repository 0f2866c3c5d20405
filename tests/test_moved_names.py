"""Public names that moved or were renamed (issue 25) are still found at their old paths, for one
release: a program written against the old names keeps running."""

from bread_sync import Run, RunResult
from bread_sync.client import Run as ClientRun
from bread_sync.client import ThreadRun
from bread_sync.client.http import HTTPClientTransport, HTTPTransport
from bread_sync.client.local import LocalClientTransport, LocalTransport
from bread_sync.engine import recovery
from bread_sync.runtime import Bread
from bread_sync.runtime import Run as RuntimeRun
from bread_sync.runtime import RunResult as RuntimeRunResult


def test_the_runtime_still_exports_what_a_run_call_hands_out():
    assert (RuntimeRun, RuntimeRunResult) == (Run, RunResult)


def test_the_client_s_renamed_classes_keep_their_old_names():
    assert ClientRun is ThreadRun
    assert HTTPTransport is HTTPClientTransport
    assert LocalTransport is LocalClientTransport


def test_bread_still_tells_whether_a_run_s_owner_is_gone():
    lapsed = {"leaseUntil": 0.0, "owner": "elsewhere:1:x"}
    assert Bread.owner_gone(lapsed) is recovery.owner_gone(lapsed) is True

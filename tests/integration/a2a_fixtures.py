"""The A2A tests' server (the demo, gunicorn with gevent and two workers on one SQLite file)
and what their raw passes read with."""

from __future__ import annotations

import json
import time

import pytest
from a2a import types as t1
from a2a.compat.v0_3 import types as t3
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf import json_format

from ..webhook_receiver import Receiver
from . import servers


@pytest.fixture(scope="module")
def a2a(tmp_path_factory):
    """The demo on gunicorn + gevent with two workers, so requests of one task land on both."""
    home = tmp_path_factory.mktemp("a2a")
    env = {"BREAD_CONFIG": "tests.integration.a2a_config:config"}
    server = servers.Server("a2a", home, home / "bread.db", "http-sse", workers=2, env=env)
    server.start()
    yield server
    server.stop()


def rpc_body(method, params, request_id=1):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def sse_frames(text):
    """An SSE body as ``[(id, data, comments)]`` per frame (the id as sent: ``<seq>``, or
    ``<seq>:<characters>:<crc32>`` after a text chunk); ``\\n`` line ends only."""
    frames = []
    for block in text.split("\n\n"):
        if not block:
            continue
        seq, data, comments = None, [], []
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line[1:].strip())
            elif line.startswith("id: "):
                seq = line[4:]
            elif line.startswith("data: "):
                data.append(line[6:])
        frames.append((seq, json.loads("\n".join(data)) if data else None, comments))
    return frames


def position(event_id):
    """An event id as a position that sorts: (seq, characters held past it), its checksum left out."""
    seq, _, held = event_id.partition(":")
    return int(seq), int(held.partition(":")[0] or 0)


V03_KINDS = {"task": t3.Task, "message": t3.Message, "status-update": t3.TaskStatusUpdateEvent,
             "artifact-update": t3.TaskArtifactUpdateEvent}  # fmt: skip


def strict_v03(item):
    """A v0.3 result, checked as the SDK's pydantic models would not: its ``kind`` present, and
    nothing in it the model does not write back (no unknown key, no wrong spelling)."""
    model = V03_KINDS[item["kind"]].model_validate(item)
    assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == item
    return model


def strict_v10(item, message=t1.StreamResponse, required=True, **written):
    """A v1.0 result parsed as ProtoJSON, strictly (an unknown field or enum value raises), its
    REQUIRED fields present, and written back the same (no ``kind``, no ``final``); ``written``:
    MessageToDict's options the server writes it with. ``required=False`` for ListTasks: its last
    page's ``nextPageToken`` is REQUIRED and empty, which the SDK's check counts as missing."""
    parsed = json_format.ParseDict(item, message())
    if required:
        validate_proto_required_fields(parsed)
    assert json_format.MessageToDict(parsed, **written) == item
    return parsed


#: How long all of a task's deliveries may take to arrive.
DELIVERY_SECONDS = 20.0


class Webhook(Receiver):
    """The test's webhook, reading A2A's push bodies by task."""

    def bodies_for(self, task_id):
        with self.lock:
            return [body for body, _ in self.received if _task_of(body) == task_id]

    def wait_for_end(self, task_id, ended, seconds=DELIVERY_SECONDS):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            bodies = self.bodies_for(task_id)
            if bodies and ended(bodies[-1]):
                return bodies
            time.sleep(0.05)
        raise AssertionError(f"the deliveries of {task_id} did not end within {seconds} s: {self.bodies_for(task_id)}")


def _task_of(body):
    inner = body.get("statusUpdate") or body.get("artifactUpdate") or body
    return inner.get("taskId")


def v03_ended(body):
    return body.get("kind") == "status-update" and body["status"]["state"] in ("completed", "failed", "canceled")


def v10_ended(body):
    return "statusUpdate" in body and body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

"""Traces exported over OTLP/HTTP by real gunicorn + gevent servers, received by a test server
and decoded with the OpenTelemetry protobuf package: one trace across a caller and the remote
agent it relays, under the traceparent the client sent."""

from __future__ import annotations

import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from . import servers
from .client import RUN_END, new_client, run

trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

#: Generous for a busy machine: a bound on the wait for the exporters' batches, not a pace.
EXPORTED_SECONDS = 30
TRACE_ID = uuid.uuid4().hex
PARENT_SPAN_ID = uuid.uuid4().hex[:16]


class Receiver:
    """An OTLP/HTTP traces endpoint on 127.0.0.1: each span received, with its service's name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Any]] = []
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def received(self, path: str, body: bytes) -> None:
        assert path == "/v1/traces", path
        request = trace_service.ExportTraceServiceRequest.FromString(body)
        with self.changed:
            for resource_spans in request.resource_spans:
                attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend((attributes.get("service.name"), span) for span in scope_spans.spans)
            self.changed.notify_all()

    def span(self, service: str, name: str) -> Any:
        """The span ``name`` of ``service``, once it arrived."""
        deadline = time.monotonic() + EXPORTED_SECONDS
        with self.changed:
            while not (found := [s for where, s in self.spans if where == service and s.name == name]):
                left = deadline - time.monotonic()
                assert left > 0, f"no span {name!r} of {service}: {[(w, s.name) for w, s in self.spans]}"
                self.changed.wait(left)
        (span,) = found
        return span

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def traced_pair(tmp_path, receiver):
    """(remote, caller): each exports its traces to ``receiver`` every 50 ms."""

    def env(service: str) -> dict[str, str]:
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_SERVICE_NAME": service,
        }

    remote = servers.Server(
        "remote", tmp_path, tmp_path / "remote.db", "http-chunked",
        env={"BREAD_CONFIG": "tests.replica_config:config", **env("remote")},
    )  # fmt: skip
    caller_env = {"BREAD_CONFIG": "tests.remote_config:config", **env("caller")}
    caller = servers.Server("caller", tmp_path, tmp_path / "caller.db", "http-chunked", env=caller_env)
    try:
        remote.start()
        caller.env["BREAD_REMOTE_URL"] = remote.url  # its port is known once it serves
        caller.start()
        yield remote, caller
    finally:
        caller.stop()
        remote.stop()


def test_one_trace_across_a_caller_and_its_remote_agent_under_the_clients_traceparent(traced_pair, receiver):
    remote, caller = traced_pair
    traceparent = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
    body = {"input": {"count": 2, "delayMs": 10}}
    with new_client() as http:
        stream = run(http, caller.url, "far-stepper", body, "ndjson", headers={"traceparent": traceparent})
    assert stream.status == 200 and stream.types[-1] == RUN_END, stream.types

    here = receiver.span("caller", "invoke_agent far-stepper")
    there = receiver.span("remote", "invoke_agent stepper")
    assert here.trace_id.hex() == there.trace_id.hex() == TRACE_ID
    assert here.parent_span_id.hex() == PARENT_SPAN_ID  # the client's span is the run's parent
    assert there.parent_span_id == here.span_id  # the relay carried the run's context out
    attributes = {a.key: a.value for a in here.attributes}
    assert attributes["bread.run.id"].string_value == stream.run_id
    assert attributes["bread.run.status"].string_value == "completed"
    # the remote's run span ends after its children: they were exported with it or before
    tools = [s for where, s in receiver.spans if where == "remote" and s.name == "execute_tool note"]
    chats = [s for where, s in receiver.spans if where == "remote" and s.name.startswith("chat ")]
    assert len(tools) == 2 and len(chats) == 3
    assert all(s.parent_span_id == there.span_id and s.trace_id.hex() == TRACE_ID for s in tools + chats)

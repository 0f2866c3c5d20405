"""Log records carry the run being driven (its id; in JSON also its session and agent), as text
or as JSON lines."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import textwrap
import threading

import pytest
from pydantic import BaseModel

from bread_sync import Agent, Config, ToolContext, tool
from bread_sync.logs import JsonFormatter, RunIdFilter, RunLabels, configure, log_format, run_context
from bread_sync.models import script
from bread_sync.models.script import call, say


class Nothing(BaseModel):
    pass


@tool
def explode(args: Nothing, ctx: ToolContext) -> dict:
    """Always fails."""
    raise RuntimeError("the tool broke")


BROKEN = Agent(
    id="broken",
    model=script.provider([call("explode", {}), lambda convo: say("after the failure")]),
    tools=[explode],
)


@pytest.fixture
def captured():
    """The bread_sync loggers configured as a server does, into a buffer; restored after."""
    logger = logging.getLogger("bread_sync")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    buffer = io.StringIO()

    def install(fmt: str) -> io.StringIO:
        configure(fmt, stream=buffer)
        return buffer

    yield install
    logger.handlers[:], logger.level, logger.propagate = saved


def lines(buffer: io.StringIO) -> list[str]:
    return buffer.getvalue().splitlines()


def test_a_failing_tools_log_record_carries_the_run_its_session_and_agent_as_json(make_bread, captured):
    buffer = captured("json")
    bread = make_bread(Config(agents=[BROKEN]))

    result = bread.run("broken", "go", session="ses_logged", mode="sync")

    assert result.status == "completed"
    entries = [json.loads(line) for line in lines(buffer) if line.startswith("{")]
    (failure,) = [e for e in entries if "tool explode failed" in e["message"]]
    assert (failure["run_id"], failure["session_id"], failure["agent_id"]) == (result.run_id, "ses_logged", "broken")
    assert (failure["level"], failure["logger"]) == ("ERROR", "bread_sync")
    assert "RuntimeError: the tool broke" in failure["exception"]
    assert set(failure) == {
        "time",
        "level",
        "logger",
        "message",
        "process",
        "run_id",
        "session_id",
        "agent_id",
        "exception",
    }


def test_text_lines_name_the_run_too(make_bread, captured):
    buffer = captured("text")
    bread = make_bread(Config(agents=[BROKEN]))

    result = bread.run("broken", "go", mode="sync")

    (failure,) = [line for line in lines(buffer) if "tool explode failed" in line]
    assert f"[run {result.run_id}]" in failure
    logging.getLogger("bread_sync").warning("outside any run")
    assert "[run -]: outside any run" in lines(buffer)[-1]


def test_runs_driven_side_by_side_keep_their_own_ids(make_bread, captured):
    buffer = captured("json")
    bread = make_bread(Config(agents=[BROKEN]))
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(bread.run("broken", "go", mode="sync"))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    failures = [json.loads(line) for line in lines(buffer) if "tool explode failed" in line]
    assert sorted(f["run_id"] for f in failures) == sorted(r.run_id for r in results)
    assert all(f["message"].endswith(f["run_id"]) for f in failures)  # "... failed in run <id>"


def test_a_record_outside_a_run_has_no_run_id():
    record = logging.LogRecord("bread_sync", logging.INFO, __file__, 1, "hello", None, None)
    RunIdFilter().filter(record)
    assert record.run_id is None
    assert "run_id" not in json.loads(JsonFormatter().format(record))
    with run_context(RunLabels("run_x", "ses_x", "echo")):
        inside = logging.LogRecord("bread_sync", logging.INFO, __file__, 1, "hi", None, None)
        RunIdFilter().filter(inside)
    assert (inside.run_id, inside.session_id, inside.agent_id) == ("run_x", "ses_x", "echo")


def test_the_format_comes_from_bread_log_format(monkeypatch):
    assert log_format() == "text"
    monkeypatch.setenv("BREAD_LOG_FORMAT", "JSON")
    assert log_format() == "json"
    monkeypatch.setenv("BREAD_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="BREAD_LOG_FORMAT"):
        log_format()


GEVENT_SCRIPT = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import io, json, threading, time
    from pydantic import BaseModel
    from bread_sync import Agent, Config, ToolContext, create_bread, tool
    from bread_sync.logs import configure
    from bread_sync.models import script
    from bread_sync.models.script import call, say

    class Nothing(BaseModel):
        pass

    @tool
    def nap_then_fail(args: Nothing, ctx: ToolContext) -> dict:
        time.sleep(0.05)  # a greenlet switch: the other runs go on meanwhile
        raise RuntimeError("late failure")

    agent = Agent(id="napper", model=script.provider([call("nap_then_fail", {}), say("done")]),
                  tools=[nap_then_fail])
    buffer = io.StringIO()
    configure("json", stream=buffer)
    bread = create_bread(Config(agents=[agent], store="memory", transport="stream", blob_store=None))
    results = []
    threads = [threading.Thread(target=lambda: results.append(bread.run("napper", "x", mode="sync")))
               for _ in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    failures = [json.loads(l) for l in buffer.getvalue().splitlines() if "failed in run" in l]
    print(json.dumps({"runs": sorted(r.run_id for r in results),
                      "logged": sorted(f["run_id"] for f in failures),
                      "match": all(f["message"].endswith(f["run_id"]) for f in failures)}))
    """
)


def test_under_gevent_each_greenlet_keeps_its_runs_id(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", GEVENT_SCRIPT], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["logged"] == report["runs"] and len(report["runs"]) == 6
    assert report["match"]


def test_a_traced_runs_json_lines_name_the_trace_and_the_span_they_were_made_in(make_bread, captured):
    otel = pytest.importorskip("bread_sync.tracing.otel")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    buffer = captured("json")
    exporter, spans = InMemorySpanExporter(), TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    bread = make_bread(Config(agents=[BROKEN]))
    bread.tracer = otel.tracer(spans)

    result = bread.run("broken", "go", mode="sync")

    (failure,) = [json.loads(line) for line in lines(buffer) if "tool explode failed" in line]
    (tool,) = [span for span in exporter.get_finished_spans() if span.name == "execute_tool explode"]
    assert failure["run_id"] == result.run_id
    assert failure["trace_id"] == f"{tool.context.trace_id:032x}"
    assert failure["span_id"] == f"{tool.context.span_id:016x}"  # made inside the tool's call


def test_an_untraced_runs_json_lines_have_no_trace_ids(make_bread, captured):
    buffer = captured("json")
    make_bread(Config(agents=[BROKEN])).run("broken", "go", mode="sync")
    (failure,) = [json.loads(line) for line in lines(buffer) if "tool explode failed" in line]
    assert "trace_id" not in failure and "span_id" not in failure

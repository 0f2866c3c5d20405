"""Prometheus metrics in one process: what a run, a pause and its resume, their tools and their
tokens add; the scrape's text; and nothing of it while metrics are off. (Across gunicorn workers:
tests/integration/test_metrics_http.py.)"""

from __future__ import annotations

import os
import re

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bread_sync import Agent, Config, create_bread
from bread_sync.config import ServerSettings
from bread_sync.engine.emitter import Emitter
from bread_sync.errors import install_hint
from bread_sync.metrics import prometheus
from bread_sync.server import create_server

from .test_usage import COUNTER, HELPER, LEAD

ON = ServerSettings(metrics=True)


def sample(name: str, **labels: str) -> float:
    """A sample's value in the process's metrics (0 when it was never set)."""
    return prometheus.metrics().registry.get_sample_value(name, labels) or 0.0


def counts(*samples: tuple[str, dict[str, str]]) -> list[float]:
    return [sample(name, **labels) for name, labels in samples]


def test_a_run_paused_and_resumed_is_counted_once_with_its_tools_and_tokens():
    bread = create_bread(Config(agents=[LEAD, HELPER], tasks=[COUNTER], store="memory", server=ON))
    watched = [
        ("bread_runs_started_total", {"agent": "lead"}),
        ("bread_runs_finished_total", {"agent": "lead", "status": "paused"}),
        ("bread_runs_finished_total", {"agent": "lead", "status": "completed"}),
        ("bread_run_duration_seconds_count", {"agent": "lead"}),
        ("bread_run_first_crumb_seconds_count", {"agent": "lead"}),
        ("bread_model_tokens_total", {"agent": "lead", "model": "script:lead", "direction": "input"}),
        ("bread_model_tokens_total", {"agent": "lead", "model": "script:lead", "direction": "output"}),
        ("bread_model_tokens_total", {"agent": "lead", "model": "script:helper", "direction": "input"}),
        ("bread_model_tokens_total", {"agent": "lead", "model": "script:script", "direction": "output"}),
        ("bread_tool_calls_total", {"tool": "helper", "outcome": "ok"}),
        ("bread_tool_calls_total", {"tool": "count", "outcome": "ok"}),
        ("bread_tool_calls_total", {"tool": "publish", "outcome": "ok"}),
        ("bread_crumbs_total", {"type": "human:required"}),
        ("bread_runs_active", {"agent": "lead"}),
    ]
    before = counts(*watched)
    try:
        paused = bread.run("lead", "go", mode="sync")
        bread.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    finally:
        bread.close()
    added = [after - was for after, was in zip(counts(*watched), before, strict=True)]
    # two drivings (the run, its resume), one run started; tokens the sum over both, not twice
    assert added == [1, 1, 1, 2, 2, 100, 20, 7, 1, 1, 1, 1, 1, 0]


def test_each_durable_crumb_is_counted_and_each_commit_timed():
    bread = create_bread(Config(agents=[Agent(id="echo", model="echo")], store="memory", server=ON))
    commits = ("bread_store_commit_seconds_count", {})
    kinds = [("bread_crumbs_total", {"type": kind}) for kind in ("agent:run:start", "text:delta", "agent:run:end")]
    before = counts(commits, *kinds)
    try:
        result = bread.run("echo", "one two three", mode="sync")
    finally:
        bread.close()
    logged = [frame.crumb["type"] for frame in bread.store.get_crumbs(result.run_id, after=0)]
    assert logged == ["agent:run:start", "text:delta", "agent:run:end"]  # the deltas aggregated: one row
    assert [after - was for after, was in zip(counts(commits, *kinds), before, strict=True)] == [2, 1, 1, 1]


def test_the_scrape_names_routes_by_rule_and_counts_paused_runs_in_the_store():
    bread = create_bread(Config(agents=[LEAD, HELPER], tasks=[COUNTER], store="memory", server=ON))
    client = create_server(bread).test_client()
    try:
        paused = bread.run("lead", "go", mode="sync")
        assert client.get(f"/runs/{paused.run_id}").status_code == 200
        response = client.get("/metrics")
    finally:
        bread.close()
    assert response.status_code == 200 and response.content_type.startswith("text/plain; version=")
    families = {family.name: family for family in text_string_to_metric_families(response.get_data(as_text=True))}
    (paused_runs,) = families["bread_runs_paused"].samples
    assert paused_runs.labels == {"agent": "lead"} and paused_runs.value == 1
    routes = {sample.labels["route"] for sample in families["bread_http_requests"].samples}
    assert "/runs/<runId>" in routes and not any(paused.run_id in route for route in routes)


def test_off_there_is_no_route_and_no_timer_on_commits(monkeypatch):
    bread = create_bread(Config(agents=[Agent(id="echo", model="echo")], store="memory"))
    try:
        assert bread.metrics is None
        assert create_server(bread).test_client().get("/metrics").status_code == 404
        emitter = Emitter("run_x", bread.store, bread.publish)
        assert emitter.tally is None

        def no_clock() -> float:
            raise AssertionError("a commit read the clock with metrics off")

        monkeypatch.setattr("bread_sync.engine.emitter.perf_counter", no_clock)
        emitter.emit({"type": "agent:run:start", "runId": "run_x"})
        assert bread.store.last_seq("run_x") == 1
    finally:
        bread.close()


def test_metrics_on_without_the_extra_names_the_pip_install(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    monkeypatch.setitem(__import__("sys").modules, "prometheus_client", None)
    said = f"Config.server.metrics (BREAD_METRICS) needs the 'metrics' extra: {install_hint('metrics')}"
    with pytest.raises(ImportError, match=f"^{re.escape(said)}$"):  # as the CLI's loading says it
        create_bread(Config(agents=[Agent(id="echo", model="echo")], store="memory", server=ON))


def test_the_gunicorn_master_makes_the_multiprocess_folder_and_removes_it(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from bread_sync.server import gunicorn_conf

    # set first, so that the test's end restores the variable as it was (unset), whatever the hook set
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    master = SimpleNamespace()
    gunicorn_conf.metrics_folder(master, Config(server=ON))
    folder = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    assert os.path.isdir(folder) and master.bread_metrics_folder == folder
    gunicorn_conf.child_exit(master, SimpleNamespace(pid=os.getpid() + 1))  # a dead worker: nothing to drop yet
    gunicorn_conf.on_exit(master)
    assert not os.path.exists(folder)

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # the operator's own: used, kept
    theirs = SimpleNamespace()
    gunicorn_conf.metrics_folder(theirs, Config(server=ON))
    gunicorn_conf.on_exit(theirs)
    assert tmp_path.is_dir() and not hasattr(theirs, "bread_metrics_folder")

    off = SimpleNamespace()
    gunicorn_conf.metrics_folder(off, Config())
    assert not hasattr(off, "bread_metrics")


def test_tool_names_no_config_declares_are_labelled_up_to_a_bound(monkeypatch):
    """A model may call any tool name: past MAX_UNDECLARED_TOOLS such names, a call is ``other``;
    a tool a config declares keeps its name however many came first."""
    monkeypatch.setattr(prometheus, "MAX_UNDECLARED_TOOLS", 2)
    metrics = prometheus.PrometheusMetrics()
    metrics.declared_tools.add("count")
    made_up = {(f"made_up_{n}", "error"): 1 for n in range(5)}
    metrics.add_commits({}, {**made_up, ("count", "ok"): 1}, [0] * len(prometheus.BUCKET_BOUNDS), 0.0)
    (family,) = [
        f
        for f in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        if f.name == "bread_tool_calls"
    ]
    labelled = {s.labels["tool"]: s.value for s in family.samples if s.name == "bread_tool_calls_total"}
    assert labelled == {"made_up_0": 1, "made_up_1": 1, "other": 3, "count": 1}


def test_a_configs_tools_are_declared_to_the_metrics():
    bread = create_bread(Config(agents=[LEAD, HELPER], tasks=[COUNTER], store="memory", server=ON))
    bread.close()
    assert {"helper", "count"} <= bread.metrics.declared_tools

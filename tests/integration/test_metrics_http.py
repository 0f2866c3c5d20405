"""``GET /metrics`` from gunicorn with two gevent workers (prometheus_client's multiprocess mode,
the folder made by the server): after known runs each counter is exactly what was done, whichever
worker ran them and whichever answers the scrape, and the histograms are consistent;
``promtool check metrics`` passes on it where Debian's ``prometheus`` is installed.
(In one process, every metric's meaning: tests/test_metrics.py.)"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ..waiting import wait_for
from .client import log_of, new_client, pause_writer, resume, run
from .servers import Worker

ECHOES = 6
MANAGERS = 2
SCRAPES = 8
#: Runs end in their worker's greenlet just after their last crumb is sent: the scrape waits for them.
SETTLED_SECONDS = 10.0


def scrape(client, base: str) -> dict[tuple[str, tuple], float]:
    """Every sample of one scrape, by name and labels (a fresh connection: either worker answers)."""
    response = client.get(f"{base}/metrics", headers={"Connection": "close"})
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: dict, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


@pytest.fixture
def metered(start_server):
    return start_server("metered", workers=2, env={"BREAD_METRICS": "1"})


def test_counters_are_exactly_the_runs_done_across_two_workers(metered):
    base, wire = metered.url, "sse"
    with new_client() as client:
        run_ids = [run(client, base, "echo", {"input": f"one two {n}"}, wire).run_id for n in range(ECHOES)]
        run_ids += [run(client, base, "manager", {"input": "go"}, wire).run_id for _ in range(MANAGERS)]
        writer_id, checkpoint_id, _ = pause_writer(client, base, wire)
        run_ids.append(writer_id)
        paused = wait_for(lambda: settled(scrape(client, base), 1 + ECHOES + MANAGERS), SETTLED_SECONDS, "runs ended")
        assert value(paused, "bread_runs_paused", agent="writer") == 1
        resume(client, base, checkpoint_id, {"approved": True}, wire)
        logged = Counter(e.type for run_id in run_ids for e in log_of(client, base, run_id, wire))
        samples = wait_for(lambda: settled(scrape(client, base), 2 + ECHOES + MANAGERS), SETTLED_SECONDS, "the resume")
        scrapes = [scrape(client, base) for _ in range(SCRAPES)]

    def runs(name: str, agent: str, **labels: str) -> float:
        return value(samples, name, agent=agent, **labels)

    assert [runs("bread_runs_started_total", a) for a in ("echo", "manager", "writer")] == [ECHOES, MANAGERS, 1]
    assert runs("bread_runs_finished_total", "echo", status="completed") == ECHOES
    assert runs("bread_runs_finished_total", "manager", status="completed") == MANAGERS
    assert [runs("bread_runs_finished_total", "writer", status=s) for s in ("paused", "completed")] == [1, 1]
    assert value(samples, "bread_runs_paused", agent="writer") == 0
    assert total(samples, "bread_runs_active") == 0 and value(samples, "bread_streams_open") == 0
    for tool in ("echo", "word-count"):  # the manager's subagent and task, each once per run
        assert value(samples, "bread_tool_calls_total", tool=tool, outcome="ok") == MANAGERS
    assert value(samples, "bread_tool_calls_total", tool="publish", outcome="ok") == 1
    assert {labels[0][1]: v for (n, labels), v in samples.items() if n == "bread_crumbs_total"} == logged
    route = dict(method="POST", route="/agents/<id>/run", status="200")
    assert value(samples, "bread_http_requests_total", **route) == ECHOES + MANAGERS + 1
    assert_histograms_consistent(samples, drivings={"echo": ECHOES, "manager": MANAGERS, "writer": 2})
    assert value(samples, "bread_store_commit_seconds_count") == sum(logged.values()) - logged["text:delta"]
    # whichever worker answers, the same sums (only the scrapes' own count grows)
    stable = {key: v for key, v in samples.items() if key[0] != "bread_http_requests_total"}
    for later in scrapes:
        assert {key: v for key, v in later.items() if key[0] != "bread_http_requests_total"} == stable


def settled(samples: dict, drivings: int) -> dict | None:
    """The scrape once ``drivings`` drivings of runs have ended and none is under way."""
    done = total(samples, "bread_runs_finished_total") == drivings and total(samples, "bread_runs_active") == 0
    return samples if done else None


def assert_histograms_consistent(samples: dict, drivings: dict[str, int]) -> None:
    """Each histogram's buckets rise to its +Inf bucket, which is its count: one per driving."""
    for name in ("bread_run_duration_seconds", "bread_run_first_crumb_seconds"):
        for agent, count in drivings.items():
            buckets = sorted(
                (float(dict(labels)["le"]), v)
                for (n, labels), v in samples.items()
                if n == f"{name}_bucket" and dict(labels)["agent"] == agent
            )
            counts = [v for _, v in buckets]
            assert counts == sorted(counts) and buckets[-1] == (float("inf"), count), (name, agent, buckets)
            assert value(samples, f"{name}_count", agent=agent) == count
            assert value(samples, f"{name}_sum", agent=agent) > 0


def test_promtool_passes_the_scrape(metered):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH: Debian's prometheus package provides it (.ci/run installs it)")
    with new_client() as client:
        run(client, metered.url, "manager", {"input": "go"}, "sse")
        text = client.get(f"{metered.url}/metrics").text
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_workers_runs_are_in_the_web_tiers_scrape_and_its_live_gauges_leave_with_it(start_server, tmp_path):
    """``bread-sync worker`` serves no /metrics: with the web tier's PROMETHEUS_MULTIPROC_DIR it
    counts into the same folder, which the web tier's scrape sums; stopped, its live gauges go."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = {"BREAD_METRICS": "1", "BREAD_EXECUTOR": "huey", "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    web = start_server("queued-metered", db=tmp_path / "bread.db", env=env)
    worker = Worker("metered-worker", tmp_path, tmp_path / "bread.db", env=env).start()
    try:
        with new_client() as client:
            for n in range(ECHOES):
                assert run(client, web.url, "echo", {"input": f"queued {n}"}, "sse").types[-1] == "agent:run:end"
            # each run driven twice: queued by the web tier, then run to its end by the worker
            samples = wait_for(lambda: settled(scrape(client, web.url), 2 * ECHOES), SETTLED_SECONDS, "runs ended")
        live = folder / f"gauge_livesum_{worker.pid}.db"
        assert live.exists(), sorted(p.name for p in folder.iterdir())
    finally:
        assert worker.stop() == 0, worker.log()
    assert value(samples, "bread_runs_started_total", agent="echo") == ECHOES
    for status in ("queued", "completed"):
        assert value(samples, "bread_runs_finished_total", agent="echo", status=status) == ECHOES
    assert_histograms_consistent(samples, drivings={"echo": 2 * ECHOES})
    assert not live.exists()

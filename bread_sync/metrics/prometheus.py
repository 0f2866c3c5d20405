"""Prometheus metrics (the ``metrics`` extra): one set per process, in multiprocess mode under
gunicorn (``PROMETHEUS_MULTIPROC_DIR``, made and cleaned by the server: gunicorn_conf.py; or
named by the operator for the server and its ``bread-sync worker`` processes, whose runs the
server's scrape then sums).

Labels are bounded: agent, model, tool, crumb type, route, status; never a run or session id.
The runs paused and queued are counted in the store at each scrape: they outlive the process
that paused or queued them, and every worker shares the store.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Callable, Generator, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from ..crumbs import CALL_SETTLED, STREAM_END, TEXT_DELTA, TOOL_ERROR

#: Seconds a run is driven: a quick echo to an agent that works for minutes.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
#: Seconds from a run's opening to its first crumb (a session wait, a queue, a slow store).
FIRST_CRUMB_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: Seconds a commit of a run's log takes (SQLite on a local disk: about a millisecond).
COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
#: The upper bounds of the commit histogram's buckets, +Inf last (a commit's bucket: the first
#: bound at or above its time, as prometheus_client's observe() picks it).
BUCKET_BOUNDS = (*COMMIT_BUCKETS, float("inf"))
#: Commits a run's tally holds before it adds them to the metrics (its end or pause adds them too).
FLUSH_COMMITS = 128
#: Tool names a process labels that no agent of its config declares (a toolset's, found when a
#: run lists it, or a name a model made up, answered "there is no tool"): past these, ``other``.
MAX_UNDECLARED_TOOLS = 100
OTHER_TOOL = "other"
#: The store statuses counted at each scrape, as ``bread_runs_<status>``.
STORED_STATUSES = ("paused", "queued")

_process_metrics: PrometheusMetrics | None = None


def metrics() -> PrometheusMetrics:
    """The process's metrics, made once (a metric is one per name and process)."""
    global _process_metrics
    if _process_metrics is None:
        _process_metrics = PrometheusMetrics()
    return _process_metrics


class PrometheusMetrics:
    """bread's metrics in a registry of their own (the scrape's, when not multiprocess)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.runs_started = Counter(
            "bread_runs_started", "Runs opened (not resumes or runs carried on).", ["agent"], registry=registry
        )
        self.runs_finished = Counter(
            "bread_runs_finished",
            "Drivings of a run that ended, by how: completed, failed, cancelled, paused, interrupted, handed_over, "
            "lost, queued.",
            ["agent", "status"],
            registry=registry,
        )
        self.run_duration = Histogram(
            "bread_run_duration_seconds", "Seconds from a run's (or continuation's) opening to its end or pause.",
            ["agent"], buckets=DURATION_BUCKETS, registry=registry,
        )  # fmt: skip
        self.first_crumb = Histogram(
            "bread_run_first_crumb_seconds", "Seconds from a run's (or continuation's) opening to its first crumb.",
            ["agent"], buckets=FIRST_CRUMB_BUCKETS, registry=registry,
        )  # fmt: skip
        # livesum: a worker's runs leave the sum with the worker (child_exit marks it dead).
        self.runs_active = Gauge(
            "bread_runs_active", "Runs being driven now.", ["agent"], multiprocess_mode="livesum", registry=registry
        )
        self.streams_open = Gauge(
            "bread_streams_open", "Stream responses being written now (runs tailed, every protocol).",
            multiprocess_mode="livesum", registry=registry,
        )  # fmt: skip
        self.crumbs = Counter(
            "bread_crumbs", "Crumbs logged, by type (text deltas as logged: one per aggregated segment).",
            ["type"], registry=registry,
        )  # fmt: skip
        self.commit_seconds = Histogram(
            "bread_store_commit_seconds", "Seconds a commit of a run's log takes.",
            buckets=COMMIT_BUCKETS, registry=registry,
        )  # fmt: skip
        self.tokens = Counter(
            "bread_model_tokens", "Tokens the models of runs used, as their providers reported.",
            ["agent", "model", "direction"], registry=registry,
        )  # fmt: skip
        self.tool_calls = Counter(
            "bread_tool_calls", "Tool calls settled, by tool and outcome (ok, error).", ["tool", "outcome"],
            registry=registry,
        )  # fmt: skip
        self.requests = Counter(
            "bread_http_requests", "HTTP requests answered by bread's routes, by route rule, method and status.",
            ["route", "method", "status"], registry=registry,
        )  # fmt: skip
        # labels() validates and locks each time: the children the commits, runs and requests use
        # are kept, by metric and label values (bounded: agents, statuses, models, tools, routes).
        self._children: dict[tuple[Any, ...], Any] = {}
        #: The tool names the configs of this process's runtimes declare, and the others labelled.
        self.declared_tools: set[str] = set()
        self._undeclared_tools: set[str] = set()

    # -- the engine's --------------------------------------------------------------------------

    def follow(
        self,
        agent_id: str,
        crumbs: Iterator[dict[str, Any]],
        status: Callable[[], str | None],
        usage: Any,
        new: bool,
        tally: Tally,
    ) -> Iterator[dict[str, Any]]:
        opened = time.perf_counter()
        if new:
            self._child(self.runs_started, agent_id).inc()
        before = {model: tuple(used) for model, used in usage.by_model.items()}
        return self._followed(agent_id, crumbs, status, usage, before, opened, tally)

    def _followed(
        self,
        agent_id: str,
        crumbs: Generator[dict[str, Any], None, None],
        status: Callable[[], str | None],
        usage: Any,
        before: dict[str, tuple[int, ...]],
        opened: float,
        tally: Tally,
    ) -> Iterator[dict[str, Any]]:
        active = self._child(self.runs_active, agent_id)
        active.inc()
        try:
            for crumb in crumbs:  # the first only: the rest pass through yield from
                self._child(self.first_crumb, agent_id).observe(time.perf_counter() - opened)
                yield crumb
                break
            yield from crumbs
        finally:
            crumbs.close()  # a caller that stopped at the first crumb: the driver settles its status now
            tally.flush()  # a driving that ended with no end or pause crumb (lost, handed over)
            active.dec()
            self._child(self.run_duration, agent_id).observe(time.perf_counter() - opened)
            self._child(self.runs_finished, agent_id, (status() or "interrupted").replace(" ", "_")).inc()
            self._count_tokens(agent_id, usage, before)

    def _count_tokens(self, agent_id: str, usage: Any, before: dict[str, tuple[int, ...]]) -> None:
        for model, (input_tokens, output_tokens) in usage.by_model.items():
            was_in, was_out = before.get(model, (0, 0))
            if input_tokens > was_in:
                self._child(self.tokens, agent_id, model, "input").inc(input_tokens - was_in)
            if output_tokens > was_out:
                self._child(self.tokens, agent_id, model, "output").inc(output_tokens - was_out)

    def tally(self) -> Tally:
        return Tally(self)

    def add_commits(
        self, kinds: dict[str, int], tools: dict[tuple[str, str], int], buckets: list[int], seconds: float
    ) -> None:
        """A tally's batch: crumbs by type, settled tool calls, and the commits' times as counts
        per bucket of ``bread_store_commit_seconds`` and their sum."""
        for kind, count in kinds.items():
            self._child(self.crumbs, kind).inc(count)
        for (tool, outcome), count in tools.items():
            self._child(self.tool_calls, self._tool_label(tool), outcome).inc(count)
        # A histogram has no batch observe: its per-bucket values (not cumulative; collect sums
        # them) are added to as observe() would, once per bucket rather than once per commit.
        for value, count in zip(self.commit_seconds._buckets, buckets, strict=True):
            if count:
                value.inc(count)
        self.commit_seconds._sum.inc(seconds)

    def _tool_label(self, name: str) -> str:
        """``name``, when a config declares it or fewer than MAX_UNDECLARED_TOOLS others are
        labelled: a model names any tool it likes, and each label value is a series kept forever."""
        if name in self.declared_tools or name in self._undeclared_tools:
            return name
        if len(self._undeclared_tools) < MAX_UNDECLARED_TOOLS:
            self._undeclared_tools.add(name)
            return name
        return OTHER_TOOL

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, labelled once per process."""
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    # -- the server's --------------------------------------------------------------------------

    def request(self, route: str, method: str, status: int) -> None:
        self._child(self.requests, route, method, str(status)).inc()

    def streaming(self, body: Iterator[bytes]) -> Iterator[bytes]:
        self.streams_open.inc()
        try:
            yield from body
        finally:
            self.streams_open.dec()

    def render(self, store: Any) -> tuple[bytes, str]:
        scrape = CollectorRegistry(auto_describe=False)
        if multiprocess():
            MultiProcessCollector(scrape)
        else:
            scrape.register(_Collected(self.registry))
        scrape.register(_StoredRuns(store))
        return generate_latest(scrape), CONTENT_TYPE_LATEST


class Tally:
    """One run's commits, added to its :class:`PrometheusMetrics` every FLUSH_COMMITS commits
    and at the run's end or pause (a crumb of ``STREAM_END``)."""

    __slots__ = ("_metrics", "_kinds", "_tools", "_buckets", "_seconds", "_commits")

    def __init__(self, metrics: PrometheusMetrics):
        self._metrics = metrics
        self._reset()

    def _reset(self) -> None:
        self._kinds: dict[str, int] = {}
        self._tools: dict[tuple[str, str], int] = {}
        self._buckets = [0] * len(BUCKET_BOUNDS)
        self._seconds = 0.0
        self._commits = 0

    def commit(self, crumb: dict[str, Any], rows: int, seconds: float) -> None:
        kinds, kind = self._kinds, crumb["type"]
        kinds[kind] = kinds.get(kind, 0) + 1
        if rows > 1:
            kinds[TEXT_DELTA] = kinds.get(TEXT_DELTA, 0) + 1
        if kind in CALL_SETTLED:
            tool = (crumb.get("toolName") or "", "error" if kind == TOOL_ERROR else "ok")
            self._tools[tool] = self._tools.get(tool, 0) + 1
        self._buckets[bisect_left(BUCKET_BOUNDS, seconds)] += 1
        self._seconds += seconds
        self._commits += 1
        if self._commits >= FLUSH_COMMITS or kind in STREAM_END:
            self.flush()

    def flush(self) -> None:
        if self._commits:
            self._metrics.add_commits(self._kinds, self._tools, self._buckets, self._seconds)
            self._reset()


def multiprocess() -> bool:
    """Whether metrics are shared by processes through files (prometheus_client's own test)."""
    return "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ


class _Collected:
    """A registry's metrics, collected into another (the scrape's)."""

    def __init__(self, registry: CollectorRegistry):
        self._registry = registry

    def collect(self) -> Iterator[Any]:
        return self._registry.collect()


class _StoredRuns:
    """``bread_runs_paused`` and ``bread_runs_queued`` by agent, counted in the store when scraped."""

    def __init__(self, store: Any):
        self._store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for status in STORED_STATUSES:
            family = GaugeMetricFamily(f"bread_runs_{status}", f"Runs {status} now (in the store).", labels=["agent"])
            counts: dict[str, int] = {}
            for record in self._store.list_runs(status=status):
                counts[record["agentId"]] = counts.get(record["agentId"], 0) + 1
            for agent, count in sorted(counts.items()):
                family.add_metric([agent], count)
            yield family

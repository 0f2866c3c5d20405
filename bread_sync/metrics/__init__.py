"""The metrics seam: what the engine and the server tell a metrics sink, at a run's boundaries,
at each commit of its log and at each request.

Metrics are Prometheus' (``metrics/prometheus.py``, the ``metrics`` extra), on by the server
setting ``metrics`` or ``BREAD_METRICS=1`` (:func:`metrics_from_config`). Off, a runtime's
``metrics`` is None and nothing is counted anywhere: no check per crumb, no timer per commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol


class CommitTally(Protocol):
    """The commits of one run's log, counted in plain integers and added to the process's
    metrics a batch at a time: a metric's update (a lock, a write to a shared file under
    gunicorn) costs more than a crumb's own work, the store's commit aside."""

    def commit(self, crumb: dict[str, Any], rows: int, seconds: float) -> None:
        """A commit of the run's log: ``rows`` crumbs (``crumb`` last, an aggregated text delta
        before it when 2), written in ``seconds``; the batch added at the run's end or pause, or
        once it is large."""

    def flush(self) -> None:
        """Add what is tallied and not added yet (the run's driving ended some other way)."""


class Metrics(Protocol):
    """The process's counters, gauges and histograms, and their text for a scrape."""

    def follow(
        self,
        agent_id: str,
        crumbs: Iterator[dict[str, Any]],
        status: Callable[[], str | None],
        usage: Any,
        new: bool,
        tally: CommitTally,
    ) -> Iterator[dict[str, Any]]:
        """The run's crumbs unchanged, counted as a run driven (``new``: a run opened, not a
        resume or a run carried on): active while pulled, its time to first crumb, duration,
        end ``status()`` and the tokens ``usage`` (the run's :class:`~bread_sync.usage.RunUsage`)
        gained meanwhile; its choke point's ``tally`` flushed at its end."""

    def tally(self) -> CommitTally:
        """A run's tally of its log's commits (one per run's choke point)."""

    def request(self, route: str, method: str, status: int) -> None:
        """An HTTP request answered: its route's rule (never its path), method and status."""

    def streaming(self, body: Iterator[bytes]) -> Iterator[bytes]:
        """A stream response's body unchanged, counted as an open stream while it is written."""

    def render(self, store: Any) -> tuple[bytes, str]:
        """The scrape's body and content type: this process's metrics (every worker's, in
        multiprocess mode) and the runs ``store`` holds paused or queued."""


def metrics_from_config(config: Any) -> Metrics | None:
    """The process's metrics when the config's server setting ``metrics`` is on (``BREAD_METRICS=1``
    sets it); None otherwise. On without the extra is an error that names the pip install."""
    if not config.server.metrics:
        return None
    check_installed(config)
    from ..agents import Tool
    from . import prometheus

    metrics = prometheus.metrics()
    metrics.declared_tools.update(t.name for agent in config.agents for t in agent.tools if isinstance(t, Tool))
    return metrics


def check_installed(config: Any) -> None:
    """Refuse metrics on (in code or by ``BREAD_METRICS``) without their extra: an ``ImportError``
    that names the pip install. Nothing is imported (see :func:`~bread_sync.loading.require`)."""
    if config.server.metrics:
        from ..loading import require

        require("prometheus_client", "Config.server.metrics (BREAD_METRICS)")

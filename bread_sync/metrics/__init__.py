"""The metrics seam: what the engine and the server tell a metrics sink, at a run's boundaries,
at each commit of its log and at each request.

Metrics are Prometheus' (``metrics/prometheus.py``, the ``metrics`` extra), on by the server
setting ``metrics`` or ``BREAD_METRICS=1`` (:func:`metrics_from_config`). Off, a runtime's
``metrics`` is None and nothing is counted anywhere: no check per crumb, no timer per commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol


class Metrics(Protocol):
    """The process's counters, gauges and histograms, and their text for a scrape."""

    def follow(
        self, agent_id: str, crumbs: Iterator[dict[str, Any]], status: Callable[[], str | None], usage: Any, new: bool
    ) -> Iterator[dict[str, Any]]:
        """The run's crumbs unchanged, counted as a run driven (``new``: a run opened, not a
        resume or a run carried on): active while pulled, its time to first crumb, duration,
        end ``status()`` and the tokens ``usage`` (the run's :class:`~bread_sync.usage.RunUsage`)
        gained meanwhile."""

    def committed(self, crumb: dict[str, Any], rows: int, seconds: float) -> None:
        """A commit of the run's log: ``rows`` crumbs (``crumb`` last, an aggregated text delta
        before it when 2), written in ``seconds``."""

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
    from ..loading import require

    require("prometheus_client")
    from . import prometheus

    return prometheus.metrics()

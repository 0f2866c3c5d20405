"""The relay's cost: one remote run of ``--deltas`` text deltas seen by a client of the caller
(which relays the remote run, ``Config.remote_agents``), beside the same run streamed straight
from the remote server, in the same repetition.

Two gunicorn servers on loopback (gevent, one worker each, NDJSON, SQLite files of their own):
the remote serves this module's ``remote_config`` (the ``burst`` agent: ``--deltas`` deltas as
fast as its model gives them); the caller serves ``caller_config``, whose ``burst`` is the
remote's. Each repetition, in alternating order, times a ``POST /agents/burst/run`` on each from
the request to the response's ``agent:run:end`` and counts its events; events/s is their ratio.
Aim: the relayed rate at least 0.5x the direct one::

    .venv/bin/python bench/remote_relay.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import harness
from harness import Figure, Gunicorn, ratios

from bread_sync.agents import Agent
from bread_sync.config import Config
from bread_sync.models import script
from bread_sync.models.script import say
from bread_sync.transports import http_chunked

SCRIPT = "remote_relay.py"
TITLE = "## Remote agents: the relay's cost"
AIM_RATIO = 0.5
ENDED = b'"agent:run:end"'
RUN_SECONDS = 120.0
DELTAS = int(os.environ.get("BENCH_RELAY_DELTAS", "5000"))


def remote_config() -> Config:
    burst = Agent(id="burst", model=script.provider([say([f"w{n} " for n in range(DELTAS)])]))
    return Config(agents=[burst], blob_store=None)


def caller_config() -> Config:
    remote = http_chunked.remote_agent(url=os.environ["BREAD_REMOTE_URL"], agent_id="burst")
    return Config(remote_agents={"burst": remote}, blob_store=None)


def one_run(client: Any, url: str, agent: str = "burst") -> tuple[float, int]:
    """(seconds from the request to ``agent:run:end``, events in the response)."""
    start = time.perf_counter()
    events, ended = 0, False
    with client.stream("POST", f"{url}/agents/{agent}/run", json={"input": "go"}) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.read()[:300]!r}")
        for chunk in response.iter_raw():  # the server ends the response after the terminal crumb
            events += chunk.count(b"\n")
            ended = ended or ENDED in chunk
            if time.perf_counter() - start > RUN_SECONDS:
                break
    seconds = time.perf_counter() - start
    if not ended:
        raise RuntimeError(f"{url}: no agent:run:end within {RUN_SECONDS:g} s ({events} events)")
    return seconds, events


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    import httpx2 as httpx

    load = [harness.load_average()]
    env = {"BREAD_TRANSPORT": "http-chunked", "BENCH_RELAY_DELTAS": str(args.deltas)}
    direct: list[float] = []
    relayed: list[float] = []
    events: dict[str, int] = {}
    # CPU seconds per run of each worker: the remote's for a direct run, both for a relayed one.
    cpu: dict[str, list[float]] = {"direct": [], "relayed remote": [], "relayed caller": []}
    remote_env = {**env, "BREAD_CONFIG": "remote_relay:remote_config", "BREAD_DB": str(folder / "remote.db")}
    with Gunicorn("remote", "wsgi:app", folder, env=remote_env) as remote:
        caller_env = {**env, "BREAD_CONFIG": "remote_relay:caller_config", "BREAD_DB": str(folder / "caller.db"),
                      "BREAD_REMOTE_URL": f"http://127.0.0.1:{remote.port}"}  # fmt: skip
        with Gunicorn("caller", "wsgi:app", folder, env=caller_env) as caller:
            urls = {"direct": f"http://127.0.0.1:{remote.port}", "relayed": f"http://127.0.0.1:{caller.port}"}
            with httpx.Client(timeout=httpx.Timeout(30.0, connect=5.0)) as client:
                for name in urls:  # warm both paths once, unmeasured
                    one_run(client, urls[name])
                workers = {"remote": remote.worker(), "caller": caller.worker()}
                for r in range(args.repeat):
                    for name in ("direct", "relayed") if r % 2 == 0 else ("relayed", "direct"):
                        before = {k: harness.cpu_seconds(pid) for k, pid in workers.items()}
                        seconds, count = one_run(client, urls[name])
                        used = {k: harness.cpu_seconds(pid) - before[k] for k, pid in workers.items()}
                        events[name] = count
                        (direct if name == "direct" else relayed).append(count / seconds)
                        if name == "direct":
                            cpu["direct"].append(used["remote"])
                        else:
                            cpu["relayed remote"].append(used["remote"])
                            cpu["relayed caller"].append(used["caller"])
    load.append(harness.load_average())
    return {"direct": direct, "relayed": relayed, "events": events, "load": load, "cpu": cpu}


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    share = ratios(result["relayed"], result["direct"])
    return [
        Figure(f"one remote run of {args.deltas:,} deltas, through the caller's relay", result["relayed"], "events/s",
               "the same run straight from the remote", result["direct"], "relayed / direct", share,
               f">= {AIM_RATIO}x", statistics.median(share) >= AIM_RATIO),
    ]  # fmt: skip


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Events per response (NDJSON lines): direct {result['events']['direct']:,}, relayed "
        f"{result['events']['relayed']:,} (the deltas, the start, the end).",
        "",
        *harness.table(figures(result, args)),
        "",
        "CPU per run (median, the workers' user + system time from /proc): "
        + ", ".join(f"{name} {statistics.median(values) * 1e3:.0f} ms" for name, values in result["cpu"].items())
        + ". A relayed run costs the machine both workers' time.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--deltas", type=int, default=5000, help="text deltas in the run (default 5000)")
    args = parser.parse_args(argv)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-relay-", bench, report, figures)


if __name__ == "__main__":
    main()

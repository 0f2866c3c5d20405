"""A worker busy with one huge run: how long ``GET /health`` waits on it, beside the same worker idle.

Per wire format (SSE: http-sse; NDJSON: http-chunked), one bread_sync server (gunicorn, the
project's gunicorn.conf.py, one gevent worker) on a free loopback port. Each repetition, on that
one worker:

- idle: ``GET /health`` on a fresh connection, ``--idle-probes`` times back to back;
- streaming: ``POST /agents/echo/run`` with the largest input the body limit allows (1 MiB of
  one-letter words: about 520,000 text deltas, 70-90 MB of response), read by a client that
  keeps up (a thread that only counts the bytes), while ``GET /health`` is sent back to back
  until the response has ended;
- client gone: the same run, its client gone after the first bytes, so only the run's driver
  works on; ``GET /health`` back to back until the run's record says it completed (asked
  every ``STATUS_EVERY`` probes, not counted).

The figure is the p99 of the health probes' latency (request start to the first bytes of the
answer) while the worker is busy, beside their p99 on the idle worker in the same repetition.
A worker whose run and response take turns with the rest every few milliseconds answers in a
few milliseconds; one that runs the whole run or response in one go answers when it is over::

    .venv/bin/python bench/busy_worker.py --repeat 3 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import harness
from harness import Figure, Gunicorn, percentile, ratios

SCRIPT = "busy_worker.py"
TITLE = "## A worker busy with one huge run (`GET /health` beside it)"
WIRES = {"sse": "http-sse", "ndjson": "http-chunked"}
AIM_SECONDS = 0.050
#: One-letter words: the most text deltas a body within the 1 MiB limit can ask the echo agent for.
WORDS = 520_000
ENDED = b'"agent:run:end"'
LAST_CHUNK = b"0\r\n\r\n"
PROBE_TIMEOUT = 60.0
RUN_SECONDS = 120.0
STATUS_EVERY = 20
RECV_BYTES = 1 << 20


class Reader:
    """One streaming request on a thread of its own that only counts what arrives, as fast as
    the socket gives it (``gone``: it closes once the response's head has come instead)."""

    def __init__(self, port: int, words: int, gone: bool = False):
        body = json.dumps({"input": "a " * words}).encode()
        head = (f"POST /agents/echo/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
        self.port, self.request, self.gone = port, head.encode() + body, gone
        self.received, self.head, self.tail, self.ended = 0, b"", b"", False
        self.error: BaseException | None = None
        self.started = self.finished = 0.0
        self.first_bytes = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def start(self) -> Reader:
        self.started = time.perf_counter()
        self._thread.start()
        if not self.first_bytes.wait(PROBE_TIMEOUT):
            raise RuntimeError("the huge run sent nothing")
        return self

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self) -> None:
        self._thread.join(RUN_SECONDS)
        if self._thread.is_alive() or self.error is not None:
            raise RuntimeError(f"the huge run's response failed: {self.error or 'no end in time'}")

    @property
    def run_id(self) -> str:
        line = next(line for line in self.head.split(b"\r\n") if line.lower().startswith(b"bread-run-id:"))
        return line.split(b":", 1)[1].strip().decode()

    def _read(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=RUN_SECONDS) as sock:
                sock.sendall(self.request)
                while data := sock.recv(RECV_BYTES):
                    self.received += len(data)
                    if len(self.head) < 4096:
                        self.head += data[:4096]
                    self.ended = self.ended or ENDED in self.tail + data
                    self.tail = (self.tail + data)[-256:]
                    self.first_bytes.set()
                    if self.gone and b"\r\n\r\n" in self.head:
                        return
        except BaseException as exc:  # reported by join(), on the benchmark's thread
            self.error = exc
        finally:
            self.finished = time.perf_counter()
            self.first_bytes.set()


def probe(server: Gunicorn) -> float:
    status, seconds = server.get("/health", timeout=PROBE_TIMEOUT)
    if status != 200:
        raise RuntimeError(f"GET /health answered {status} after {seconds:.1f} s")
    return seconds


def idle(server: Gunicorn, probes: int) -> list[float]:
    return [probe(server) for _ in range(probes)]


def streaming(server: Gunicorn, words: int) -> dict[str, Any]:
    """Health probes while the huge run streams to a client that keeps up."""
    reader, latencies = Reader(server.port, words).start(), []
    while not reader.done():
        latencies.append(probe(server))
    reader.join()
    if not reader.ended or not reader.tail.endswith(LAST_CHUNK):
        raise RuntimeError(f"the huge run's response did not end with its run end: {reader.tail[-120:]!r}")
    return {"health": latencies, "seconds": reader.finished - reader.started, "bytes": reader.received}


def client_gone(server: Gunicorn, words: int) -> dict[str, Any]:
    """Health probes while the huge run's driver works on alone, its client gone."""
    reader = Reader(server.port, words, gone=True).start()
    reader.join()
    latencies, deadline = [], time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline:
        latencies.append(probe(server))
        if len(latencies) % STATUS_EVERY == 0 and run_status(server, reader.run_id) == "completed":
            return {"health": latencies, "seconds": time.perf_counter() - reader.started}
    raise RuntimeError(f"run {reader.run_id} did not complete within {RUN_SECONDS:g} s")


def run_status(server: Gunicorn, run_id: str) -> str:
    data = f"GET /runs/{run_id} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=PROBE_TIMEOUT) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])["status"]


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"wires": {}, "load": [harness.load_average()]}
    for wire in args.wires:
        env = {"BREAD_DB": str(folder / f"{wire}.db"), "BREAD_TRANSPORT": WIRES[wire]}
        samples: dict[str, list] = {"idle": [], "streaming": [], "gone": []}
        with Gunicorn(f"bread-{wire}", "wsgi:app", folder, env=env) as server:
            idle(server, 20)  # warm: the first requests import and compile what the rest reuse
            for _ in range(args.repeat):
                samples["idle"].append(idle(server, args.idle_probes))
                samples["streaming"].append(streaming(server, args.words))
                samples["gone"].append(client_gone(server, args.words))
        results["wires"][wire] = samples
    results["load"].append(harness.load_average())
    return results


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    out: list[Figure] = []
    for wire, s in result["wires"].items():
        label = wire.upper()
        idle_p99 = [percentile(rep, 99) for rep in s["idle"]]
        for key, what in (("streaming", "one huge run streams to a client that keeps up"),
                          ("gone", "one huge run's driver runs on, its client gone")):  # fmt: skip
            p99 = [percentile(rep["health"], 99) for rep in s[key]]
            met = statistics.median(p99) < AIM_SECONDS
            out.append(Figure(f"{label}: `GET /health` p99 while {what}", p99, "ms", "the same worker idle, p99",
                              idle_p99, "busy / idle", ratios(p99, idle_p99), f"< {AIM_SECONDS * 1e3:.0f} ms",
                              met))  # fmt: skip
            out.append(Figure(f"{label}: `GET /health` slowest while {what}",
                              [max(rep["health"]) for rep in s[key]], "ms"))  # fmt: skip
        out.append(Figure(f"{label}: the huge run's response, MB/s to the client",
                          [rep["bytes"] / rep["seconds"] / 1e6 for rep in s["streaming"]], ""))  # fmt: skip
        out.append(Figure(f"{label}: the huge run with its client gone, from its request to its end",
                          [rep["seconds"] for rep in s["gone"]], "ms"))  # fmt: skip
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    counts = "; ".join(
        f"{wire.upper()} {statistics.median(len(rep['health']) for rep in s['streaming']):.0f} probes while streaming "
        f"({statistics.median(rep['bytes'] for rep in s['streaming']) / 1e6:.0f} MB), "
        f"{statistics.median(len(rep['health']) for rep in s['gone']):.0f} with the client gone"
        for wire, s in result["wires"].items()
    )
    lines += [
        f"One `echo` run of {args.words:,} one-letter words (its input fills the 1 MiB body limit) per workload and "
        f"repetition; {args.idle_probes} probes of the idle worker; probes per repetition (median): {counts}.",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 3)
    parser.add_argument("--words", type=int, default=WORDS, help=f"words of the huge run's input (default {WORDS})")
    parser.add_argument("--idle-probes", type=int, default=200, help="probes of the idle worker per repetition")
    parser.add_argument("--wires", nargs="+", choices=list(WIRES), default=list(WIRES))
    args = parser.parse_args(argv)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-busy-", bench, report, figures)


if __name__ == "__main__":
    main()

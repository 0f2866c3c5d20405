"""The per-delta cost of each model provider's stream, beside the ``openai`` provider's reading the
same number of deltas from the same local server, in one run (issue 31; aim: within 1.5x).

One local HTTP server (127.0.0.1, a thread of this process) answers each provider's streaming
call with a body made once: ``--deltas`` text deltas in that provider's wire (chat completions,
the Messages API, streamGenerateContent), then its usage. Each repetition reads one call of each
provider through ``provider.stream`` (the official SDK, as an agent's turn does) and divides its
time by the deltas; the median of ``--repeat`` repetitions is reported, with its ratio to openai's::

    .venv/bin/python bench/providers.py --deltas 5000 --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the wires' builders of tests/

from bread_sync import CancelToken  # noqa: E402
from bread_sync.models import ModelRequest, TextDelta  # noqa: E402
from bread_sync.models import anthropic as anthropic_provider  # noqa: E402
from bread_sync.models import google as google_provider  # noqa: E402
from bread_sync.models import openai as openai_provider  # noqa: E402
from tests import test_anthropic_provider as claude  # noqa: E402
from tests import test_google_provider as gemini  # noqa: E402
from tests import test_openai_provider as gpt  # noqa: E402
from tests.fake_provider import _event  # noqa: E402

AIM_RATIO = 1.5


def bodies(deltas: int) -> dict[str, bytes]:
    """Each provider's whole streamed answer, by the path its SDK posts to."""
    words = ["tok "] * deltas
    openai_events = [*gpt.text(*words), gpt.usage_chunk(10, deltas)]
    anthropic_events = claude.message(claude.text(*words), output_tokens=deltas).chunks
    google_events = [gemini.chunk({"text": w}) for w in words[:-1]] + [
        gemini.chunk({"text": "tok "}, usage=(10, deltas, 0))
    ]
    encode = lambda events, end="": ("".join(_event(e) for e in events) + end).encode()  # noqa: E731
    return {
        "chat/completions": encode(openai_events, "data: [DONE]\n\n"),
        "/v1/messages": encode(anthropic_events),
        "streamGenerateContent": encode(google_events),
    }


def serve(answers: dict[str, bytes]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = next(b for path, b in answers.items() if path in self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def per_delta(provider: Any, deltas: int) -> float:
    request = ModelRequest("m", "", [{"role": "user", "content": "go"}], [], CancelToken())
    started = time.perf_counter()
    got = sum(isinstance(event, TextDelta) for event in provider.stream(request))
    elapsed = time.perf_counter() - started
    assert got == deltas, (provider, got)
    return elapsed / deltas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    server = serve(bodies(args.deltas))
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    providers = {
        "openai": openai_provider.provider(model="m", base_url=f"{origin}/v1", api_key="k"),
        "anthropic": anthropic_provider.provider(model="m", base_url=origin, api_key="k"),
        "google": google_provider.provider(model="m", base_url=origin, api_key="k"),
    }
    times: dict[str, list[float]] = {name: [] for name in providers}
    for _ in range(args.repeat):
        for name, provider in providers.items():
            times[name].append(per_delta(provider, args.deltas))
    server.shutdown()
    base = statistics.median(times["openai"])
    print(f"{args.deltas} deltas a call, median of {args.repeat}:")
    for name, measured in times.items():
        median = statistics.median(measured)
        verdict = "" if name == "openai" else ("  ok" if median / base <= AIM_RATIO else f"  over {AIM_RATIO}x")
        print(f"  {name:10} {median * 1e6:8.2f} us/delta  {median / base:5.2f}x openai{verdict}")


if __name__ == "__main__":
    main()

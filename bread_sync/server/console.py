"""A run at a terminal, through the client: the :class:`Console` renders its frames with the
stdout sink, asks a human at its pauses (or reports them as a JSON line), and cancels it on
Ctrl-C; the same over the in-process transport and the HTTP one, so the commands
(``commands.py``) behave alike on both.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from click.core import ParameterSource

from ..cancel import CancelToken
from ..client import AgentClient, Outcome, ThreadRun, create_agent_client, local
from ..crumbs import AGENT_RUN_START, HUMAN_RESUMED, Frame
from ..errors import AGENT_NOT_FOUND, BreadError, install_hint
from ..runtime import Bread
from ..transports import stdout

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PAUSED = 3
EXIT_CANCELLED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C

EXIT_CODES = {"completed": EXIT_OK, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}
#: How long a run this console follows may sit queued, taken by no worker, before a line on
#: stderr says what it waits for: with BREAD_EXECUTOR=huey and no worker running, it waits forever
#: (a session's older run or an agent's cap may hold it too: the line asks, it does not tell).
QUEUED_NOTICE_SECONDS = 3.0
#: How long a follow that ends waits for the notice's read of the run's record, already begun.
NOTICE_STOP_SECONDS = 1.0
#: The crumbs a run's stream opens with (a start, or a resume's): all a queued run's stream shows.
OPENING_CRUMBS = frozenset({AGENT_RUN_START, HUMAN_RESUMED})


class Console:
    """The runs of one command, through the client (in-process or over HTTP); the sink renders
    their frames. ``resume_flags``: what a pause's ``bread-sync resume`` hint adds to reach the
    same runs (the server's ``--url``; nothing in-process, where the store is the config's)."""

    def __init__(self, client: AgentClient, sink: stdout.StdoutTransport, resume_flags: str = ""):
        self.client, self.sink, self.resume_flags = client, sink, resume_flags
        self._positions: dict[str, int] = {}

    def agent_ids(self) -> list[str]:
        return sorted(agent["id"] for agent in self.client.manifest()["agents"])

    def check_agent(self, agent_id: str) -> str:
        if agent_id not in self.agent_ids():
            raise BreadError(AGENT_NOT_FOUND, f"no agent {agent_id!r}")
        return agent_id

    def follow(self, run: ThreadRun) -> Outcome:
        """Render ``run`` to its end or pause; the first Ctrl-C cancels it meanwhile."""
        token = CancelToken()
        token.on_cancel(lambda: threading.Thread(target=run.cancel, daemon=True).start())
        with _ctrl_c_cancels(token), QueuedNotice(run.run_id, self.run_record) as notice:
            for frame in run:
                notice.saw(frame)  # before it is shown: a notice never lands in the run's output
                self.sink.publish(frame)
        self._positions[run.run_id] = run.last.seq if run.last is not None else 0
        return run.outcome()

    def cancel(self, run_id: str) -> None:
        """Cancel a paused run and render its end (the RUN_CANCELLED line)."""
        if self.client.transport.stop_run(run_id):
            for frame in self.client.run(run_id, after=self._positions.get(run_id, 0)):
                self.sink.publish(frame)

    def run_record(self, run_id: str) -> dict[str, Any] | None:
        return self.client.transport.get_run(run_id)


class QueuedNotice:
    """While a console follows the run ``run_id``: if it is still ``queued`` after ``after``
    seconds, one line on stderr says so; stdout and the exit code are the run's. Use it as a
    context manager, telling it each frame the run shows (:meth:`saw`)."""

    def __init__(
        self, run_id: str, read_record: Callable[[str], dict[str, Any] | None], after: float = QUEUED_NOTICE_SECONDS
    ):
        self.run_id, self._read_record = run_id, read_record
        #: Set once the line may no longer be said: the run went on, or the console stopped following it.
        self.done = threading.Event()
        self._saying = threading.Lock()  # the line lands whole before whatever follows a stop
        self._timer = threading.Timer(after, self._say_if_queued)
        self._timer.name, self._timer.daemon = f"queued-notice-{run_id}", True

    def __enter__(self) -> QueuedNotice:
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def saw(self, frame: Frame) -> None:
        """Stop at the run's first crumb past its opening: a queued run shows none, so a run that
        is not queued costs no read of its record (an HTTP request with ``--url``)."""
        if frame.crumb["type"] not in OPENING_CRUMBS and not self.done.is_set():
            self.stop()

    def stop(self) -> None:
        """From here on the line is never said. A timer already running may be reading the record:
        it sees ``done`` before it prints; the join lets that read end before the client it reads
        through closes, but never holds the run's output or exit for long."""
        self._timer.cancel()
        with self._saying:
            self.done.set()
        self._timer.join(NOTICE_STOP_SECONDS)

    def _say_if_queued(self) -> None:
        try:
            record = self._read_record(self.run_id)
        except Exception:  # a notice only: what fails meanwhile is the run's stream's to report
            return
        with self._saying:
            if record is not None and record.get("status") == "queued" and not self.done.is_set():
                print(
                    f"waiting: run {self.run_id} is still queued, taken by no worker yet "
                    "(with BREAD_EXECUTOR=huey: is a `bread-sync worker` running?)",
                    file=sys.stderr,
                    flush=True,
                )


@contextmanager
def in_process(bread: Bread) -> Iterator[Console]:
    """A console on ``bread``, through the client's in-process transport."""
    with create_agent_client(local.transport(bread)) as client:
        yield Console(client, stdout.transport())


@contextmanager
def over_http(url: str, api_key: str | None) -> Iterator[Console]:
    """A console on the server at ``url``, through the client's HTTP transport."""
    try:
        from ..client import http as client_http
    except ImportError:
        raise ClientMissing(f"--url needs the HTTP client: {install_hint('client')}") from None

    with create_agent_client(client_http.transport(url, api_key=api_key)) as client:
        yield Console(client, stdout.transport(), _server_flags(url, api_key))


class ClientMissing(click.ClickException):
    """``--url`` on an install without the ``client`` extra: one line and exit 2, like a config
    that cannot be loaded."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        print(f"error: {self.message}", file=sys.stderr)


def _server_flags(url: str, api_key: str | None) -> str:
    """``--url URL``, and ``--api-key "$BREAD_API_KEY"`` when the key was given as a flag (one
    from the environment is found there again): the hint never prints the secret itself."""
    flags = f" --url {shlex.quote(url)}"
    ctx = click.get_current_context(silent=True)
    if api_key and ctx is not None and ctx.get_parameter_source("api_key") is ParameterSource.COMMANDLINE:
        flags += ' --api-key "$BREAD_API_KEY"'
    return flags


def drive(console: Console, run: ThreadRun, interactive: bool | None = None) -> int:
    """Follow ``run`` (the sink renders it) until it ends; answer its pauses at the terminal
    when ``interactive`` (by default: stdin is a terminal), else report the pause. The exit code."""
    sink = console.sink
    interactive = sink.input.isatty() if interactive is None else interactive
    while True:
        outcome = console.follow(run)
        if outcome.status != "paused":
            return EXIT_CODES.get(outcome.status, EXIT_FAILED)
        checkpoint = outcome.pause or {}
        if not interactive:
            return report_pause(console, checkpoint)
        try:
            response = _answer(sink, checkpoint)
        except EOFError:
            leave_prompt(sink)
            return report_pause(console, checkpoint)
        except KeyboardInterrupt:
            leave_prompt(sink)
            console.cancel(run.run_id)
            return EXIT_CANCELLED
        run = run.respond(response)


@contextmanager
def _ctrl_c_cancels(token: CancelToken) -> Iterator[None]:
    """While a run is pulled, the first Ctrl-C cancels it (so it ends with RUN_CANCELLED and a
    log that says so); a second one raises KeyboardInterrupt as usual."""

    def on_interrupt(signum: int, frame: Any) -> None:
        if token.cancelled:
            raise KeyboardInterrupt
        token.cancel()

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:  # None: a handler installed outside Python, which SIG_DFL stands for best
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def _answer(sink: stdout.StdoutTransport, checkpoint: dict[str, Any]) -> Any:
    line = sink.ask(sink.question(checkpoint))
    if checkpoint["kind"] == "approval":
        return {"approved": line.strip().lower() in ("y", "yes")}
    try:
        return json.loads(line)
    except ValueError:
        return {"answer": line}


def report_pause(console: Console, checkpoint: dict[str, Any]) -> int:
    sink, keys = console.sink, ("checkpointId", "kind", "toolName", "input")
    example = '{"approved": true}' if checkpoint.get("kind") == "approval" else '{"answer": "..."}'
    # The hint first, flushed: the JSON line ends the whole output, as a terminal shows stdout
    # and stderr together, so whoever reads the last line gets the checkpoint.
    print(
        f"paused: continue with bread-sync resume {checkpoint.get('checkpointId')} '{example}'{console.resume_flags}",
        file=sys.stderr,
        flush=True,
    )
    sink.stream.write(json.dumps({k: checkpoint.get(k) for k in keys}, ensure_ascii=False) + "\n")
    sink.stream.flush()
    return EXIT_PAUSED


def leave_prompt(sink: stdout.StdoutTransport) -> None:
    if sink.input.isatty():  # the cursor is still after the prompt
        sink.prompts.write("\n")
        sink.prompts.flush()


def print_error(error: BreadError, console: Console | None = None) -> None:
    print(f"error: {error.code}: {error.message}", file=sys.stderr)
    if error.code == AGENT_NOT_FOUND and console is not None:
        print(f"agents: {', '.join(console.agent_ids()) or '(none)'}", file=sys.stderr)

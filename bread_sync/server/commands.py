"""The run commands, on click: ``invoke``, ``resume``, ``chat``, ``tail`` and ``gc``, shared by
the ``bread-sync`` command (``cli.py``) and ``flask bread`` (the extension registers them).

The command line is the client's first user: a command runs through ``create_agent_client``,
over the in-process transport on a ``Bread`` of this process, or, with ``--url`` (``BREAD_URL``),
over the HTTP one to a running server; one code path, so the same output and exit codes (the
stdout sink renders the frames), and a dropped connection is resumed without the user noticing.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from typing import Any

import click
from click.core import ParameterSource

from ..cancel import CancelToken
from ..client import AgentClient, Outcome, Run, Thread, create_agent_client, local
from ..crumbs import AGENT_ERROR, AGENT_RUN_END, HUMAN_REQUIRED
from ..errors import AGENT_NOT_FOUND, BreadError
from ..retention import collect_garbage
from ..runtime import Bread
from ..transports import stdout

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PAUSED = 3
EXIT_CANCELLED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C

EXIT_CODES = {"completed": EXIT_OK, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}

# What each command's --help ends with: its own exit codes, then where the config comes from.
RUN_EXITS = """\
exit codes:
  0    the run ended with agent:run:end
  1    the run ended with agent:error, or was refused before it started (unknown agent,
       input failing the schema, unknown or already resumed checkpoint, ...); a refusal
       prints "error: CODE: message" on stderr
  2    usage error: bad arguments, a resume response that is not JSON, a config that
       cannot be loaded (one line on stderr)
  3    the run paused for a human and stdin is not a terminal (or ended at the prompt):
       the last line of the output is {"checkpointId", "kind", "toolName", "input"};
       continue it with `bread-sync resume CHECKPOINT JSON`
  130  the run was cancelled: Ctrl-C during a run cancels it (it ends with RUN_CANCELLED),
       Ctrl-C at a human prompt cancels the paused run, a second Ctrl-C stops at once

When a run pauses and stdin is a terminal, the CLI asks there: an approval is answered
y/N, an input with one line (sent as JSON if it parses, else as {"answer": line}).
"""
CHAT_EXITS = """\
exit codes:
  0    you left: /exit, or the end of the input (Ctrl-D at the you> prompt)
  1    refused before the chat began (unknown agent): "error: CODE: message" on stderr;
       a turn that fails or is refused is reported, and the chat goes on
  2    usage error: bad arguments, a config that cannot be loaded (one line on stderr)
  3    a run paused for a human and the input ended at its prompt: the last line of the
       output is {"checkpointId", "kind", "toolName", "input"}; continue it with
       `bread-sync resume CHECKPOINT JSON`
  130  Ctrl-C at the you> prompt, or a second Ctrl-C during an answer; the first one
       cancels the answer (or, at a human prompt, the paused run) and the chat goes on
"""
TAIL_EXITS = """\
exit codes:
  0    the run ended with agent:run:end
  1    the run ended with agent:error, or there is no such run ("error: CODE: message"
       on stderr)
  2    usage error: bad arguments, a config that cannot be loaded (one line on stderr)
  3    the run is paused for a human: the last line of the output is {"checkpointId",
       "kind", "toolName", "input"}; continue it with `bread-sync resume CHECKPOINT JSON`
"""
GC_EXITS = """\
exit codes:
  0    done: what was deleted (with --dry-run, what would be) is one JSON line on stdout
  2    usage error: bad arguments, no --older-than and no BREAD_RETENTION_DAYS or
       retention_days in the config, a config that cannot be loaded (one line on stderr)
"""
CONFIG_HELP = """
BREAD_CONFIG=module:attribute (or --config) names the config, the demo agents by default;
its module may be in the current folder. BREAD_DB names the SQLite file that keeps runs
and checkpoints across processes, or a Postgres database (postgresql://...) shared by hosts.
--url URL (BREAD_URL) talks to a running server instead,
with --api-key (BREAD_API_KEY) as its bearer key.
"""


# -- how commands look -------------------------------------------------------------------------


class _Formatter(click.HelpFormatter):
    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, args, "usage: " if prefix is None else prefix)


class _Context(click.Context):
    formatter_class = _Formatter


class Command(click.Command):
    """A command whose epilog (its exit codes) keeps its layout."""

    context_class = _Context

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.epilog:
            formatter.write("\n" + self.epilog)


class Group(click.Group):
    context_class = _Context
    command_class = Command
    format_epilog = Command.format_epilog


# -- where runs happen -------------------------------------------------------------------------


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

    def follow(self, run: Run) -> Outcome:
        """Render ``run`` to its end or pause; the first Ctrl-C cancels it meanwhile."""
        token = CancelToken()
        token.on_cancel(lambda: threading.Thread(target=run.cancel, daemon=True).start())
        with _ctrl_c_cancels(token):
            for frame in run:
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
        raise ClientMissing('--url needs the HTTP client: pip install "bread-sync[client]"') from None

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


class Runtime:
    """What the group puts in ``ctx.obj``: ``open()``, a context manager of the ``Bread`` its
    commands run in-process (the config's, made for the command; or the Flask app's)."""

    def __init__(self, open: Callable[[], AbstractContextManager[Bread]]):
        self.open = open


def _bread() -> AbstractContextManager[Bread]:
    return click.get_current_context().find_object(Runtime).open()


@contextmanager
def _console(url: str | None, api_key: str | None) -> Iterator[Console]:
    if url:
        with over_http(url, api_key) as console:
            yield console
        return
    with _bread() as bread, in_process(bread) as console:
        yield console


# -- the commands --------------------------------------------------------------------------------

_url = click.option("--url", envvar="BREAD_URL", metavar="URL", help="a running server to talk to ($BREAD_URL)")
_api_key = click.option("--api-key", envvar="BREAD_API_KEY", metavar="KEY", help="its API key ($BREAD_API_KEY)")


def _command(name: str, exits: str, summary: str, more: str = "") -> Callable[[Callable[..., int]], Command]:
    return click.command(name, cls=Command, short_help=summary, help=f"{summary[0].upper()}{summary[1:]}. {more}",
                         epilog=exits + CONFIG_HELP)  # fmt: skip


def _json_or_text(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@_command("invoke", RUN_EXITS, "run an agent once and stream its output",
          "AGENT is the agent's id, e.g. echo or writer; INPUT is the run's input: JSON when it "
          "parses, else a plain string (default: null). A pause for a human is asked at the "
          "terminal, or reported as a JSON line (exit 3).")  # fmt: skip
@click.argument("agent", metavar="AGENT")
@click.argument("input", metavar="[INPUT]", required=False)
@_url
@_api_key
def invoke(agent: str, input: str | None, url: str | None, api_key: str | None) -> int:
    return _run(url, api_key, lambda console: drive(console, console.client.thread().send(agent, _json_or_text(input))))


@_command("resume", RUN_EXITS, "continue a paused run from its checkpoint",
          "CHECKPOINT is the checkpointId a pause printed; JSON the human's response, e.g. "
          "'{\"approved\": true}' or '{\"answer\": \"Ada\"}'. Works in any process sharing the "
          "store (BREAD_DB); a checkpoint resumes once.")  # fmt: skip
@click.argument("checkpoint", metavar="CHECKPOINT")
@click.argument("response", metavar="JSON")
@_url
@_api_key
def resume(checkpoint: str, response: str, url: str | None, api_key: str | None) -> int:
    try:
        answer = json.loads(response)
    except ValueError as exc:
        raise click.UsageError(f"argument JSON: not valid JSON ({exc}): {response!r}") from None
    return _run(url, api_key, lambda console: drive(console, console.client.respond(checkpoint, answer)))


@_command("chat", CHAT_EXITS, "talk with an agent in one session, line by line",
          "Each line you type is one run (JSON if it parses, else text), and the session keeps "
          "the history. /exit or Ctrl-D leaves; Ctrl-C cancels the answer in progress.")  # fmt: skip
@click.argument("agent", metavar="AGENT")
@_url
@_api_key
def chat(agent: str, url: str | None, api_key: str | None) -> int:
    return _run(url, api_key, lambda console: _chat(console, agent))


@_command("tail", TAIL_EXITS, "follow a run to its end, from any process or a server",
          "Prints the run's crumbs past --after (its whole log by default) and what comes live.")  # fmt: skip
@click.argument("run_id", metavar="RUN_ID")
@click.option("--after", metavar="SEQ", type=click.IntRange(min=0), default=0, help="the last seq already seen")
@_url
@_api_key
def tail(run_id: str, after: int, url: str | None, api_key: str | None) -> int:
    return _run(url, api_key, lambda console: _tail(console, run_id, after))


@_command("gc", GC_EXITS, "delete finished runs and stored files older than some days",
          "Finished runs go with their crumb logs, checkpoints, loops and task runs; a running or "
          "paused run is never deleted. Prints what it deleted (or would) as JSON.")  # fmt: skip
@click.option("--older-than", metavar="DAYS", type=float, default=None,
              help="their age in days (default: $BREAD_RETENTION_DAYS, else the config's retention_days)")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="count what would be deleted; delete nothing")
def gc(older_than: float | None, dry_run: bool) -> int:
    with _bread() as bread:
        return _exit_code(lambda: _gc(bread, older_than, dry_run))


COMMANDS = [invoke, resume, chat, tail, gc]


def _run(url: str | None, api_key: str | None, body: Callable[[Console], int]) -> int:
    with _console(url, api_key) as console:
        return _exit_code(lambda: body(console), console)


def _exit_code(body: Callable[[], int], console: Console | None = None) -> int:
    try:
        return body()
    except BreadError as exc:
        _print_error(exc, console)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_CANCELLED


def _chat(console: Console, agent_id: str) -> int:
    agent = console.check_agent(agent_id)  # an unknown agent fails now, not at the first line
    thread, sink = console.client.thread(), console.sink
    if sink.input.isatty():
        print(f"chatting with {agent}; /exit or Ctrl-D to leave", file=sink.prompts)
    while True:
        try:
            line = sink.ask("you> ")
        except (EOFError, KeyboardInterrupt) as exc:
            _leave_prompt(sink)
            return EXIT_OK if isinstance(exc, EOFError) else EXIT_CANCELLED
        if line.strip() == "/exit":
            return EXIT_OK
        if line.strip() and _chat_turn(console, thread, agent, line) == EXIT_PAUSED:
            return EXIT_PAUSED


def _chat_turn(console: Console, thread: Thread, agent_id: str, line: str) -> int:
    try:
        return drive(console, thread.send(agent_id, _json_or_text(line)), interactive=True)
    except BreadError as exc:  # e.g. INPUT_INVALID: say so and let the human try again
        _print_error(exc, console)
        return EXIT_FAILED


def _tail(console: Console, run_id: str, after: int) -> int:
    with closing(console.client.run(run_id, after)) as run:
        for frame in run:
            console.sink.publish(frame)
            if frame.type == AGENT_RUN_END:
                return EXIT_OK
            if frame.type == AGENT_ERROR:
                return EXIT_FAILED
            if frame.type == HUMAN_REQUIRED and _paused_at(console, run_id, frame.crumb["checkpointId"]):
                return _report_pause(console, frame.crumb)
    record = console.run_record(run_id) or {}
    return EXIT_OK if record.get("status") == "completed" else EXIT_FAILED


def _paused_at(console: Console, run_id: str, checkpoint_id: str) -> bool:
    record = console.run_record(run_id) or {}
    return record.get("status") == "paused" and record.get("checkpointId") == checkpoint_id


def _gc(bread: Bread, older_than: float | None, dry_run: bool) -> int:
    days = older_than if older_than is not None else bread.config.retention_days
    if days is None or not days >= 0:  # also refuses nan
        print("error: give --older-than DAYS (0 or more), or set BREAD_RETENTION_DAYS", file=sys.stderr)
        return EXIT_USAGE
    report = collect_garbage(bread, days, dry_run=dry_run)
    print(json.dumps(report), flush=True)
    return EXIT_OK


# -- driving a run -----------------------------------------------------------------------------


def drive(console: Console, run: Run, interactive: bool | None = None) -> int:
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
            return _report_pause(console, checkpoint)
        try:
            response = _answer(sink, checkpoint)
        except EOFError:
            _leave_prompt(sink)
            return _report_pause(console, checkpoint)
        except KeyboardInterrupt:
            _leave_prompt(sink)
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


def _report_pause(console: Console, checkpoint: dict[str, Any]) -> int:
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


def _leave_prompt(sink: stdout.StdoutTransport) -> None:
    if sink.input.isatty():  # the cursor is still after the prompt
        sink.prompts.write("\n")
        sink.prompts.flush()


def _print_error(error: BreadError, console: Console | None = None) -> None:
    print(f"error: {error.code}: {error.message}", file=sys.stderr)
    if error.code == AGENT_NOT_FOUND and console is not None:
        print(f"agents: {', '.join(console.agent_ids()) or '(none)'}", file=sys.stderr)


# -- flask bread ...  ---------------------------------------------------------------------------


def flask_group() -> click.Group:
    """``flask bread invoke|chat|resume|tail|gc``: the commands over the app's own ``Bread``
    (or, with ``--url``, a server)."""
    from flask.cli import AppGroup

    group = AppGroup("bread", help="Run this app's bread_sync agents from a terminal.")

    @group.result_callback()
    def _exit(code: Any, **_: Any) -> None:
        sys.exit(code if isinstance(code, int) else EXIT_OK)

    group.context_settings["obj"] = Runtime(_app_bread)
    for command in COMMANDS:
        group.add_command(command)
    return group


@contextmanager
def _app_bread() -> Iterator[Bread]:
    from .state import state

    yield state().bread  # the app's to close, not a command's

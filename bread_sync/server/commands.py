"""The run commands, on click: ``invoke``, ``resume``, ``chat``, ``tail`` and ``gc``, shared by
the ``bread-sync`` command (``cli.py``) and ``flask bread`` (the extension registers them).

The command line is the client's first user: a command runs through ``create_agent_client``,
over the in-process transport on a ``Bread`` of this process, or, with ``--url`` (``BREAD_URL``),
over the HTTP one to a running server; one code path, so the same output and exit codes (the
stdout sink renders the frames), and a dropped connection is resumed without the user noticing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from typing import Any

import click

from ..client import Thread
from ..crumbs import AGENT_ERROR, AGENT_RUN_END, HUMAN_REQUIRED
from ..errors import BreadError
from ..retention import collect_garbage
from ..runtime import Bread
from .console import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_USAGE,
    Console,
    drive,
    in_process,
    leave_prompt,
    over_http,
    print_error,
    report_pause,
)

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


class BreadOpener:
    """What the group puts in ``ctx.obj``: ``open()``, a context manager of the ``Bread`` its
    commands run in-process (the config's, made for the command; or the Flask app's)."""

    def __init__(self, open: Callable[[], AbstractContextManager[Bread]]):
        self.open = open


def _bread() -> AbstractContextManager[Bread]:
    return click.get_current_context().find_object(BreadOpener).open()


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
    return click.command(
        name,
        cls=Command,
        short_help=summary,
        help=f"{summary[0].upper()}{summary[1:]}. {more}",
        epilog=exits + CONFIG_HELP,
    )


def _json_or_text(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@_command(
    "invoke",
    RUN_EXITS,
    "run an agent once and stream its output",
    "AGENT is the agent's id, e.g. echo or writer; INPUT is the run's input: JSON when it "
    "parses, else a plain string (default: null). A pause for a human is asked at the "
    "terminal, or reported as a JSON line (exit 3). With --background (and --url) the server "
    "runs it on its own: the run id is printed at once (follow it with tail).",
)
@click.argument("agent", metavar="AGENT")
@click.argument("input", metavar="[INPUT]", required=False)
@click.option("--background", is_flag=True, help="start the run on the server and print its id (needs --url)")
@_url
@_api_key
def invoke(agent: str, input: str | None, background: bool, url: str | None, api_key: str | None) -> int:
    if background and not url:
        raise click.UsageError("--background needs --url: a run in this process would end with it")
    if background:
        return _run(url, api_key, lambda console: _print_run_id(console, agent, _json_or_text(input)))
    return _run(url, api_key, lambda console: drive(console, console.client.thread().send(agent, _json_or_text(input))))


def _print_run_id(console: Console, agent: str, input: Any) -> int:
    print(console.client.thread().send(agent, input, background=True).run_id, file=console.sink.stream, flush=True)
    return EXIT_OK


@_command(
    "resume",
    RUN_EXITS,
    "continue a paused run from its checkpoint",
    "CHECKPOINT is the checkpointId a pause printed; JSON the human's response, e.g. "
    '\'{"approved": true}\' or \'{"answer": "Ada"}\'. Works in any process sharing the '
    "store (BREAD_DB); a checkpoint resumes once.",
)
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


@_command(
    "chat",
    CHAT_EXITS,
    "talk with an agent in one session, line by line",
    "Each line you type is one run (JSON if it parses, else text), and the session keeps "
    "the history. /exit or Ctrl-D leaves; Ctrl-C cancels the answer in progress.",
)
@click.argument("agent", metavar="AGENT")
@_url
@_api_key
def chat(agent: str, url: str | None, api_key: str | None) -> int:
    return _run(url, api_key, lambda console: _chat(console, agent))


@_command(
    "tail",
    TAIL_EXITS,
    "follow a run to its end, from any process or a server",
    "Prints the run's crumbs past --after (its whole log by default) and what comes live.",
)
@click.argument("run_id", metavar="RUN_ID")
@click.option("--after", metavar="SEQ", type=click.IntRange(min=0), default=0, help="the last seq already seen")
@_url
@_api_key
def tail(run_id: str, after: int, url: str | None, api_key: str | None) -> int:
    return _run(url, api_key, lambda console: _tail(console, run_id, after))


@_command(
    "gc",
    GC_EXITS,
    "delete finished runs and stored files older than some days",
    "Finished runs go with their crumb logs, checkpoints, loops and task runs; a running or "
    "paused run is never deleted. Prints what it deleted (or would) as JSON.",
)
@click.option(
    "--older-than",
    metavar="DAYS",
    type=float,
    default=None,
    help="their age in days (default: $BREAD_RETENTION_DAYS, else the config's retention_days)",
)
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
        print_error(exc, console)
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
            leave_prompt(sink)
            return EXIT_OK if isinstance(exc, EOFError) else EXIT_CANCELLED
        if line.strip() == "/exit":
            return EXIT_OK
        if line.strip() and _chat_turn(console, thread, agent, line) == EXIT_PAUSED:
            return EXIT_PAUSED


def _chat_turn(console: Console, thread: Thread, agent_id: str, line: str) -> int:
    try:
        return drive(console, thread.send(agent_id, _json_or_text(line)), interactive=True)
    except BreadError as exc:  # e.g. INPUT_INVALID: say so and let the human try again
        print_error(exc, console)
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
                return report_pause(console, frame.crumb)
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


# -- flask bread ...  ---------------------------------------------------------------------------


def flask_group() -> click.Group:
    """``flask bread invoke|chat|resume|tail|gc``: the commands over the app's own ``Bread``
    (or, with ``--url``, a server)."""
    from flask.cli import AppGroup

    group = AppGroup("bread", help="Run this app's bread_sync agents from a terminal.")

    @group.result_callback()
    def _exit(code: Any, **_: Any) -> None:
        sys.exit(code if isinstance(code, int) else EXIT_OK)

    group.context_settings["obj"] = BreadOpener(_app_bread)
    for command in COMMANDS:
        group.add_command(command)
    return group


@contextmanager
def _app_bread() -> Iterator[Bread]:
    from .state import state

    yield state().bread  # the app's to close, not a command's

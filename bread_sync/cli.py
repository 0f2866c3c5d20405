"""The ``bread-sync`` command: invoke, resume and chat with agents from a terminal.

The CLI renders runs through the stdout sink (it replaces the config's transport for its own
process) and keeps runs in the config's store, so a run paused here can be resumed by another
process sharing that store (``BREAD_DB``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .cancel import CancelToken
from .config import LOAD_ERRORS, Config, load_config
from .errors import AGENT_NOT_FOUND, BreadError
from .retention import collect_garbage
from .runtime import Bread, Run, RunResult, create_bread, new_id
from .transports import stdout

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
GC_EXITS = """\
exit codes:
  0    done: what was deleted (with --dry-run, what would be) is one JSON line on stdout
  2    usage error: bad arguments, no --older-than and no BREAD_RETENTION_DAYS or
       retention_days in the config, a config that cannot be loaded (one line on stderr)
"""
SERVE_EXITS = """\
exit codes:
  0    the server stopped: Ctrl-C, or SIGTERM (start: after its graceful shutdown)
  1    it did not start: the listen rules refuse the address ("error: AUTH_NOT_CONFIGURED:
       ..." on stderr), or the port is in use
  2    usage error: bad arguments, a config that cannot be loaded (one line on stderr)
"""
MAIN_EXITS = """\
exit codes: each command's --help lists its own; for every command 2 is a usage error
(bad arguments, a config that cannot be loaded).
"""
CONFIG_HELP = """
BREAD_CONFIG=module:attribute (or --config) names the config, the demo agents by default;
its module may be in the current folder. BREAD_DB names the SQLite file that keeps runs
and checkpoints across processes, or a Postgres database (postgresql://...) shared by hosts.
"""

Begin = Callable[[CancelToken], Run]


# -- arguments ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _parser(
        argparse.ArgumentParser,
        MAIN_EXITS,
        prog="bread-sync",
        description="Run bread_sync agents from a terminal: their text streams live, tool calls "
        "are marked, and pauses for a human are answered at the prompt.",
    )
    parser.add_argument(
        "-c",
        "--config",
        metavar="MODULE:ATTR",
        help="the config to load (default: $BREAD_CONFIG, else the demo)",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    invoke = _command(
        commands, "invoke", cmd_invoke, RUN_EXITS, "run an agent once and stream its output",
        "A pause for a human is asked at the terminal, or reported as a JSON line (exit 3).",
    )  # fmt: skip
    invoke.add_argument("agent", metavar="AGENT", help="the agent's id, e.g. echo or writer")
    invoke.add_argument(
        "input", metavar="INPUT", nargs="?", type=_json_or_text, default=None,
        help="the run's input: JSON when it parses, else a plain string (default: null)",
    )  # fmt: skip
    resume = _command(
        commands, "resume", cmd_resume, RUN_EXITS, "continue a paused run from its checkpoint",
        "Works in any process sharing the store (BREAD_DB); a checkpoint resumes once.",
    )  # fmt: skip
    resume.add_argument("checkpoint", metavar="CHECKPOINT", help="the checkpointId a pause printed")
    resume.add_argument(
        "response", metavar="JSON", type=_json_value,
        help='the human\'s response, e.g. \'{"approved": true}\' or \'{"answer": "Ada"}\'',
    )  # fmt: skip
    chat = _command(
        commands, "chat", cmd_chat, CHAT_EXITS, "talk with an agent in one session, line by line",
        "Each line you type is one run (JSON if it parses, else text), and the session keeps "
        "the history. /exit or Ctrl-D leaves; Ctrl-C cancels the answer in progress.",
    )  # fmt: skip
    chat.add_argument("agent", metavar="AGENT", help="the agent's id")
    gc = _command(
        commands, "gc", cmd_gc, GC_EXITS, "delete finished runs and stored files older than some days",
        "Finished runs go with their crumb logs, checkpoints, loops and task runs; a running or "
        "paused run is never deleted. Prints what it deleted (or would) as JSON.",
    )  # fmt: skip
    gc.add_argument(
        "--older-than", metavar="DAYS", type=float, default=None,
        help="their age in days (default: $BREAD_RETENTION_DAYS, else the config's retention_days)",
    )  # fmt: skip
    gc.add_argument("--dry-run", action="store_true", help="count what would be deleted; delete nothing")
    for name, summary, more in SERVE_COMMANDS:
        serve = _command(commands, name, cmd_serve, SERVE_EXITS, summary, more)
        serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
        serve.add_argument("--port", type=int, default=3000, help="the port (default: 3000)")
        if name == "start":
            serve.add_argument(
                "--workers", type=int, default=None, help="gevent workers (default: $WEB_CONCURRENCY or 2)"
            )
    return parser


SERVE_COMMANDS = [
    ("dev", "serve the agents over HTTP for development",
     "A threaded development server that streams and reloads on code change."),
    ("start", "serve the agents over HTTP in production",
     "gunicorn with gevent workers sharing the store; each worker builds its own runtime."),
]  # fmt: skip


def _command(
    commands: Any, name: str, handler: Callable[..., int], exits: str, summary: str, more: str = ""
) -> argparse.ArgumentParser:
    description = f"{summary[0].upper()}{summary[1:]}. {more}".strip()
    sub = _parser(commands.add_parser, exits, name, help=summary, description=description)
    sub.set_defaults(handler=handler, command=name)
    return sub


def _parser(factory: Callable[..., argparse.ArgumentParser], exits: str, *args: Any, **kwargs: Any) -> Any:
    # Raw, so the exit-code table keeps its layout; so the description is wrapped here.
    kwargs["description"] = textwrap.fill(kwargs["description"], 88)
    epilog = exits + CONFIG_HELP
    return factory(*args, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None


# -- entry point -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the ``bread-sync`` command line; returns the exit code (see ``bread-sync --help``)."""
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except LOAD_ERRORS as exc:
        print(f"error: cannot load the config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.handler is cmd_serve:
        return cmd_serve(config, args)
    sink = stdout.transport()
    bread = create_bread(config.model_copy(update={"transport": sink})).start()
    try:
        return args.handler(bread, sink, args)
    except BreadError as exc:
        _print_error(bread, exc)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    finally:
        bread.close()


def cmd_invoke(bread: Bread, sink: stdout.StdoutTransport, args: argparse.Namespace) -> int:
    def begin(token: CancelToken) -> Run:
        return bread.run(args.agent, args.input, signal=token)

    return drive(bread, sink, begin, interactive=sink.input.isatty())


def cmd_resume(bread: Bread, sink: stdout.StdoutTransport, args: argparse.Namespace) -> int:
    def begin(token: CancelToken) -> Run:
        return bread.resume(args.checkpoint, args.response, signal=token)

    return drive(bread, sink, begin, interactive=sink.input.isatty())


def cmd_chat(bread: Bread, sink: stdout.StdoutTransport, args: argparse.Namespace) -> int:
    agent = bread.agent(args.agent)  # an unknown agent fails now, not at the first line
    session = {"id": new_id("ses")}
    if sink.input.isatty():
        print(f"chatting with {agent.id}; /exit or Ctrl-D to leave", file=sink.prompts)
    while True:
        try:
            line = sink.ask("you> ")
        except (EOFError, KeyboardInterrupt) as exc:
            _leave_prompt(sink)
            return EXIT_OK if isinstance(exc, EOFError) else EXIT_CANCELLED
        if line.strip() == "/exit":
            return EXIT_OK
        if line.strip() and _chat_turn(bread, sink, agent.id, session, line) == EXIT_PAUSED:
            return EXIT_PAUSED


def _chat_turn(bread: Bread, sink: stdout.StdoutTransport, agent_id: str, session: dict, line: str) -> int:
    def begin(token: CancelToken) -> Run:
        return bread.run(agent_id, _json_or_text(line), session=session, signal=token)

    try:
        return drive(bread, sink, begin, interactive=True)
    except BreadError as exc:  # e.g. INPUT_INVALID: say so and let the human try again
        _print_error(bread, exc)
        return EXIT_FAILED


def cmd_gc(bread: Bread, sink: stdout.StdoutTransport, args: argparse.Namespace) -> int:
    days = args.older_than if args.older_than is not None else bread.config.retention_days
    if days is None or not days >= 0:  # also refuses nan
        print("error: give --older-than DAYS (0 or more), or set BREAD_RETENTION_DAYS", file=sys.stderr)
        return EXIT_USAGE
    report = collect_garbage(bread, days, dry_run=args.dry_run)
    print(json.dumps(report), file=sink.stream, flush=True)
    return EXIT_OK


def cmd_serve(config: Config, args: argparse.Namespace) -> int:
    from .server import serve

    try:
        if args.command == "dev":
            serve.dev(config, args.host, args.port, args.config)
        else:
            serve.start(config, args.host, args.port, args.workers, args.config)
    except BreadError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# -- driving a run -----------------------------------------------------------------------------


def drive(bread: Bread, sink: stdout.StdoutTransport, begin: Begin, interactive: bool) -> int:
    """Pull a run (the sink renders it) until it ends; answer its pauses at the terminal when
    ``interactive``, else report the pause. Returns the exit code."""
    while True:
        result = _pull(begin)
        if result.status != "paused":
            return EXIT_CODES.get(result.status, EXIT_FAILED)
        checkpoint = result.checkpoint or {}
        if not interactive:
            return _report_pause(sink, checkpoint)
        try:
            response = _answer(sink, checkpoint)
        except EOFError:
            _leave_prompt(sink)
            return _report_pause(sink, checkpoint)
        except KeyboardInterrupt:
            _leave_prompt(sink)
            bread.cancel(result.run_id)  # the sink prints its RUN_CANCELLED line
            return EXIT_CANCELLED
        begin = _resumer(bread, checkpoint["checkpointId"], response)


def _pull(begin: Begin) -> RunResult:
    token = CancelToken()
    with _ctrl_c_cancels(token):
        return begin(token).result()


def _resumer(bread: Bread, checkpoint_id: str, response: Any) -> Begin:
    return lambda token: bread.resume(checkpoint_id, response, signal=token)


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


def _report_pause(sink: stdout.StdoutTransport, checkpoint: dict[str, Any]) -> int:
    keys = ("checkpointId", "kind", "toolName", "input")
    example = '{"approved": true}' if checkpoint.get("kind") == "approval" else '{"answer": "..."}'
    # The hint first, flushed: the JSON line ends the whole output, as a terminal shows stdout
    # and stderr together, so whoever reads the last line gets the checkpoint.
    print(
        f"paused: continue with bread-sync resume {checkpoint.get('checkpointId')} '{example}'",
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


def _print_error(bread: Bread, error: BreadError) -> None:
    print(f"error: {error.code}: {error.message}", file=sys.stderr)
    if error.code == AGENT_NOT_FOUND:
        print(f"agents: {', '.join(sorted(bread.agents)) or '(none)'}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

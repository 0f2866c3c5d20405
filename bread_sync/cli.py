"""The ``bread-sync`` command: invoke, resume, chat with and tail agents from a terminal, and
serve them.

In-process, the CLI keeps runs in the config's store, so a run paused here can be resumed by
another process sharing that store (``BREAD_DB``); their live frames reach it on an in-memory
transport that replaces the config's for its own process. With ``--url`` it talks to a running server
instead. The run commands are ``bread_sync.server.commands``, which ``flask bread`` shares.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from .config import LOAD_ERRORS, Config, load_config
from .errors import BreadError
from .runtime import Bread, create_bread
from .server.commands import COMMANDS, CONFIG_HELP, BreadOpener, Command, Group
from .server.console import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .transports import stream

SERVE_EXITS = """\
exit codes:
  0    the server stopped: Ctrl-C, or SIGTERM (start: after its graceful shutdown)
  1    it did not start: the listen rules refuse the address ("error: AUTH_NOT_CONFIGURED:
       ..." on stderr), or the port is in use
  2    usage error: bad arguments, a config that cannot be loaded (one line on stderr)
"""
WORKER_EXITS = """\
exit codes:
  0    the worker stopped: SIGTERM or Ctrl-C, its unfinished runs handed over to another worker
  2    usage error: bad arguments, a config that cannot be loaded, or an executor other than huey
"""
MAIN_EXITS = """\
exit codes: each command's --help lists its own; for every command 2 is a usage error
(bad arguments, a config that cannot be loaded).
"""


class _ConfigNotLoaded(click.ClickException):
    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        print(f"error: cannot load the config: {self.message}", file=sys.stderr)


def _load(name: str | None) -> Config:
    try:
        return load_config(name)
    except LOAD_ERRORS as exc:
        raise _ConfigNotLoaded(str(exc)) from None


def _load_served(name: str | None) -> Config:
    """A config to serve: loaded, and its server settings checked as each worker's app would."""
    from .server.listen import check_settings

    config = _load(name)
    try:
        check_settings(config)
    except ValueError as exc:
        raise _ConfigNotLoaded(str(exc)) from None
    return config


def _runtime(config_name: str | None) -> BreadOpener:
    @contextmanager
    def open_bread() -> Iterator[Bread]:
        config = _load(config_name).model_copy(update={"transport": stream.transport()})
        bread = create_bread(config).start()
        try:
            yield bread
        finally:
            bread.close()

    return BreadOpener(open_bread)


@click.group(cls=Group, epilog=MAIN_EXITS + CONFIG_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c",
    "--config",
    "config_name",
    metavar="MODULE:ATTR",
    help="the config to load (default: $BREAD_CONFIG, else the demo)",
)
@click.pass_context
def commands(ctx: click.Context, config_name: str | None) -> None:
    """Run bread_sync agents from a terminal: their text streams live, tool calls are marked,
    and pauses for a human are answered at the prompt."""
    ctx.obj = _runtime(config_name)
    ctx.meta["config_name"] = config_name


for _command in COMMANDS:
    commands.add_command(_command)


def _own_address(host: str) -> str:
    """How this machine reaches a server listening on ``host``."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _serve(name: str, summary: str, more: str) -> Any:
    @click.command(
        name,
        cls=Command,
        short_help=summary,
        help=f"{summary[0].upper()}{summary[1:]}. {more}",
        epilog=SERVE_EXITS + CONFIG_HELP,
    )
    @click.option("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    @click.option("--port", type=int, default=3000, help="the port (default: 3000)")
    @click.pass_context
    def serve_command(ctx: click.Context, host: str, port: int, workers: int | None = None) -> int:
        from .server import serve

        config_name = ctx.meta.get("config_name")
        config = _load_served(config_name)
        # The demo's word-counter calls this server's own MCP endpoint, wherever it listens.
        os.environ.setdefault("BREAD_DEMO_MCP_URL", f"http://{_own_address(host)}:{port}/mcp")
        try:
            if name == "dev":
                serve.dev(config, host, port, config_name)
            else:
                serve.start(config, host, port, workers, config_name)
        except BreadError as exc:
            print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK

    if name == "start":
        serve_command = click.option(
            "--workers", type=int, default=None, help="gevent workers (default: $WEB_CONCURRENCY or 2)"
        )(serve_command)
    return serve_command


@click.command(
    "worker",
    cls=Command,
    short_help="drive queued runs (BREAD_EXECUTOR=huey)",
    help="Drive the runs the web tier queued (BREAD_EXECUTOR=huey): a Huey consumer with gevent "
    "greenlet workers, which also carries on the runs of workers that died. SIGTERM hands unfinished "
    "runs over to another worker.",
    epilog=WORKER_EXITS + CONFIG_HELP,
)
@click.option("--workers", type=int, default=16, help="greenlets driving runs at once (default: 16)")
@click.pass_context
def worker_command(ctx: click.Context, workers: int) -> int:
    from .server import worker

    worker.patch()
    config = _load(ctx.meta.get("config_name"))
    try:
        worker.work(config, workers)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


commands.add_command(worker_command)

SERVE_COMMANDS = [
    ("dev", "serve the agents over HTTP for development",
     "A threaded development server that streams and reloads on code change."),
    ("start", "serve the agents over HTTP in production",
     "gunicorn with gevent workers sharing the store; each worker builds its own runtime."),
]  # fmt: skip
for _name, _summary, _more in SERVE_COMMANDS:
    commands.add_command(_serve(_name, _summary, _more))


def main(argv: list[str] | None = None) -> int:
    """Run the ``bread-sync`` command line; returns the exit code (see ``bread-sync --help``)."""
    try:
        code = commands.main(args=argv, prog_name="bread-sync", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        return EXIT_CANCELLED
    return code if isinstance(code, int) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

"""What every route that streams a run does, the bread routes and the protocol bridges alike:
start a run off the request and tail it, or follow a run from a client's position, and answer
with a stream response."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from flask import Response, request

from ..engine.opening import opening_at_once
from ..errors import INVALID_REQUEST, RUN_NOT_FOUND, BreadError, internal_error
from ..greenlets import Pacer
from ..runtime import Run
from ..stores import FINISHED
from ..tails import Behind
from ..wire.replay import ShownText
from .guard import authorize_run
from .state import state

log = logging.getLogger("bread_sync.server")

#: The largest position a client may ask for: SQLite's integers are 64-bit.
MAX_SEQ = 2**63 - 1
#: A stream's write joins what its tail brought at once up to this many bytes.
WRITE_BYTES = 65536
_SEQ = re.compile(r"^[0-9]{1,19}$")


def start_run_stream(
    begin: Callable[[Any], Run], *, heartbeat: float | None = None, to_client: bool = True
) -> tuple[Run, Iterator[list[Any] | None]]:
    """Start a run with ``begin(cancel_token)`` (e.g. ``lambda token: bread.run(..., signal=token)``)
    in a slot of this process's runner, and tail it from its first crumb to its end or pause.

    The tail is subscribed before the run's first crumb, and the run is driven in the
    background: a client that goes away stalls and cancels nothing. Yields lists of frames (as
    ``bread.tail(..., batched=True)``), and ``None`` after ``heartbeat`` idle seconds. A run of
    another request that ``begin`` attached to (a retry by run id) must pass the run-ownership
    hook. Raises :class:`~bread_sync.BreadError` when no run could start (``TOO_MANY_RUNS``, or
    whatever ``begin`` raises): nothing was created then.

    The tail is the client's stream (:func:`client_tail`: bounded, its connection cut when it
    falls behind); ``to_client=False`` for a request that reads the run itself to answer once
    it ends, which nothing stalls: a tail with no bound, and no connection to cut."""

    def subscribe(run: Run) -> Iterator[list[Any] | None]:
        # Subscribed before the run's first crumb; a continuation skips the run's past. A run a
        # worker drives (queued) is followed in the log too, as a run of another process is.
        after = 0 if run.attached else run.first_seq - 1
        replay = run.attached or run.queued
        follow = client_tail if to_client else partial(state().bread.tail, batched=True)
        return follow(run.run_id, after, heartbeat=heartbeat, through_pause=False, replay=replay)

    return _start_in_slot(begin, subscribe)


def client_tail(run_id: str, after: int, **opts: Any) -> Iterator[list[Any] | None]:
    """``bread.tail(run_id, after, batched=True, **opts)`` for the stream of this request's
    client: bounded by ``max_stream_backlog``, and cutting the client's connection (where the
    server hands it over, as gunicorn does) once its client fell that far behind. A client
    that stopped reading stops its writer, so only the connection's end can end its stream."""
    current = state()
    return current.bread.tail(
        run_id,
        after,
        batched=True,
        backlog=current.max_stream_backlog,
        # HEAD: no body is written, and its unread tail, closed only when collected, must never
        # shut a connection that serves the client's next request meanwhile.
        connection=None if request.method == "HEAD" else request.environ.get("gunicorn.socket"),
        **opts,
    )


def start_run_detached(begin: Callable[[Any], Run]) -> Run:
    """Start a run as :func:`start_run_stream` does, and return it at once, tailed by nothing:
    it goes on in this process's runner, detached from the request (its connection closing
    changes nothing), and is read back from the store (its record, its log) or cancelled by id.
    For the non-blocking sends and background runs. Raises as :func:`start_run_stream`."""
    return _start_in_slot(begin, lambda run: None)[0]


def _start_in_slot(begin: Callable[[Any], Run], subscribe: Callable[[Run], Any]) -> tuple[Run, Any]:
    with state().runner.slot() as slot:
        with opening_at_once():
            run = begin(slot.token)
        if run.attached:  # another request's run: its caller must own it
            authorize_run(run.run_id)
        subscribed = subscribe(run)
        try:
            run.open()  # its first crumb here, subscribed: the driver's thread takes it from there
        except BaseException:
            if subscribed is not None:
                subscribed.close()  # a run that did not open: its tail waits for nothing
            raise
        slot.drive(run)
    return run, subscribed


def stream_position() -> int:
    """Where a stream of a run starts: ``Last-Event-ID`` wins over ``?after=`` (EventSource
    resends the URL with the header)."""
    raw = _position_given()
    if not _SEQ.match(raw) or int(raw) > MAX_SEQ:
        raise BreadError(INVALID_REQUEST, "Last-Event-ID and ?after= must be a non-negative integer seq")
    return int(raw)


def shown_position() -> ShownText:
    """Where a bridge's resumed stream starts, read as :func:`stream_position` reads it: a seq, or
    the ``<seq>:<characters>:<crc32>`` id of a delta's event (the text past the seq its client holds,
    which the resumed stream skips)."""
    try:
        position = ShownText.from_id(_position_given())
    except ValueError:
        position = None
    if position is None or position.after > MAX_SEQ:
        raise BreadError(INVALID_REQUEST, "Last-Event-ID and ?after= must be a seq, or an id of this stream's events")
    return position


def _position_given() -> str:
    raw = request.headers.get("Last-Event-ID")
    return (request.args.get("after", "0") if raw is None else raw).strip()


def followed_run(run_id: str, after: int, check: Callable[[dict[str, Any]], None] | None = None) -> dict | None:
    """The record of a run a client follows from ``after``, once the run-ownership hook (and
    ``check(record)``, when given) allowed it; None when the run ended with nothing after
    ``after`` (answer 204). ``RUN_NOT_FOUND``, or ``INVALID_REQUEST`` for a position past its log:
    a client only holds seqs the log has (each is committed before it is sent), and a tail past
    the log would wait beyond the run's end for nothing."""
    authorize_run(run_id)
    store = state().bread.store
    record = store.get_run(run_id)
    if record is None:
        raise BreadError(RUN_NOT_FOUND, f"no run {run_id}")
    if check is not None:
        check(record)
    last = store.last_seq(run_id)
    if record["status"] in FINISHED and last <= after:
        return None
    if last < after:
        raise BreadError(INVALID_REQUEST, f"run {run_id} has no seq {after} yet: its log ends at {last}")
    return record


def stream_body(
    lists: Iterator[list[Any] | None],
    encode: Callable[[list[Any]], list[bytes]],
    *,
    heartbeat: bytes,
    failure: Callable[[BreadError], Iterable[bytes]],
    prelude: Iterable[bytes] = (),
    epilogue: Callable[[], Iterable[bytes]] = tuple,
    behind: bytes = b"",
    name: str = "stream",
) -> Iterator[bytes]:
    """A stream's response body over a tail with ``batched=True`` (``start_run_stream``'s frames,
    ``bread.tail``): ``prelude``, then each list ``encode``-d whole (frames, and gaps) and written
    in one chunk, ``heartbeat`` for each idle ``None``, then ``epilogue()``
    once the tail has ended. The run is driven elsewhere; a failure once the stream is open is
    its last chunks, ``failure(error)``. A tail that fell behind its bound (``client_tail``)
    ends with ``behind`` instead of the epilogue (the run has not ended; a client whose stream
    resumes reconnects), which reaches a client only where its connection was not cut (a server
    that hands over no socket).

    A write to a client that keeps up never blocks, so between chunks the writer gives way now
    and then (a replay page or a fast run's frames would otherwise hold the worker)."""
    pacer = Pacer()
    try:
        yield from prelude
        following = iter(lists)
        while True:
            # Called, not looped over: a tail's ``__next__`` (a method) then waits in this frame,
            # and an idle stream's greenlet saves one C-level frame less with its stack.
            try:
                items = following.__next__()
            except StopIteration:
                break
            if items is None:
                yield heartbeat
                continue
            for write in writes(encode(items)):
                yield write
                pacer.pace()
            items = write = None  # sent: not held while the tail waits (an idle stream's memory)
        yield from epilogue()
    except Behind:
        if behind:
            yield behind
    except Exception as exc:  # the stream is open: a failure can only be its last event
        log.exception("%s failed", name)
        yield from failure(internal_error(exc))
    finally:
        close = getattr(lists, "close", None)
        if close is not None:
            close()


def writes(chunks: list[bytes], most: int = WRITE_BYTES) -> Iterator[bytes]:
    """``chunks`` joined into writes of up to ``most`` bytes (a larger chunk goes alone).

    What a tail brought at once goes out in as few writes as that allows: a client that keeps
    up gets each frame alone, as it came; one that fell behind (or a replay page) gets them in
    fewer sends, each a syscall and a turn through gunicorn's writer."""
    if len(chunks) <= 1:
        yield from chunks
        return
    if sum(map(len, chunks)) <= most:  # most takes: one join in C, no size kept per chunk
        yield b"".join(chunks)
        return
    group: list[bytes] = []
    size = 0
    for chunk in chunks:
        if group and size + len(chunk) > most:
            yield b"".join(group)
            group, size = [], 0
        group.append(chunk)
        size += len(chunk)
    if group:
        yield b"".join(group)


def stream_response(body: Iterator[bytes], content_type: str, run_id: str | None) -> Response:
    """A stream's response: never cached, buffered or compressed on the way, and naming its run."""
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Content-Encoding": "identity"}
    if run_id:
        headers["Bread-Run-Id"] = run_id
    metrics = state().bread.metrics
    if metrics is not None:
        body = metrics.streaming(body)
    return Response(body, status=200, content_type=content_type, headers=headers, direct_passthrough=True)

"""Everything sans-IO about a run's stream, both ways: the Bread protocol's frames
(``frames.py``), the SSE and NDJSON codecs (``formats.py``), the stream reader (``reader.py``)
and the rule that merges a log with live frames (``replay.py``).

The rule of this package: no Flask, no sockets, no gevent, no store. Bytes and frames in, bytes
and frames out; the I/O around them lives in ``transports/``, ``tails/``, ``server/`` and
``client/``.
"""

from .formats import (
    NDJSON,
    NDJSON_HEARTBEAT,
    SSE,
    SSE_BEHIND,
    SSE_BEHIND_FOR_GOOD,
    SSE_PING,
    SSE_RETRY_MS,
    LineSplitter,
    NDJSONDecoder,
    SSEDecoder,
    SSEEvent,
    Wire,
    ndjson_crumb,
    ndjson_failure,
    ndjson_gap,
    sse_crumb,
    sse_error,
    sse_gap,
    sse_retry,
)

__all__ = [
    "NDJSON",
    "NDJSON_HEARTBEAT",
    "SSE",
    "SSE_BEHIND",
    "SSE_BEHIND_FOR_GOOD",
    "SSE_PING",
    "SSE_RETRY_MS",
    "LineSplitter",
    "NDJSONDecoder",
    "SSEDecoder",
    "SSEEvent",
    "Wire",
    "ndjson_crumb",
    "ndjson_failure",
    "ndjson_gap",
    "sse_crumb",
    "sse_error",
    "sse_gap",
    "sse_retry",
]

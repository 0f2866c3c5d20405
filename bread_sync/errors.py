"""The one error class of bread_sync, its codes and their HTTP statuses."""

from __future__ import annotations

from typing import Any

AGENT_NOT_FOUND = "AGENT_NOT_FOUND"
PIPELINE_NOT_FOUND = "PIPELINE_NOT_FOUND"
TASK_NOT_FOUND = "TASK_NOT_FOUND"
SKILL_NOT_FOUND = "SKILL_NOT_FOUND"
RUN_NOT_FOUND = "RUN_NOT_FOUND"
#: A client runId that names a run of another agent or pipeline.
RUN_ID_CONFLICT = "RUN_ID_CONFLICT"
LOOP_NOT_FOUND = "LOOP_NOT_FOUND"
TASK_RUN_NOT_FOUND = "TASK_RUN_NOT_FOUND"
FILE_NOT_FOUND = "FILE_NOT_FOUND"
#: A run's input references a file whose media type its model provider does not take.
FILE_NOT_ACCEPTED = "FILE_NOT_ACCEPTED"
NOT_SUPPORTED = "NOT_SUPPORTED"
SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
UNKNOWN_PROVIDER = "UNKNOWN_PROVIDER"
MODEL_ERROR = "MODEL_ERROR"
#: The model provider's kinds of failure a caller reacts to (a fallback chain moves on after the
#: first two); any other is MODEL_ERROR.
MODEL_RATE_LIMITED = "MODEL_RATE_LIMITED"
MODEL_OVERLOADED = "MODEL_OVERLOADED"
MODEL_CONTEXT_TOO_LONG = "MODEL_CONTEXT_TOO_LONG"
MODEL_AUTH_FAILED = "MODEL_AUTH_FAILED"
INVALID_REQUEST = "INVALID_REQUEST"
INPUT_INVALID = "INPUT_INVALID"
OUTPUT_INVALID = "OUTPUT_INVALID"
RUN_CANCELLED = "RUN_CANCELLED"
RUN_INTERRUPTED = "RUN_INTERRUPTED"
CHECKPOINT_NOT_FOUND = "CHECKPOINT_NOT_FOUND"
CHECKPOINT_ALREADY_RESUMED = "CHECKPOINT_ALREADY_RESUMED"
SESSION_BUSY = "SESSION_BUSY"
SEQ_CONFLICT = "SEQ_CONFLICT"
PROTOCOL_DECODE_ERROR = "PROTOCOL_DECODE_ERROR"
BODY_TOO_LARGE = "BODY_TOO_LARGE"
AUTH_NOT_CONFIGURED = "AUTH_NOT_CONFIGURED"
UNAUTHENTICATED = "UNAUTHENTICATED"
BLOB_STORE_NOT_CONFIGURED = "BLOB_STORE_NOT_CONFIGURED"
TOOL_DENIED = "TOOL_DENIED"
TOOL_FAILED = "TOOL_FAILED"
#: A tool call logged without its result when its run was carried on, which was not made again.
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
TOO_MANY_RUNS = "TOO_MANY_RUNS"
STORE_BUSY = "STORE_BUSY"
STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
#: The run queue of the huey executor (its Redis) does not answer: the run is refused unopened.
QUEUE_UNAVAILABLE = "QUEUE_UNAVAILABLE"
REQUEST_TIMEOUT = "REQUEST_TIMEOUT"
RUN_TIMEOUT = "RUN_TIMEOUT"
ROUTE_NOT_FOUND = "ROUTE_NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
FORBIDDEN = "FORBIDDEN"
SERVER_UNREACHABLE = "SERVER_UNREACHABLE"
INTERNAL = "INTERNAL"

#: The HTTP status a non-streaming route answers with for each code.
HTTP_STATUS: dict[str, int] = {
    AGENT_NOT_FOUND: 404,
    PIPELINE_NOT_FOUND: 404,
    TASK_NOT_FOUND: 404,
    SKILL_NOT_FOUND: 404,
    RUN_NOT_FOUND: 404,
    RUN_ID_CONFLICT: 409,
    LOOP_NOT_FOUND: 404,
    TASK_RUN_NOT_FOUND: 404,
    FILE_NOT_FOUND: 404,
    FILE_NOT_ACCEPTED: 400,
    NOT_SUPPORTED: 501,
    SESSION_NOT_FOUND: 404,
    CHECKPOINT_NOT_FOUND: 404,
    INVALID_REQUEST: 400,
    INPUT_INVALID: 400,
    PROTOCOL_DECODE_ERROR: 400,
    SESSION_BUSY: 409,
    CHECKPOINT_ALREADY_RESUMED: 409,
    SEQ_CONFLICT: 409,
    BODY_TOO_LARGE: 413,
    TOO_MANY_RUNS: 503,
    STORE_BUSY: 503,
    STORE_UNAVAILABLE: 503,
    QUEUE_UNAVAILABLE: 503,
    REQUEST_TIMEOUT: 408,
    ROUTE_NOT_FOUND: 404,
    METHOD_NOT_ALLOWED: 405,
    BLOB_STORE_NOT_CONFIGURED: 501,
    UNKNOWN_PROVIDER: 500,
    AUTH_NOT_CONFIGURED: 500,
    UNAUTHENTICATED: 401,
    FORBIDDEN: 403,
    SERVER_UNREACHABLE: 503,
}

#: Every code bread_sync raises, for documentation and tests.
ALL_CODES = tuple(value for name, value in list(globals().items()) if name.isupper() and isinstance(value, str))


class BreadError(Exception):
    """An error with a stable ``code`` that crosses the wire as ``{name, code, message, context}``.

    ``context`` stays server-side on HTTP bodies; crumbs carry it so tools and models can react.
    """

    name = "BreadError"

    def __init__(self, code: str, message: str, context: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.context = context or {}

    @property
    def status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)

    def to_wire(self) -> dict[str, Any]:
        """The flattened form a crumb carries."""
        return {"name": self.name, "code": self.code, "message": self.message, "context": self.context}

    def to_body(self) -> dict[str, Any]:
        """The form an HTTP error body carries: code and message only."""
        return {"error": {"code": self.code, "message": self.message}}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> BreadError:
        return cls(
            str(data.get("code", INTERNAL)),
            str(data.get("message", "")),
            data.get("context") if isinstance(data.get("context"), dict) else None,
        )

    def __repr__(self) -> str:
        return f"BreadError({self.code!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BreadError) and other.to_wire() == self.to_wire()

    __hash__ = Exception.__hash__


def internal_error(exc: BaseException) -> BreadError:
    """What a client sees of an unexpected exception: that it happened, never its class, text or
    trace (those go to the server's log)."""
    if isinstance(exc, BreadError):
        return exc
    return BreadError(INTERNAL, "internal error: the server's log has the details")


def install_hint(extra: str) -> str:
    """How to install ``extra``: by the package's name, or from a clone as the README does."""
    return f'pip install "bread-sync[{extra}]" (in a clone: pip install -e ".[{extra}]")'

"""The wire shapes of the HTTP API, one pydantic model each.

Request bodies and queries are validated through these models, and the OpenAPI document is
generated from them, so a shape is defined once. Response models describe what the JSON routes
answer; a test checks real answers against them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, Field, ValidationError, model_validator

from ..errors import ALL_CODES, INVALID_REQUEST, BreadError
from ..stores import RUN_STATUSES, RunRecord

#: A caller-chosen run id. It goes into a response header and into /runs/<runId> paths: ASCII,
#: no slash, no space.
# Not dots alone: a client resolves /runs/../stream to /stream, so such a run could never be reached.
RunId = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9._:-]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*$",
        min_length=1,
        max_length=200,
        description="1 to 200 of A-Z a-z 0-9 . _ : -, not dots alone",
    ),
]
Tags = dict[str, str]

# -- request bodies ----------------------------------------------------------------------------


class SessionRef(BaseModel):
    """A session: ``{id?, tags?}``, or its id alone as a string."""

    id: str | None = Field(None, description="The session to continue; a new one when absent.")
    tags: Tags | None = Field(None, description="Merged into the session's tags.")

    @model_validator(mode="before")
    @classmethod
    def _from_id(cls, value: Any) -> Any:
        return {"id": value} if isinstance(value, str) else value


class WebhookRef(BaseModel):
    """Where a run's report is POSTed when it pauses for a human and when it ends."""

    url: str = Field(max_length=2048, description="An absolute http(s) url; loopback and private addresses refused.")
    secret: str | None = Field(
        None,
        min_length=1,
        max_length=512,
        description="Signs each POST: Bread-Signature: sha256=<hex HMAC-SHA256 of the body>.",
    )


WEBHOOK_FIELD = Field(None, description="POST the run's report here when it pauses for a human and when it ends.")
#: What a run request's ``after`` means.
AFTER = (
    "An ISO-8601 time with its offset: the run opens now (its start crumb) and waits queued until then"
    " (status queued, notBefore); no worker claims it before."
)


class RunBody(BaseModel):
    """The body of ``POST /agents/<id>/run``."""

    # Required, so that a body without it is refused rather than run with null; null itself is
    # the agent's to accept or refuse.
    input: Any = Field(description="Any JSON (null included), validated by the agent's input schema.")
    session: SessionRef | None = None
    skill: str | None = Field(None, description="A skill of the agent to use for this run.")
    runId: RunId | None = Field(None, description="A retry with the same runId attaches to the run it started.")
    sessionPolicy: Literal["reject", "enqueue", "interrupt"] | None = Field(
        None, description="What to do when another run holds the session (default: the agent's policy)."
    )
    webhook: WebhookRef | None = WEBHOOK_FIELD
    after: AwareDatetime | None = Field(None, description=AFTER)


class PipelineRunBody(BaseModel):
    """The body of ``POST /pipelines/<id>/run``."""

    input: Any = Field(description="Any JSON (null included): the first step's input.")
    session: SessionRef | None = None
    runId: RunId | None = None
    webhook: WebhookRef | None = WEBHOOK_FIELD
    after: AwareDatetime | None = Field(None, description=AFTER)


class ResumeBody(BaseModel):
    """The body of ``POST /resume/<checkpointId>``."""

    response: Any = Field(description='The human\'s answer: {"approved": bool} for an approval.')
    webhook: WebhookRef | None = WEBHOOK_FIELD


class CleanupBody(BaseModel):
    """The body of ``POST /sessions/cleanup``."""

    olderThanDays: Annotated[float, Field(ge=0, strict=True)] | None = None
    tags: Tags | None = None


class StreamTokenBody(BaseModel):
    """The body of ``POST /auth/stream-token``."""

    runId: RunId


# -- queries -----------------------------------------------------------------------------------

Status = Literal[RUN_STATUSES]  # type: ignore[valid-type]


class WaitQuery(BaseModel):
    timeout: Annotated[float, Field(ge=0, le=60)] = Field(
        30, description="Seconds to wait at most (60 at most): 202 with the record when they pass first."
    )


class RunsQuery(BaseModel):
    status: Status | None = None
    agent: str | None = None
    session: str | None = None


class SessionsQuery(BaseModel):
    tag: list[Annotated[str, Field(pattern=r"^[^:]+:")]] = Field(
        default_factory=list, description="key:value; each one narrows the list."
    )


class LoopsQuery(BaseModel):
    session: str | None = None
    agent: str | None = None
    status: str | None = None


class FileQuery(BaseModel):
    """The query of ``POST /files``: the name the file is kept under (shown in its download)."""

    name: Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]*$")] | None = None


class TasksQuery(BaseModel):
    task: str | None = None
    session: str | None = None
    agent: str | None = None
    status: str | None = None
    limit: Annotated[int, Field(ge=0, le=10_000)] | None = None


# -- responses ---------------------------------------------------------------------------------


class AgentSummary(BaseModel):
    id: str
    model: str
    outputFormat: str
    description: str | None


class PipelineSummary(BaseModel):
    id: str
    description: str | None
    steps: list[str] = Field(description="Each step's label: its name, else its agent or task id.")


class AgentDetail(AgentSummary):
    inputSchema: dict[str, Any]
    skills: list[str]


class CheckpointSummary(BaseModel):
    id: str
    kind: Literal["approval", "input"]
    toolName: str
    toolCallId: str
    input: Any
    createdAt: str


class RunDetail(RunRecord):
    checkpoint: CheckpointSummary | None


class RunReport(RunRecord):
    """A run's record with what its end or pause says: what ``GET /runs/<runId>/wait`` answers
    and a run's webhook receives."""

    output: Any = Field(None, description="The run's output, once completed.")
    error: ErrorDetail | None = Field(None, description="Why it failed or was cancelled.")
    checkpoint: dict[str, Any] | None = Field(
        None, description="The pause: checkpointId, kind, toolName, toolCallId, input."
    )
    seq: int | None = Field(None, description="The seq of the crumb that ended or paused the run.")


class StoredFile(BaseModel):
    """The answer to ``POST /files`` (HTTP 201): ``uri`` names the file in a run's input,
    ``{"type": "file", "uri", "mimeType"}``."""

    id: str
    uri: str
    mimeType: str
    size: int


class Accepted(BaseModel):
    """The answer to a run request with ``Prefer: respond-async`` (HTTP 202, ``Location: /runs/<runId>``)."""

    runId: str
    status: Literal["queued"]


class SessionSummary(BaseModel):
    id: str
    tags: Tags
    createdAt: str
    updatedAt: str


class Session(SessionSummary):
    state: dict[str, Any] = Field(
        default_factory=dict, description="The state its last run was given (Bread.run's state=, AG-UI's state)."
    )
    messages: list[dict[str, Any]]


class LoopRecord(BaseModel):
    id: str
    agentId: str
    sessionId: str
    runId: str
    status: str
    iterations: int
    maxIterations: int
    createdAt: str
    updatedAt: str


class LoopIteration(BaseModel):
    index: int
    status: str
    output: Any
    startedAt: str | None
    endedAt: str | None


class LoopDetail(BaseModel):
    loop: LoopRecord
    iterations: list[LoopIteration]


class TaskRunRecord(BaseModel):
    id: str
    taskId: str
    sessionId: str | None
    agentId: str | None
    runId: str | None
    status: str
    model: str | None
    durationMs: float | None
    usage: dict[str, Any] | None
    error: dict[str, Any] | None
    input: Any
    output: Any
    createdAt: str
    updatedAt: str


class Ok(BaseModel):
    ok: Literal[True]


class Deleted(BaseModel):
    deleted: int


class Cancelled(BaseModel):
    ok: Literal[True]
    runId: str


class StreamToken(BaseModel):
    token: str = Field(description="Send it as ?token= on GET /runs/<runId>/stream, e.g. from an EventSource.")
    runId: str
    expiresIn: int = Field(description="Seconds until the token can no longer open a stream.")


class ErrorDetail(BaseModel):
    code: Literal[ALL_CODES]  # type: ignore[valid-type]
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class ForbiddenBody(BaseModel):
    error: Literal["Forbidden"]


# -- validation --------------------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: Any) -> M:
    """``data`` as a ``model``, or ``INVALID_REQUEST`` naming each problem (never echoing input)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BreadError(INVALID_REQUEST, "; ".join(_problem(e) for e in exc.errors(include_url=False))) from None


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]

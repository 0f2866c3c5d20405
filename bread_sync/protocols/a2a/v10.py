"""A2A v1.0 (JSON-RPC): the shapes of ``a2a.types``, the a2a-sdk's messages compiled from the
v1.0 ``a2a.proto``, written as ProtoJSON (``google.protobuf.json_format``): camelCase fields,
``TASK_STATE_*`` and ``ROLE_*`` enums, a part told by which member it has, no ``kind``, no
``final``."""

from __future__ import annotations

from typing import Any

from a2a import types as t
from google.protobuf import json_format, struct_pb2

from .card import MODES, CardFacts
from .translator import ArtifactChunk, Event, Message, Status, TextChunk

VERSION = "1.0"
METHODS = {
    "SendMessage": "send",
    "SendStreamingMessage": "stream",
    "GetTask": "get",
    "CancelTask": "cancel",
    "SubscribeToTask": "resubscribe",
    "ListTasks": "list",
    "CreateTaskPushNotificationConfig": "push_set",
    "GetTaskPushNotificationConfig": "push_get",
    "ListTaskPushNotificationConfigs": "push_list",
    "DeleteTaskPushNotificationConfig": "push_delete",
    "GetExtendedAgentCard": "extended_card",
}
#: Deleting a config that is not there succeeds (spec 3.1.10: Delete MUST be idempotent).
IDEMPOTENT_DELETE = True
#: Where a part's inline bytes are, in the raw JSON: ``part["raw"]``.
INLINE_BYTES = ("raw",)
#: v1.0 ends a stream by closing it: its status updates have no ``final``.
HAS_FINAL = False
#: Whether an error carries its ``google.rpc.ErrorInfo`` in ``data`` (v1.0 spec 9.5).
ERROR_DETAILS = True
#: v1.0 answers every error as JSON, a streaming method's too (its kit and clients take it).
ERRORS_AS_EVENTS = frozenset()


def state(name: str) -> int:
    """A task state (v0.3's spelling, as the translator's) as the v1.0 enum."""
    return t.TaskState.Value("TASK_STATE_" + name.upper().replace("-", "_"))


def state_name(value: int) -> str:
    """The v1.0 enum back in the translator's spelling (TASK_STATE_INPUT_REQUIRED: input-required)."""
    return t.TaskState.Name(value).removeprefix("TASK_STATE_").lower().replace("_", "-")


def _dump(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def _part(part: dict[str, Any]) -> t.Part:
    if "text" in part:
        metadata = part.get("metadata")
        return t.Part(
            text=part["text"],
            metadata=None if metadata is None else json_format.ParseDict(metadata, struct_pb2.Struct()),
        )
    if "file" in part:
        file = part["file"]
        return t.Part(url=file["uri"], media_type=file.get("mimeType"), filename=file.get("name"))
    return t.Part(data=json_format.ParseDict(part["data"], struct_pb2.Value()))


def _message(task_id: str, context_id: str, message: Message) -> t.Message:
    return t.Message(
        role=t.Role.Value("ROLE_" + message.role.upper()),
        parts=[_part(p) for p in message.parts],
        task_id=task_id,
        context_id=context_id,
        message_id=message.message_id,
    )


def _status(task_id: str, context_id: str, status: Status) -> t.TaskStatus:
    message = None
    if status.parts:
        said = Message("agent", status.parts, status.message_id or f"{task_id}-{status.state}")
        message = _message(task_id, context_id, said)
    return t.TaskStatus(state=state(status.state), message=message)


def _artifact(chunk: ArtifactChunk) -> t.Artifact:
    return t.Artifact(artifact_id=chunk.artifact_id, parts=[_part(p) for p in chunk.parts])


def task(
    task_id: str,
    context_id: str,
    status: Status,
    artifacts: list[ArtifactChunk] = (),
    history: list[Message] = (),
) -> dict[str, Any]:
    """A Task: what get and cancel answer (bare), send and a stream wrap in ``{"task"}``."""
    return _dump(
        t.Task(
            id=task_id,
            context_id=context_id,
            status=_status(task_id, context_id, status),
            artifacts=[_artifact(a) for a in artifacts],
            history=[_message(task_id, context_id, m) for m in history],
        )
    )


def task_item(task_: dict[str, Any]) -> dict[str, Any]:
    """A Task as a stream item and as SendMessage's result: ``{"task": ...}``."""
    return {"task": task_}


send_result = task_item


def event(task_id: str, context_id: str, ev: Event) -> dict[str, Any]:
    """A stream item: ``{"statusUpdate"}`` or ``{"artifactUpdate"}``."""
    if isinstance(ev, Status):
        update = t.TaskStatusUpdateEvent(
            task_id=task_id, context_id=context_id, status=_status(task_id, context_id, ev)
        )
        return _dump(t.StreamResponse(status_update=update))
    if isinstance(ev, TextChunk):
        ev = ArtifactChunk(ev.artifact_id, [{"text": ev.text}], ev.append)
    update = t.TaskArtifactUpdateEvent(
        task_id=task_id, context_id=context_id, artifact=_artifact(ev), append=ev.append, last_chunk=ev.last_chunk
    )
    return _dump(t.StreamResponse(artifact_update=update))


def read_message(params: Any) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """The message of SendMessage or SendStreamingMessage params, as ``v03.read_message``; one
    without ``messageId`` or ``role`` is a ValueError. Unknown fields are ignored, as the SDK's
    own server does (a stray ``kind`` is not an error)."""
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    try:
        request = json_format.ParseDict(params, t.SendMessageRequest(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from None
    if not request.HasField("message"):
        raise ValueError("params.message is required")
    # REQUIRED in a2a.proto; ProtoJSON reads a missing one as its default (spec 5.7: reject).
    if not request.message.message_id:
        raise ValueError("params.message.messageId is required")
    if request.message.role == t.Role.ROLE_UNSPECIFIED:
        raise ValueError("params.message.role is required: ROLE_USER or ROLE_AGENT")
    parts = []
    for part in request.message.parts:
        content = part.WhichOneof("content")
        if content == "text":
            parts.append({"text": part.text})
        elif content == "data":
            parts.append({"data": json_format.MessageToDict(part.data)})
        elif content in ("url", "raw"):
            source = {"uri": part.url} if content == "url" else {"bytes": part.raw}
            parts.append({"file": {**source, "mimeType": part.media_type or None, "name": part.filename or None}})
        else:
            raise ValueError("a part must hold one of text, raw, url or data")
    message = request.message
    return parts, message.task_id or None, message.context_id or None


def card(facts: CardFacts) -> dict[str, Any]:
    """The v1.0 Agent Card: ``supportedInterfaces`` (JSON-RPC, 1.0) instead of a flat url."""
    return _dump(
        t.AgentCard(
            name=facts.name,
            description=facts.description,
            version=facts.version,
            supported_interfaces=[t.AgentInterface(url=facts.url, protocol_binding="JSONRPC", protocol_version="1.0")],
            capabilities=t.AgentCapabilities(
                streaming=True, push_notifications=facts.push_notifications, extended_agent_card=facts.extended_card
            ),
            default_input_modes=MODES,
            default_output_modes=MODES,
            skills=[t.AgentSkill(**skill) for skill in facts.skills],
        )
    )


def read_list(params: Any) -> tuple[str | None, str | None, int, str, int | None, bool]:
    """ListTasks params: ``(contextId, state, pageSize, pageToken, historyLength,
    includeArtifacts)``, the state in the translator's spelling, historyLength None when not
    given; ValueError names what is wrong."""
    try:
        query = json_format.ParseDict(params or {}, t.ListTasksRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    wanted = state_name(query.status) if query.status else None
    history = query.history_length if query.HasField("history_length") else None
    return query.context_id or None, wanted, query.page_size, query.page_token, history, query.include_artifacts


def read_blocking(params: Any) -> bool:
    """Whether SendMessage waits for the run's end or pause: unless
    ``configuration.returnImmediately`` (spec 3.2.2). ValueError names what is wrong."""
    if not isinstance(params, dict):
        return True  # read_message says what is wrong
    try:
        request = json_format.ParseDict(params, t.SendMessageRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return not request.configuration.return_immediately


def read_history_length(params: Any) -> int | None:
    """GetTask's ``historyLength``, None when not given; ValueError when it is no int32."""
    try:
        query = json_format.ParseDict(params, t.GetTaskRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return query.history_length if query.HasField("history_length") else None


def task_list(tasks: list[dict[str, Any]], next_page_token: str, page_size: int, total: int) -> dict[str, Any]:
    """ListTasks' result, written as the SDK's server writes it: each of its fields, an empty one
    too (``nextPageToken`` is REQUIRED, and empty on the last page); each task as GetTask writes
    it (no empty fields, so no artifacts or history when none were asked for)."""
    listed = t.ListTasksResponse(next_page_token=next_page_token, page_size=page_size, total_size=total)
    return {**json_format.MessageToDict(listed, always_print_fields_with_no_presence=True), "tasks": tasks}


def read_push_config(params: Any) -> dict[str, Any]:
    """CreateTaskPushNotificationConfig params (a TaskPushNotificationConfig) as ``{taskId, id?,
    url, token?, authentication?}``; ValueError names what is wrong."""
    try:
        given = json_format.ParseDict(params or {}, t.TaskPushNotificationConfig(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return {"taskId": given.task_id, **_push_target(given)}


def read_push_ref(params: Any) -> tuple[str, str | None]:
    """A push config's get, list or delete params: ``(taskId, id)``, read as ProtoJSON as
    Create's are (so ``task_id`` too); ValueError names what is wrong."""
    if not isinstance(params, dict):
        raise ValueError("params must be an object with the task's id")
    try:
        # Get's request has the fields of all three (List's page fields are ignored: one page).
        ref = json_format.ParseDict(params, t.GetTaskPushNotificationConfigRequest(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from None
    if not ref.task_id:
        raise ValueError("params.taskId must be the task's id")
    return ref.task_id, ref.id or None


def read_send_push(params: Any) -> dict[str, Any] | None:
    """The push config a SendMessage names (``configuration.taskPushNotificationConfig``)."""
    request = json_format.ParseDict(params, t.SendMessageRequest(), ignore_unknown_fields=True)
    if not request.configuration.HasField("task_push_notification_config"):
        return None
    return _push_target(request.configuration.task_push_notification_config)


def _push_target(config: t.TaskPushNotificationConfig) -> dict[str, Any]:
    auth = config.authentication if config.HasField("authentication") else None
    scheme = {"scheme": auth.scheme, "credentials": auth.credentials or None} if auth and auth.scheme else None
    return {"id": config.id or None, "url": config.url, "token": config.token or None, "authentication": scheme}


def push_config(config: dict[str, Any]) -> dict[str, Any]:
    """A stored subscription as a TaskPushNotificationConfig."""
    auth = config.get("authentication")
    info = t.AuthenticationInfo(scheme=auth["scheme"], credentials=auth.get("credentials")) if auth else None
    return _dump(
        t.TaskPushNotificationConfig(
            id=config["id"], task_id=config["taskId"], url=config["url"], token=config.get("token"), authentication=info
        )
    )


def push_list(configs: list[dict[str, Any]]) -> dict[str, Any]:
    """ListTaskPushNotificationConfigs' result: each config as Get writes it (no empty fields),
    and ``nextPageToken``, empty: there is one page."""
    return {"configs": [push_config(config) for config in configs], "nextPageToken": ""}

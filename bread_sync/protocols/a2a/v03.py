"""A2A v0.3 (JSON-RPC): the shapes of ``a2a.compat.v0_3.types``, the a2a-sdk's pydantic models
generated from the v0.3 JSON Schema, and how a request's message reads."""

from __future__ import annotations

from typing import Any

from a2a.compat.v0_3 import types as t
from pydantic import ValidationError

from .card import MODES, CardFacts
from .rpc import push_ref
from .translator import ArtifactChunk, Event, Message, Status, TextChunk

VERSION = "0.3"
METHODS = {
    "message/send": "send",
    "message/stream": "stream",
    "tasks/get": "get",
    "tasks/cancel": "cancel",
    "tasks/resubscribe": "resubscribe",
    "tasks/pushNotificationConfig/set": "push_set",
    "tasks/pushNotificationConfig/get": "push_get",
    "tasks/pushNotificationConfig/list": "push_list",
    "tasks/pushNotificationConfig/delete": "push_delete",
    "agent/getAuthenticatedExtendedCard": "extended_card",
}
#: Deleting a config that is not there is -32001 (v0.3 says nothing of a second delete).
IDEMPOTENT_DELETE = False
#: Where a part's inline bytes are, in the raw JSON: ``part["file"]["bytes"]``.
INLINE_BYTES = ("file", "bytes")
#: v0.3's streaming status updates say whether they end the stream.
HAS_FINAL = True
#: Whether an error carries its ``google.rpc.ErrorInfo`` in ``data`` (v1.0 spec 9.5).
ERROR_DETAILS = False
#: The streaming methods whose errors are an SSE stream of one event (spec v0.3 7.2, 7.9: its
#: clients read their answer as a stream).
ERRORS_AS_EVENTS = frozenset({"stream", "resubscribe"})


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _part(part: dict[str, Any]) -> t.Part:
    if "text" in part:
        return t.Part(root=t.TextPart(text=part["text"], metadata=part.get("metadata")))
    if "file" in part:
        file = part["file"]
        return t.Part(
            root=t.FilePart(file=t.FileWithUri(uri=file["uri"], mime_type=file.get("mimeType"), name=file.get("name")))
        )
    data = part["data"]
    # v0.3's data part holds an object: any other JSON value goes in as {"value": ...}.
    return t.Part(root=t.DataPart(data=data if isinstance(data, dict) else {"value": data}))


def _message(task_id: str, context_id: str, status: Status) -> t.Message | None:
    if not status.parts:
        return None
    return t.Message(
        role=t.Role.agent,
        parts=[_part(p) for p in status.parts],
        task_id=task_id,
        context_id=context_id,
        message_id=status.message_id or f"{task_id}-{status.state}",
    )


def _status(task_id: str, context_id: str, status: Status) -> t.TaskStatus:
    return t.TaskStatus(state=t.TaskState(status.state), message=_message(task_id, context_id, status))


def _artifact(chunk: ArtifactChunk) -> t.Artifact:
    return t.Artifact(artifact_id=chunk.artifact_id, parts=[_part(p) for p in chunk.parts])


def task(
    task_id: str,
    context_id: str,
    status: Status,
    artifacts: list[ArtifactChunk] = (),
    history: list[Message] = (),
) -> dict[str, Any]:
    """A Task (``kind: "task"``): what get, cancel and send answer, and a stream opens with."""
    return _dump(
        t.Task(
            id=task_id,
            context_id=context_id,
            status=_status(task_id, context_id, status),
            artifacts=[_artifact(a) for a in artifacts] or None,
            history=[_history_message(task_id, context_id, m) for m in history] or None,
        )
    )


def _history_message(task_id: str, context_id: str, message: Message) -> t.Message:
    return t.Message(
        role=t.Role(message.role),
        parts=[_part(p) for p in message.parts],
        task_id=task_id,
        context_id=context_id,
        message_id=message.message_id,
    )


def task_item(task_: dict[str, Any]) -> dict[str, Any]:
    """A Task as a stream item and as message/send's result: itself."""
    return task_


send_result = task_item


def event(task_id: str, context_id: str, ev: Event) -> dict[str, Any]:
    """A stream item: a ``status-update`` or an ``artifact-update``."""
    if isinstance(ev, Status):
        return _dump(
            t.TaskStatusUpdateEvent(
                task_id=task_id, context_id=context_id, status=_status(task_id, context_id, ev), final=ev.final
            )
        )
    if isinstance(ev, TextChunk):
        ev = ArtifactChunk(ev.artifact_id, [{"text": ev.text}], ev.append)
    return _dump(
        t.TaskArtifactUpdateEvent(
            task_id=task_id, context_id=context_id, artifact=_artifact(ev), append=ev.append, last_chunk=ev.last_chunk
        )
    )


def read_message(params: Any) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """The message of message/send or message/stream params: its parts (neutral: ``{"text"}``,
    ``{"data"}``, ``{"file": {"uri" | "bytes", "mimeType"?, "name"?}}``), its taskId and
    contextId. ValueError names what is wrong: a part without a known ``kind`` too (the models
    would take it as text)."""
    _check_part_kinds(params)
    try:
        message = t.MessageSendParams.model_validate(params).message
    except ValidationError as exc:
        raise ValueError(_problems(exc)) from None
    parts = []
    for part in message.parts:
        root = part.root
        if isinstance(root, t.TextPart):
            parts.append({"text": root.text})
        elif isinstance(root, t.DataPart):
            parts.append({"data": root.data})
        else:
            file = root.file
            source = {"uri": file.uri} if isinstance(file, t.FileWithUri) else {"bytes": file.bytes}
            parts.append({"file": {**source, "mimeType": file.mime_type, "name": file.name}})
    return parts, message.task_id, message.context_id


#: The kinds a v0.3 part may have: its ``kind`` is REQUIRED in the v0.3 JSON Schema.
PART_KINDS = ("text", "file", "data")


def _check_part_kinds(params: Any) -> None:
    message = params.get("message") if isinstance(params, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    for n, part in enumerate(parts if isinstance(parts, list) else ()):
        if not isinstance(part, dict) or part.get("kind") not in PART_KINDS:
            raise ValueError(f"message.parts.{n}.kind must be one of {', '.join(PART_KINDS)}")


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors()[:3])


def card(facts: CardFacts) -> dict[str, Any]:
    """The v0.3 Agent Card: a flat ``url``, ``protocolVersion`` 0.3.0, JSON-RPC preferred."""
    return _dump(
        t.AgentCard(
            name=facts.name,
            description=facts.description,
            url=facts.url,
            version=facts.version,
            protocol_version="0.3.0",
            preferred_transport="JSONRPC",
            capabilities=t.AgentCapabilities(
                streaming=True, push_notifications=facts.push_notifications, state_transition_history=False
            ),
            default_input_modes=MODES,
            default_output_modes=MODES,
            skills=[t.AgentSkill(**skill) for skill in facts.skills],
            supports_authenticated_extended_card=facts.extended_card,
        )
    )


def read_push_config(params: Any) -> dict[str, Any]:
    """tasks/pushNotificationConfig/set params as ``{taskId, id?, url, token?, authentication?}``
    (``authentication``: ``{scheme, credentials?}``); ValueError names what is wrong."""
    try:
        given = t.TaskPushNotificationConfig.model_validate(params)
    except ValidationError as exc:
        raise ValueError(_problems(exc)) from None
    return {"taskId": given.task_id, **_push_target(given.push_notification_config)}


def read_blocking(params: Any) -> bool:
    """Whether message/send waits for the run's end or pause: unless ``configuration.blocking``
    is false. ValueError names what is wrong."""
    configuration = params.get("configuration") if isinstance(params, dict) else None
    blocking = configuration.get("blocking") if isinstance(configuration, dict) else None
    if blocking is not None and not isinstance(blocking, bool):
        raise ValueError("params.configuration.blocking must be a boolean")
    return blocking is not False


def read_history_length(params: Any) -> int | None:
    """tasks/get's ``historyLength``, None when not given; ValueError when not an integer."""
    given = params.get("historyLength") if isinstance(params, dict) else None
    if given is not None and (isinstance(given, bool) or not isinstance(given, int)):
        raise ValueError("params.historyLength must be an integer")
    return given


def read_push_ref(params: Any) -> tuple[str, str | None]:
    """A push config's get, list or delete params: ``(id, pushNotificationConfigId)``."""
    return push_ref(params, "id", "pushNotificationConfigId")


def read_send_push(params: Any) -> dict[str, Any] | None:
    """The push config a message/send or message/stream names (``configuration.pushNotificationConfig``)."""
    configuration = t.MessageSendParams.model_validate(params).configuration
    config = configuration.push_notification_config if configuration else None
    return None if config is None else _push_target(config)


def _push_target(config: t.PushNotificationConfig) -> dict[str, Any]:
    auth = config.authentication
    scheme = {"scheme": auth.schemes[0], "credentials": auth.credentials} if auth and auth.schemes else None
    return {"id": config.id, "url": config.url, "token": config.token, "authentication": scheme}


def push_config(config: dict[str, Any]) -> dict[str, Any]:
    """A stored subscription as a TaskPushNotificationConfig."""
    auth = config.get("authentication")
    info = None
    if auth:
        info = t.PushNotificationAuthenticationInfo(schemes=[auth["scheme"]], credentials=auth.get("credentials"))
    target = t.PushNotificationConfig(
        id=config["id"], url=config["url"], token=config.get("token"), authentication=info
    )
    return _dump(t.TaskPushNotificationConfig(task_id=config["taskId"], push_notification_config=target))


def push_list(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [push_config(config) for config in configs]

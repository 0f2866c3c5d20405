"""The OpenAPI 3.1 document of the API an app serves, made from its routes and from the models
of :mod:`.schemas` that those routes validate with; served at ``GET /openapi.json``.

Every bread route of the app is in it, with the methods it takes, plugin routes included (a
route whose action is not one of ours is described as answering JSON, and, when it takes a body,
400 and 413).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any, get_args

from flask import Flask, current_app, jsonify
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from . import schemas as s
from .actions import HEALTH_ENDPOINT, HTTP_ACTIONS, actions_of, statuses_of
from .auth import AUTH_ACTIONS
from .state import state

STREAM, FILE, DOCUMENT, PAGE, METRICS = "stream", "file", "document", "page", "metrics"
#: A raw body: the bytes of a file, under its own Content-Type.
BYTES = {"required": True, "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}}
_REF = "#/components/schemas/{model}"
_PARAM = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
_STATUS_TEXT = {
    400: "The request cannot be read",
    401: "No valid credential",
    404: "Not found",
    413: "The body is over the limit",
    500: "Misconfigured, or a bug",
    501: "Not supported here",
}


@dataclass(frozen=True)
class Op:
    summary: str
    answer: Any = None  # a model, list[model], STREAM, FILE or DOCUMENT
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()


A = HTTP_ACTIONS
_BODY_ERRORS = (400, 413)
OPERATIONS: dict[str, Op] = {
    A.agent_list: Op("List the agents", list[s.AgentSummary]),
    A.agent_read: Op("Describe an agent", s.AgentDetail, errors=(404,)),
    A.pipeline_list: Op("List the pipelines", list[s.PipelineSummary]),
    A.run_start: Op("Run an agent, streaming its crumbs", STREAM, s.RunBody, errors=_BODY_ERRORS),
    A.pipeline_start: Op("Run a pipeline, streaming its crumbs", STREAM, s.PipelineRunBody, errors=_BODY_ERRORS),
    A.run_resume: Op("Resume a paused run, streaming its continuation", STREAM, s.ResumeBody, errors=_BODY_ERRORS),
    A.run_stream: Op("Tail a run: its log after a position, then live", STREAM, errors=(400, 404)),
    A.run_cancel: Op("Cancel a live or paused run", s.Cancelled, errors=(404,)),
    A.run_list: Op("List runs", list[s.RunRecord], query=s.RunsQuery, errors=(400,)),
    A.run_read: Op("Read a run and its pending checkpoint", s.RunDetail, errors=(404,)),
    A.session_list: Op("List sessions", list[s.SessionSummary], query=s.SessionsQuery, errors=(400,)),
    A.session_read: Op("Read a session and its messages", s.Session, errors=(404,)),
    A.session_delete: Op("Delete a session", s.Ok),
    A.session_cleanup: Op("Delete sessions in bulk", s.Deleted, s.CleanupBody, errors=_BODY_ERRORS),
    A.loop_list: Op("List loops", list[s.LoopRecord], query=s.LoopsQuery),
    A.loop_read: Op("Read a loop and its iterations", s.LoopDetail, errors=(404,)),
    A.task_list: Op("List task runs, newest first", list[s.TaskRunRecord], query=s.TasksQuery, errors=(400, 501)),
    A.task_read: Op("Read a task run", s.TaskRunRecord, errors=(404, 501)),
    A.file_read: Op("Download a stored file", FILE, errors=(404, 501)),
    A.file_write: Op("Upload a file to reference in a run's input (201)", s.StoredFile, query=s.FileQuery,
                     errors=(*_BODY_ERRORS, 501)),
    A.openapi_read: Op("This document", DOCUMENT),
    A.metrics_read: Op("Prometheus metrics, every worker's (served while metrics are on)", METRICS),
    A.playground_read: Op("The playground page's own files (HTML, CSS, script): no credential", PAGE),
    AUTH_ACTIONS.stream_token: Op("Mint a token that opens one run's stream", s.StreamToken, s.StreamTokenBody,
                                  errors=(*_BODY_ERRORS, 500)),
}  # fmt: skip
#: ``GET /runs/<runId>/wait`` reads a run (its action is ``run.read``), and answers its report.
_WAIT = Op("Wait for a run to end or pause, and read its report", s.RunReport, query=s.WaitQuery, errors=(400, 404))
#: The routes that start a run, which ``Prefer: respond-async`` answers with 202.
_BACKGROUND = (A.run_start, A.pipeline_start, A.run_resume)
_PREFER_PARAM = {
    "name": "Prefer",
    "in": "header",
    "schema": {"type": "string"},
    "description": "respond-async (RFC 7240): answer 202 at once; the run goes on in the background.",
}
_PAGE_MEDIA = ("text/html", "text/css", "text/javascript")
_HEALTH = Op("Liveness probe: any Host, no credential", s.Ok)
_WIRES = {
    "text/event-stream": 'Server-Sent Events: `id: <seq>` and `data: {"type", "payload"}` per crumb.',
    "application/x-ndjson": 'One Bread protocol CrumbFrame per line: `{"v":1,"type":"crumb",...}`.',
}
_STREAM_PARAMS = [
    {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
     "description": "Replay the log after this seq (Last-Event-ID wins)."},
    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"}},
]  # fmt: skip
_CHALLENGE = 'Bearer realm="bread_sync", with error="invalid_token" when a credential was sent.'
_TOKEN_PARAM = {
    "name": "token",
    "in": "query",
    "schema": {"type": "string"},
    "description": "A stream token from POST /auth/stream-token, for an EventSource.",
}


def serve() -> Any:
    current = state()
    if current.openapi is None:
        current.openapi = document(current_app)
    return jsonify(current.openapi)


def document(app: Flask) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the bread routes ``app`` serves."""
    current = app.extensions["bread_sync"]
    actions, statuses = actions_of(app), statuses_of(app)
    tokens = AUTH_ACTIONS.stream_token in actions.values()
    media = current.bread.transport.wire.content_type.split(";")[0]
    paths: dict[str, dict[str, Any]] = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("bread_sync."):
            methods = served_methods(rule)
            for method in methods:
                op = _operation(
                    rule,
                    method,
                    actions.get(rule.endpoint),
                    len(methods),
                    media,
                    current.auth,
                    tokens,
                    statuses.get(rule.endpoint, ()),
                )
                paths.setdefault(_PARAM.sub(r"{\1}", rule.rule), {})[method.lower()] = op
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "bread_sync", "version": _version()},
        "paths": paths,
        "components": {"schemas": _schemas()[1]},
    }
    if current.auth:
        doc["components"]["securitySchemes"] = _security_schemes(tokens)
        doc["security"] = [{"bearer": []}]
    return doc


def served_methods(rule: Any) -> list[str]:
    """A rule's methods, less HEAD beside GET and the OPTIONS Flask adds by itself."""
    methods = set(rule.methods or ())
    if "GET" in methods:
        methods.discard("HEAD")
    if getattr(rule, "provide_automatic_options", False):
        methods.discard("OPTIONS")
    return sorted(methods)


def _operation(
    rule: Any, method: str, action: str | None, count: int, media: str, auth: bool, tokens: bool, more: tuple[int, ...]
) -> dict:
    health = rule.endpoint == HEALTH_ENDPOINT
    op = _HEALTH if health else OPERATIONS.get(action or "") or _plugin_op(action, method, more)
    if action == A.run_read and rule.rule.endswith("/wait"):
        op, more = _WAIT, ()  # its 202 has a body: _answer describes it
    name = action or rule.endpoint
    if action == A.playground_read:  # one action for several files: operation ids are unique
        name = f"{action}.{rule.rule.rpartition('/')[2] or 'index.html'}"
    elif op is _WAIT:  # the second route of run.read
        name = f"{action}.wait"
    out: dict[str, Any] = {
        "operationId": name if count == 1 else f"{name}.{method.lower()}",
        "summary": op.summary,
        "x-bread-action": action,
        "parameters": _parameters(rule, op, action, tokens),
        "responses": {
            **_answer(op, action, media),
            **_accepted(op, action),
            **_successes(more),
            **_errors(op, auth and action != A.playground_read, health),
        },
    }
    if action is None and not health:
        out["description"] = "Registered without register_http_route: 403 while auth is on."
    if op.body is not None:
        out["requestBody"] = {"required": False, "content": {"application/json": {"schema": _ref(op.body, "in")}}}
    elif action == A.file_write:
        out["requestBody"] = BYTES
    if health or action == A.playground_read:
        out["security"] = []
    elif action == A.run_stream and auth and tokens:
        out["security"] = [{"bearer": []}, {"streamToken": []}]
    return out


def _parameters(rule: Any, op: Op, action: str | None, tokens: bool) -> list[dict[str, Any]]:
    params = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in sorted(rule.arguments)]
    if op.query is not None:
        properties = op.query.model_json_schema()["properties"]
        params += [_query_param(name, properties[name]) for name in op.query.model_fields]
    if action == A.run_stream:
        params += _STREAM_PARAMS + ([_TOKEN_PARAM] if tokens else [])
    if action in _BACKGROUND:
        params.append(_PREFER_PARAM)
    return params


def _query_param(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    # A query param is absent rather than null: keep the non-null branch of an optional field.
    variants = [v for v in schema.get("anyOf", [schema]) if v.get("type") != "null"]
    param = {"name": name, "in": "query", "schema": variants[0]}
    if "description" in schema:
        param["description"] = schema["description"]
    return param


def _plugin_op(action: str | None, method: str, more: tuple[int, ...] = ()) -> Op:
    # The guard reads every body of a plugin route too: one may be unreadable (400) or too large (413).
    errors = _BODY_ERRORS if method in ("POST", "PUT", "PATCH", "DELETE") else ()
    return Op(f"Plugin route {action or '(unnamed)'}", errors=(*errors, *(s for s in more if s >= 400)))


def _successes(statuses: tuple[int, ...]) -> dict[str, Any]:
    return {str(status): {"description": "No content"} for status in statuses if status < 400}


def _answer(op: Op, action: str | None, media: str) -> dict[str, Any]:
    if op.answer == STREAM:
        headers = {"Bread-Run-Id": {"schema": {"type": "string"}, "description": "The run this stream carries."}}
        ok = {
            "description": _WIRES.get(media, media) + " A failure after the request was read ends the stream at 200.",
            "headers": headers,
            "content": {media: {"schema": {"type": "string"}}},
        }
        if action != A.run_stream:
            return {"200": ok}
        # An EventSource's Accept gets SSE whatever the configured wire (docs/http.md).
        ok["content"]["text/event-stream"] = {"schema": {"type": "string"}}
        return {"200": ok, "204": {"description": "The run is finished and nothing lies after the position."}}
    if op.answer == FILE:
        return {"200": {"description": "The file, with its own Content-Type.", "content": {"*/*": {}}}}
    if op.answer == PAGE:
        return {"200": {"description": "The file", "content": {m: {} for m in _PAGE_MEDIA}}}
    if op.answer == METRICS:
        text = {"text/plain": {"schema": {"type": "string"}}}
        return {"200": {"description": "Prometheus' text format", "content": text}}
    if op.answer == DOCUMENT:
        return {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}}
    schema = _json_schema(op.answer) if op.answer is not None else {}
    status = "201" if action == A.file_write else "200"
    return {status: {"description": "OK", "content": {"application/json": {"schema": schema}}}}


def _accepted(op: Op, action: str | None) -> dict[str, Any]:
    """The 202 of a background run's start, and of a wait whose timeout passed first."""
    if op is _WAIT:
        return {"202": {"description": "The timeout passed first: the run as it is", "content": _json(s.RunReport)}}
    if action not in _BACKGROUND:
        return {}
    headers = {"Location": {"schema": {"type": "string"}, "description": "/runs/<runId>: the run's record."}}
    return {"202": {"description": "Prefer: respond-async: the run started", "headers": headers,
                    "content": _json(s.Accepted)}}  # fmt: skip


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(model)}}


def _errors(op: Op, auth: bool, health: bool) -> dict[str, Any]:
    if health:
        return {}
    statuses = sorted({*op.errors, 500, *((401,) if auth else ())})
    out = {str(status): _error(_STATUS_TEXT.get(status, "An error")) for status in statuses}
    if auth:
        out["401"]["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}, "description": _CHALLENGE}}
    forbidden = "Not granted (authorize, authorize_stream)" if auth else "A non-loopback Host, or not granted"
    out["403"] = {"description": forbidden, "content": {"application/json": {"schema": _ref(s.ForbiddenBody)}}}
    return dict(sorted(out.items()))


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(s.ErrorBody)}}}


def _json_schema(answer: Any) -> dict[str, Any]:
    if getattr(answer, "__origin__", None) is list:
        return {"type": "array", "items": _ref(get_args(answer)[0])}
    return _ref(answer)


def _ref(model: type[BaseModel], mode: str = "out") -> dict[str, Any]:
    return _schemas()[0][(model, "validation" if mode == "in" else "serialization")]


@cache
def _schemas() -> tuple[dict[Any, Any], dict[str, Any]]:
    """Each model's reference, and the definitions, all made at once so names do not clash."""
    inputs = {op.body for op in OPERATIONS.values() if op.body is not None}
    outputs = {_model_of(op.answer) for op in [*OPERATIONS.values(), _HEALTH, _WAIT] if _model_of(op.answer)}
    outputs |= {s.ErrorBody, s.ForbiddenBody, s.Accepted}
    pairs = [(m, "validation") for m in inputs] + [(m, "serialization") for m in outputs]
    refs, top = models_json_schema(sorted(pairs, key=lambda p: p[0].__name__), ref_template=_REF)
    return refs, top.get("$defs", {})


def _model_of(answer: Any) -> type[BaseModel] | None:
    if getattr(answer, "__origin__", None) is list:
        answer = get_args(answer)[0]
    return answer if isinstance(answer, type) and issubclass(answer, BaseModel) else None


def _security_schemes(tokens: bool) -> dict[str, Any]:
    bearer = "An API key, or whatever the auth plugin's resolve() accepts."
    schemes: dict[str, Any] = {"bearer": {"type": "http", "scheme": "bearer", "description": bearer}}
    if tokens:
        schemes["streamToken"] = {"type": "apiKey", "in": "query", "name": "token"}
    return schemes


def _version() -> str:
    try:
        return metadata.version("bread-sync")
    except metadata.PackageNotFoundError:
        return "0"

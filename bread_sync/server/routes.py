"""The transport-agnostic routes: agents, runs as resources, sessions, health."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from flask import Response, jsonify, request

from ..errors import (
    AGENT_NOT_FOUND,
    BLOB_STORE_NOT_CONFIGURED,
    FILE_NOT_FOUND,
    INVALID_REQUEST,
    LOOP_NOT_FOUND,
    NOT_SUPPORTED,
    RUN_NOT_FOUND,
    SESSION_NOT_FOUND,
    TASK_RUN_NOT_FOUND,
    BreadError,
)
from ..stores import RUN_STATUSES, records_task_runs
from .actions import HEALTH_PATH, HTTP_ACTIONS, register_http_route
from .guard import json_body
from .state import bread


def register(app: Any) -> None:
    a = HTTP_ACTIONS
    app.add_url_rule(HEALTH_PATH, endpoint="health", view_func=health)
    register_http_route(app, "GET", "/agents", a.agent_list, list_agents)
    register_http_route(app, "GET", "/agents/<agent_id>", a.agent_read, read_agent)
    register_http_route(app, "GET", "/runs", a.run_list, list_runs)
    register_http_route(app, "GET", "/runs/<run_id>", a.run_read, read_run)
    register_http_route(app, "GET", "/sessions", a.session_list, list_sessions)
    register_http_route(app, "POST", "/sessions/cleanup", a.session_cleanup, cleanup_sessions)
    register_http_route(app, "GET", "/sessions/<session_id>", a.session_read, read_session)
    register_http_route(app, "DELETE", "/sessions/<session_id>", a.session_delete, delete_session)
    register_http_route(app, "GET", "/loops", a.loop_list, list_loops)
    register_http_route(app, "GET", "/loops/<loop_id>", a.loop_read, read_loop)
    register_http_route(app, "GET", "/tasks", a.task_list, list_task_runs)
    register_http_route(app, "GET", "/tasks/<task_run_id>", a.task_read, read_task_run)
    register_http_route(app, "GET", "/files/<file_id>", a.file_read, read_file)


def health() -> Any:
    return jsonify(ok=True)


def list_agents() -> Any:
    return jsonify([agent_summary(agent) for agent in exposed(bread())])


def read_agent(agent_id: str) -> Any:
    agent = next((a for a in exposed(bread()) if a.id == agent_id), None)
    if agent is None:
        raise BreadError(AGENT_NOT_FOUND, f"no agent {agent_id!r}")
    schema = agent.input_schema.model_json_schema() if agent.input_schema else {}
    return jsonify({**agent_summary(agent), "inputSchema": schema, "skills": sorted(agent.skills)})


def exposed(instance: Any) -> list[Any]:
    """The agents served over HTTP: ``config.entrypoints``, or all of them."""
    entrypoints = instance.config.entrypoints
    return [a for a in instance.agents.values() if entrypoints is None or a.id in entrypoints]


def agent_summary(agent: Any) -> dict[str, Any]:
    return {
        "id": agent.id,
        "model": agent.model_name,
        "outputFormat": agent.output_format,
        "description": agent.description,
    }


def list_runs() -> Any:
    args = request.args
    status = args.get("status")
    if status is not None and status not in RUN_STATUSES:
        raise BreadError(INVALID_REQUEST, f"status must be one of {', '.join(RUN_STATUSES)}")
    return jsonify(bread().store.list_runs(status=status, agent=args.get("agent"), session=args.get("session")))


def read_run(run_id: str) -> Any:
    store = bread().store
    record = store.get_run(run_id)
    if record is None:
        raise BreadError(RUN_NOT_FOUND, f"no run {run_id}")
    checkpoint = store.get_checkpoint(record["checkpointId"]) if record["checkpointId"] else None
    keys = ("id", "kind", "toolName", "toolCallId", "input", "createdAt")
    return jsonify({**record, "checkpoint": {k: checkpoint[k] for k in keys} if checkpoint else None})


def list_sessions() -> Any:
    return jsonify(bread().store.list_sessions(tag_query()))


def tag_query() -> dict[str, str]:
    tags = {}
    for pair in request.args.getlist("tag"):
        key, sep, value = pair.partition(":")
        if not sep or not key:
            raise BreadError(INVALID_REQUEST, "tag must be key:value")
        tags[key] = value
    return tags


def read_session(session_id: str) -> Any:
    session = bread().store.get_session(session_id)
    if session is None:
        raise BreadError(SESSION_NOT_FOUND, f"no session {session_id}")
    return jsonify(session)


def delete_session(session_id: str) -> Any:
    bread().store.delete_session(session_id)
    return jsonify(ok=True)


def cleanup_sessions() -> Any:
    body = json_body()
    days, tags = body.get("olderThanDays"), body.get("tags")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int | float) or days < 0):
        raise BreadError(INVALID_REQUEST, "olderThanDays must be a non-negative number")
    if tags is not None and (not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values())):
        raise BreadError(INVALID_REQUEST, "tags must be an object of strings")
    return jsonify(deleted=bread().store.cleanup_sessions(older_than_days=days, tags=tags))


def list_loops() -> Any:
    args = request.args
    return jsonify(
        bread().store.list_loops(session=args.get("session"), agent=args.get("agent"), status=args.get("status"))
    )


def read_loop(loop_id: str) -> Any:
    found = bread().store.get_loop(loop_id)
    if found is None:
        raise BreadError(LOOP_NOT_FOUND, f"no loop {loop_id}")
    return jsonify(found)


def task_runs() -> Any:
    store = bread().store
    if not records_task_runs(store):
        raise BreadError(NOT_SUPPORTED, "the configured store does not record task runs")
    return store


def list_task_runs() -> Any:
    args = request.args
    limit = args.get("limit")
    if limit is not None and (not limit.isdigit() or int(limit) > 10_000):
        raise BreadError(INVALID_REQUEST, "limit must be an integer from 0 to 10000")
    found = task_runs().list_task_runs(
        task=args.get("task"), session=args.get("session"), agent=args.get("agent"), status=args.get("status"),
        limit=None if limit is None else int(limit),
    )  # fmt: skip
    return jsonify(found)


def read_task_run(task_run_id: str) -> Any:
    found = task_runs().get_task_run(task_run_id)
    if found is None:
        raise BreadError(TASK_RUN_NOT_FOUND, f"no task run {task_run_id}")
    return jsonify(found)


def read_file(file_id: str) -> Any:
    blobs = bread().blob_store
    if blobs is None:
        raise BreadError(BLOB_STORE_NOT_CONFIGURED, "no blob store is configured")
    found = blobs.get(file_id)
    if found is None:
        raise BreadError(FILE_NOT_FOUND, f"no file {file_id}")
    data, meta = found
    response = Response(data, mimetype=meta["mimeType"])
    response.headers["X-Content-Type-Options"] = "nosniff"
    if meta.get("name"):
        response.headers["Content-Disposition"] = f"inline; filename*=UTF-8''{quote(meta['name'])}"
    return response

"""The record routes, the same on every transport: agents, runs as resources, sessions, loops,
tasks, health and the OpenAPI document (the file routes are files.py's). Path params carry the
names http-api.md gives ``args``."""

from __future__ import annotations

from typing import Any

from flask import jsonify

from ..errors import (
    AGENT_NOT_FOUND,
    INVALID_REQUEST,
    LOOP_NOT_FOUND,
    NOT_SUPPORTED,
    RUN_NOT_FOUND,
    SESSION_NOT_FOUND,
    TASK_RUN_NOT_FOUND,
    BreadError,
)
from ..stores import RunRecord, records_task_runs
from . import openapi
from .actions import HEALTH_PATH, HTTP_ACTIONS, register_http_route
from .guard import authorize_run, may_reach_run, valid_body, valid_query
from .schemas import CleanupBody, LoopsQuery, RunsQuery, SessionsQuery, TasksQuery
from .state import bread


def register(app: Any) -> None:
    a = HTTP_ACTIONS
    app.add_url_rule(HEALTH_PATH, endpoint="health", view_func=health)
    register_http_route(app, "GET", "/agents", a.agent_list, list_agents)
    register_http_route(app, "GET", "/agents/<id>", a.agent_read, read_agent)
    register_http_route(app, "GET", "/pipelines", a.pipeline_list, list_pipelines)
    register_http_route(app, "GET", "/runs", a.run_list, list_runs)
    register_http_route(app, "GET", "/runs/<runId>", a.run_read, read_run)
    register_http_route(app, "GET", "/sessions", a.session_list, list_sessions)
    register_http_route(app, "POST", "/sessions/cleanup", a.session_cleanup, cleanup_sessions)
    register_http_route(app, "GET", "/sessions/<id>", a.session_read, read_session)
    register_http_route(app, "DELETE", "/sessions/<id>", a.session_delete, delete_session)
    register_http_route(app, "GET", "/loops", a.loop_list, list_loops)
    register_http_route(app, "GET", "/loops/<id>", a.loop_read, read_loop)
    register_http_route(app, "GET", "/tasks", a.task_list, list_task_runs)
    register_http_route(app, "GET", "/tasks/<id>", a.task_read, read_task_run)
    register_http_route(app, "GET", "/openapi.json", a.openapi_read, openapi.serve)


def health() -> Any:
    return jsonify(ok=True)


def list_agents() -> Any:
    return jsonify([served.summary() for served in bread().served_agents()])


def read_agent(id: str) -> Any:
    served = next((served for served in bread().served_agents() if served.id == id), None)
    if served is None:
        raise BreadError(AGENT_NOT_FOUND, f"no agent {id!r}")
    return jsonify(served.describe())


def list_pipelines() -> Any:
    """Every pipeline of the config: a pipeline has no entrypoint rule, so all are served."""
    listed = [
        {"id": p.id, "description": p.description or None, "steps": [step.label for step in p.steps]}
        for p in bread().pipelines.values()
    ]
    return jsonify(listed)


def list_runs() -> Any:
    q = valid_query(RunsQuery)
    records = bread().store.list_runs(status=q.status, agent=q.agent, session=q.session)
    return jsonify([run_record(record) for record in records])


def read_run(runId: str) -> Any:  # noqa: N803 - the name http-api.md gives args
    authorize_run(runId)
    store = bread().store
    record = store.get_run(runId)
    if record is None:
        raise BreadError(RUN_NOT_FOUND, f"no run {runId}")
    checkpoint = store.get_checkpoint(record["checkpointId"]) if record["checkpointId"] else None
    keys = ("id", "kind", "toolName", "toolCallId", "input", "createdAt")
    return jsonify({**run_record(record), "checkpoint": {k: checkpoint[k] for k in keys} if checkpoint else None})


def run_record(record: dict[str, Any]) -> dict[str, Any]:
    """A run record as routes answer it, every timestamp in one ISO-8601 form."""
    return RunRecord.model_validate(record).model_dump(mode="json")


def list_sessions() -> Any:
    return jsonify(bread().store.list_sessions(tag_query()))


def tag_query() -> dict[str, str]:
    tags: dict[str, str] = {}
    for pair in valid_query(SessionsQuery).tag:
        key, _, value = pair.partition(":")
        # A repeated key would replace the first value, and a tag may only narrow the list.
        if key in tags:
            raise BreadError(INVALID_REQUEST, f"tag: the key {key!r} is given twice")
        tags[key] = value
    return tags


def read_session(id: str) -> Any:
    session = bread().store.get_session(id)
    if session is None:
        raise BreadError(SESSION_NOT_FOUND, f"no session {id}")
    return jsonify(session)


def delete_session(id: str) -> Any:
    bread().store.delete_session(id)
    return jsonify(ok=True)


def cleanup_sessions() -> Any:
    wanted = valid_body(CleanupBody)
    return jsonify(deleted=bread().store.cleanup_sessions(older_than_days=wanted.olderThanDays, tags=wanted.tags))


def list_loops() -> Any:
    q = valid_query(LoopsQuery)
    return jsonify(bread().store.list_loops(session=q.session, agent=q.agent, status=q.status))


def read_loop(id: str) -> Any:
    found = bread().store.get_loop(id)
    # Its iterations' outputs are its run's: another caller's loop is answered as an unknown one.
    if found is None or not may_reach_run(found["loop"]["runId"]):
        raise BreadError(LOOP_NOT_FOUND, f"no loop {id}")
    return jsonify(found)


def task_runs() -> Any:
    store = bread().store
    if not records_task_runs(store):
        raise BreadError(NOT_SUPPORTED, "the configured store does not record task runs")
    return store


def list_task_runs() -> Any:
    q = valid_query(TasksQuery)
    store = task_runs()
    return jsonify(store.list_task_runs(task=q.task, session=q.session, agent=q.agent, status=q.status, limit=q.limit))


def read_task_run(id: str) -> Any:
    found = task_runs().get_task_run(id)
    # A task called inside a run: its input and output are that run's, and another caller's
    # task run is answered as an unknown one.
    if found is None or (found["runId"] is not None and not may_reach_run(found["runId"])):
        raise BreadError(TASK_RUN_NOT_FOUND, f"no task run {id}")
    return jsonify(found)

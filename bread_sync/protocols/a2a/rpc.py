"""JSON-RPC 2.0 as A2A uses it, sans-IO: the request envelope, the error codes, the answers."""

from __future__ import annotations

from typing import Any

from ...crumbs import dumps
from ...errors import (
    CHECKPOINT_ALREADY_RESUMED,
    CHECKPOINT_NOT_FOUND,
    FILE_NOT_ACCEPTED,
    FILE_NOT_FOUND,
    INPUT_INVALID,
    INVALID_REQUEST,
    RUN_NOT_FOUND,
    BreadError,
)

PARSE_ERROR = -32700
INVALID_JSONRPC = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
INVALID_AGENT_RESPONSE = -32006
EXTENDED_CARD_NOT_CONFIGURED = -32007
EXTENSION_SUPPORT_REQUIRED = -32008
VERSION_NOT_SUPPORTED = -32009

#: The JSON-RPC code of a bread error raised while a method ran; any other is -32603.
BREAD_CODES = {
    INVALID_REQUEST: INVALID_PARAMS,
    INPUT_INVALID: INVALID_PARAMS,
    FILE_NOT_FOUND: INVALID_PARAMS,
    FILE_NOT_ACCEPTED: CONTENT_TYPE_NOT_SUPPORTED,
    RUN_NOT_FOUND: TASK_NOT_FOUND,
    CHECKPOINT_NOT_FOUND: TASK_NOT_FOUND,
    CHECKPOINT_ALREADY_RESUMED: UNSUPPORTED_OPERATION,
}


class RpcError(Exception):
    """A JSON-RPC error answer: ``code`` (one of the constants above) and a message for the client."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def of(cls, error: BreadError) -> RpcError:
        """A bread error as the JSON-RPC error the client gets (its code and message, no cause)."""
        return cls(BREAD_CODES.get(error.code, INTERNAL_ERROR), f"{error.code}: {error.message}")


def parse_request(request: Any) -> tuple[Any, str, Any]:
    """``(id, method, params)`` of a request body's JSON value; RpcError -32600 (``.request_id``
    set when the body had a usable id)."""
    if not isinstance(request, dict):
        raise RpcError(INVALID_JSONRPC, "a request is one JSON object (batches are not supported)")
    request_id = request.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        raise RpcError(INVALID_JSONRPC, "id must be a string, an integer or null")
    if request.get("jsonrpc") != "2.0" or not isinstance(request.get("method"), str):
        raise _with_id(RpcError(INVALID_JSONRPC, 'a request needs "jsonrpc": "2.0" and a string "method"'), request_id)
    return request_id, request["method"], request.get("params")


def _with_id(error: RpcError, request_id: Any) -> RpcError:
    error.request_id = request_id
    return error


def success(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def failure(request_id: Any, error: RpcError, details: bool = False) -> dict[str, Any]:
    """An error answer; with ``details`` (v1.0, spec 9.5), its ``data`` is its ErrorInfo."""
    body = {"code": error.code, "message": error.message}
    if details:
        body["data"] = [error_info(error.code)]
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


#: v1.0's error reasons (``google.rpc.ErrorInfo.reason``), spelled as the a2a-sdk's server
#: spells them; -32700, which its table lacks, is ``PARSE_ERROR``.
REASONS = {
    PARSE_ERROR: "PARSE_ERROR",
    INVALID_JSONRPC: "INVALID_REQUEST",
    METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    INVALID_PARAMS: "INVALID_PARAMS",
    INTERNAL_ERROR: "INTERNAL_ERROR",
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    INVALID_AGENT_RESPONSE: "INVALID_AGENT_RESPONSE",
    EXTENDED_CARD_NOT_CONFIGURED: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    EXTENSION_SUPPORT_REQUIRED: "EXTENSION_SUPPORT_REQUIRED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
}
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
ERROR_DOMAIN = "a2a-protocol.org"


def error_info(code: int) -> dict[str, Any]:
    """The ``google.rpc.ErrorInfo`` of an error code, as a ProtoJSON ``Any``."""
    return {"@type": ERROR_INFO_TYPE, "reason": REASONS[code], "domain": ERROR_DOMAIN, "metadata": {}}


def result_head(request_id: Any) -> str:
    """A success envelope's JSON up to its result: each stream frame is this, an event, ``}``."""
    return f'{{"jsonrpc":"2.0","id":{dumps(request_id)},"result":'


def push_ref(params: Any, task_key: str, config_key: str) -> tuple[str, str | None]:
    """A push config's get, list or delete params: the task's id (``task_key``, required) and
    the config's (``config_key``); ValueError names what is wrong."""
    if not isinstance(params, dict) or not isinstance(params.get(task_key), str):
        raise ValueError(f"params.{task_key} must be the task's id")
    config_id = params.get(config_key)
    if config_id is not None and not isinstance(config_id, str):
        raise ValueError(f"params.{config_key} must be a string")
    return params[task_key], config_id

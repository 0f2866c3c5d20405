"""The file routes: ``POST /files`` stores a caller's file (an image, a PDF) to reference in a
run's input; ``GET /files/<id>`` serves a stored file, never as a page of the API's origin."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from flask import Response, g, jsonify, request

from ..blobs import OPAQUE, base_type, blob_id, configured, is_media_type, media_type_or_opaque
from ..errors import FILE_NOT_FOUND, INVALID_REQUEST, BreadError
from .actions import HTTP_ACTIONS, register_http_route
from .guard import caller_key, may_read_file, valid_query
from .schemas import FileQuery
from .state import bread

#: Files shown in the browser, not downloaded: images and plain text, which run no script.
INLINE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain"})
#: A file opened anyway (a download opened from disk aside) runs nothing and loads nothing.
FILE_POLICY = "sandbox; default-src 'none'"
#: What a browser would run or apply as a subresource: a file fetched as one is opaque bytes,
#: which nosniff makes the browser refuse (an injected ``<script src="/files/...">`` runs nothing).
RUNNABLE_DESTINATIONS = frozenset(
    {"script", "style", "worker", "sharedworker", "serviceworker", "audioworklet", "paintworklet", "xslt"}
)


def register(app: Any, max_file_bytes: int) -> None:
    register_http_route(app, "GET", "/files/<id>", HTTP_ACTIONS.file_read, read_file)
    register_http_route(
        app, "POST", "/files", HTTP_ACTIONS.file_write, upload_file, statuses=(201,), max_body_bytes=max_file_bytes
    )


def blob_store() -> Any:
    return configured(bread().blob_store)


def upload_file() -> Any:
    """Store the body's bytes under its ``Content-Type``, owned by the caller: 201 with the
    reference a run's input names it by."""
    blobs = blob_store()
    media_type = request.headers.get("Content-Type", "")
    if not is_media_type(media_type):
        raise BreadError(INVALID_REQUEST, "Content-Type must be the file's media type, such as image/png")
    data = g.get("bread_body", b"")
    if not data:
        raise BreadError(INVALID_REQUEST, "the request body is the file's bytes, and it is empty")
    stored = blobs.put(data, media_type, valid_query(FileQuery).name, owner=caller_key())
    answer = {"id": blob_id(stored["url"]), "uri": stored["url"], "mimeType": media_type, "size": stored["size"]}
    return jsonify(answer), 201


def read_file(id: str) -> Any:
    found = blob_store().get(id)
    if found is None or not may_read_file(found[1]):  # another's file is as unknown as none
        raise BreadError(FILE_NOT_FOUND, f"no file {id}")
    data, meta = found
    media_type = media_type_or_opaque(meta.get("mimeType"))
    if request.headers.get("Sec-Fetch-Dest") in RUNNABLE_DESTINATIONS:
        media_type = OPAQUE
    response = Response(data, headers={"Content-Type": media_type})
    # The bytes are the caller's, a model's or a remote agent's: never a page of this origin.
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = FILE_POLICY
    shown = base_type(media_type) in INLINE_MEDIA_TYPES
    name = f"; filename*=UTF-8''{quote(meta['name'])}" if meta.get("name") else ""
    response.headers["Content-Disposition"] = ("inline" if shown else "attachment") + name
    return response

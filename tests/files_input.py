"""Files a run's input references, stored in a ``Bread``'s blob store as ``POST /files`` stores them."""

from __future__ import annotations

import base64
from typing import Any

#: The first bytes of a PNG and of a PDF: the models never see them decoded here.
PNG = b"\x89PNG\r\n\x1a\n a picture of a cat"
PDF = b"%PDF-1.4 a paper"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def file_ref(bread: Any, data: bytes, mime_type: str, name: str | None = None, owner: str | None = None) -> dict:
    """A reference to ``data``, stored in ``bread``'s blob store."""
    stored = bread.blob_store.put(data, mime_type, name, owner=owner)
    return {"type": "file", "uri": stored["url"], "mimeType": mime_type}


def picture_input(bread: Any) -> list[dict[str, Any]]:
    """A question about an image and a PDF, as text and file parts."""
    return [
        {"type": "text", "text": "What is in these?"},
        file_ref(bread, PNG, "image/png", "cat.png"),
        file_ref(bread, PDF, "application/pdf", "paper.pdf"),
    ]

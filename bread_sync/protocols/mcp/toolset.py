"""A remote MCP server's tools as an agent's tools: :func:`mcp_tools`.

Each MCP tool becomes an ordinary :class:`~bread_sync.agents.Tool`: the model sees its name,
description and input schema; a call is a ``tool:call`` then a ``tool:result`` (or
``tool:error``) in the run's log, its progress notifications ``tool:progress`` crumbs, and a
tool named in ``ask`` waits for a human's approval as any ``ask=True`` tool does.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable
from functools import partial
from typing import Any

from mcp_types import CallToolResult, TextContent
from mcp_types import Tool as McpListing

from ...agents import Tool, ToolContext, ToolProgress
from ...errors import TOOL_FAILED, BreadError
from .client import DEFAULT_TIMEOUT, MAX_MESSAGE_BYTES, McpClient

log = logging.getLogger("bread_sync.protocols.mcp")


def mcp_tools(
    url: str,
    headers: dict[str, str] | None = None,
    allow: Iterable[str] | None = None,
    ask: Iterable[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = MAX_MESSAGE_BYTES,
    transport: Any = None,
) -> McpToolset:
    """The tools of the MCP server at ``url`` (its Streamable HTTP endpoint), for an agent's
    ``tools``; listed when a run first needs them, then kept.

    ``headers`` go on every request (an ``Authorization``); ``allow``: the names of the tools
    to offer (None: all of them); ``ask``: the names of those that wait for a human's approval
    before each call. ``timeout``: the seconds to connect and between two reads of an answer;
    ``max_bytes``: the most a JSON answer or one streamed event may hold. See docs/reference.md."""
    client = McpClient(url, headers, timeout, max_bytes, transport)
    return McpToolset(client, None if allow is None else frozenset(allow), frozenset(ask))


class McpToolset:
    """See :func:`mcp_tools`: a :class:`~bread_sync.agents.Toolset`."""

    def __init__(self, client: McpClient, allow: frozenset[str] | None, ask: frozenset[str]):
        self.client, self.allow, self.ask = client, allow, ask
        #: Known without listing: whether a tool may pause (the MCP server plugin asks).
        self.pauses = bool(ask)
        self._tools: list[Tool] | None = None

    def tools(self) -> list[Tool]:
        """The server's tools (those allowed), listed once; a failed listing is tried again
        by the next run that needs them. Runs starting at once may each list them (no lock
        held across I/O: see ``McpClient``); the last listing is kept."""
        if self._tools is None:
            listed = [t for t in self.client.list_tools() if self.allow is None or t.name in self.allow]
            self._warn_of_missing({t.name for t in listed})
            self._tools = [self._tool(listing) for listing in listed]
        return self._tools

    def _warn_of_missing(self, names: set[str]) -> None:
        missing = sorted(((self.allow or set()) | self.ask) - names)
        if missing:
            log.warning("the MCP server at %s has no tool %s", self.client.url, ", ".join(missing))

    def _tool(self, listing: McpListing) -> Tool:
        return Tool(
            name=listing.name,
            fn=partial(self._call, listing.name),
            description=listing.description or listing.title or "",
            json_schema=listing.input_schema,
            ask=listing.name in self.ask,
        )

    def _call(self, name: str, arguments: Any, ctx: ToolContext) -> Generator[ToolProgress, None, Any]:
        """One call: its progress as :class:`ToolProgress`, then its output (an error result
        raised as ``TOOL_FAILED`` with the server's text)."""
        calls = self.client.call_tool(name, arguments if isinstance(arguments, dict) else {}, ctx.signal)
        try:
            while True:
                try:
                    notice = next(calls)
                except StopIteration as done:
                    return tool_output(name, done.value)
                yield ToolProgress(notice.progress, notice.total, notice.message)
        finally:
            calls.close()  # a cancelled run closes this first: the call is cancelled at the server

    def close(self) -> None:
        self.client.close()


def tool_output(name: str, result: CallToolResult) -> Any:
    """What a call's result gives the model: its structured content, else its text; an error
    result raises ``TOOL_FAILED`` with its text."""
    text = "".join(block.text for block in result.content if isinstance(block, TextContent))
    if result.is_error:
        raise BreadError(TOOL_FAILED, f"MCP tool {name}: {text or 'failed'}")
    if result.structured_content is not None:
        return result.structured_content
    if all(isinstance(block, TextContent) for block in result.content):
        return text
    return [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in result.content]

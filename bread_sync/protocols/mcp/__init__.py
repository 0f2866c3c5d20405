"""MCP: bread's agents and tasks as tools of an MCP server, over Streamable HTTP.

:func:`mcp_server` (``plugin.py``) is the plugin: one endpoint (``/mcp``) that takes JSON-RPC
on POST and ends a session on DELETE, synchronously, with sessions kept in the store so that
every worker and replica serves them. ``tools.py`` holds the tools and the results of their
calls, sans-IO, in the protocol's own types (``mcp-types``). See docs/http.md.

The other way round, :func:`mcp_tools` (``toolset.py``) gives an agent a remote MCP server's
tools, called through a synchronous Streamable HTTP client (``client.py``). See docs/reference.md.

Needs the extra: ``pip install "bread-sync[mcp]"``.
"""

from ...errors import install_hint

try:
    import mcp_types  # noqa: F401 - the extra: without it, say how to install it
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"the MCP bridge needs its extra: {install_hint('mcp')}") from exc

from .plugin import MCP_ACTIONS, McpPlugin, mcp_server
from .tools import RESUME, McpTool
from .toolset import McpToolset, mcp_tools

__all__ = ["MCP_ACTIONS", "RESUME", "McpPlugin", "McpTool", "McpToolset", "mcp_server", "mcp_tools"]

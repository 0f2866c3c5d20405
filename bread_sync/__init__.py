"""bread_sync: serve LLM agents as streams of crumbs from plain, synchronous Python."""

from .agents import Agent, Skill, Tool, ToolContext, ToolProgress, input_tool, tool
from .cancel import CancelToken
from .config import Config, ServerSettings, load_config
from .crumbs import Frame, from_wire_crumb, to_wire_crumb
from .errors import BreadError
from .runs import Run, RunResult
from .runtime import Bread, create_bread
from .wire.frames import BREAD_PROTOCOL_VERSION, decode_frame, encode_frame

__all__ = [
    "BREAD_PROTOCOL_VERSION",
    "Agent",
    "Bread",
    "BreadError",
    "CancelToken",
    "Config",
    "Frame",
    "Run",
    "RunResult",
    "ServerSettings",
    "Skill",
    "Tool",
    "ToolContext",
    "ToolProgress",
    "create_bread",
    "decode_frame",
    "encode_frame",
    "from_wire_crumb",
    "input_tool",
    "load_config",
    "to_wire_crumb",
    "tool",
]

"""`pgmemory mcp`: the memory tools as an MCP server, for one user fixed when it starts.

Built on the `mcp` SDK's low-level `Server` (the `mcp` extra), so the tools keep
the exact names, input schemas and texts of `pgmemory.tools` (FastMCP would
derive the schemas from Python signatures: a second copy of them). It serves:

- the tools of `MemoryTools` (`memory`, `search_memory`, `save_memory`,
  `forget_memory`, `search_conversations`), and `recall_context`, whose answer is
  `{"context": [{"id", "kind", "content"}]}`; a mistake of the model's is a tool
  result with isError true and the text `MemoryTools.call_result` gives;
- the resource `memory://core` (text/plain): `Memory.instructions` (the guidance,
  then the rendered core memory), read afresh on every read;
- as the initialize `instructions`, the guidance itself, pointing at the above.

The identity (organization, user, namespace, chat) is fixed when the server is
made and never taken from a tool's input: the schemas refuse unknown parameters,
and nothing else reads one. The connection acts as the user (their claims set
per transaction, `AsyncMemory.as_user`). docs/mcp.md tells how to run it.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import psycopg
from mcp.client.client import Client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from . import __version__
from . import _tools_common as common
from ._async.client import AsyncMemory
from ._async.tools import AsyncMemoryTools
from ._tools_common import ToolResult
from .embedders import Embedder
from .errors import PgMemoryError

NAME = "pgmemory"
CORE_URI = "memory://core"
TOOLS = [*common.NAMES, common.RECALL_CONTEXT["name"]]

# The initialize `instructions`: the guidance of Memory.instructions, where the core
# memory itself would follow, a pointer to where it is (it changes while a client
# keeps its instructions).
INSTRUCTIONS = common.instructions_text(
    "Call recall_context with the user's message at the start of a conversation: it returns"
    f" the core memory (also the resource {CORE_URI}) and the facts and earlier messages"
    " closest to the message."
)

_CORE = types.Resource(
    uri=CORE_URI,
    name="core-memory",
    title="Core memory",
    description="The guidance on memory, then the user's core memory files: for a system prompt.",
    mime_type="text/plain",
)


@dataclass(frozen=True)
class Identity:
    """Whom the server acts for: `user` in `org`; `ns` None is the user's own namespace;
    `chat_id` the current chat, which search_conversations and recall_context leave out."""

    org: uuid.UUID
    user: uuid.UUID
    ns: dict[str, Any] | None = None
    chat_id: str | None = None


def tool_definitions() -> list[types.Tool]:
    """The tools, as MemoryTools defines them for the Anthropic API, and recall_context."""
    return [
        types.Tool(
            name=tool["name"], description=tool["description"], input_schema=tool["input_schema"]
        )
        for tool in [*common.anthropic_definitions(), common.RECALL_CONTEXT]
    ]


class MemoryServer:
    """The MCP server (`.server`, an `mcp.server.lowlevel.Server`) on `memory` (a client
    whose login may set claims; it acts as `identity.user`)."""

    def __init__(self, memory: AsyncMemory, identity: Identity) -> None:
        self.identity = identity
        self.memory = memory.as_user(identity.user)
        self.tools = AsyncMemoryTools(
            self.memory, identity.org, ns=identity.ns, chat_id=identity.chat_id
        )
        self.server: Server[Any] = Server(
            NAME,
            version=__version__,
            title="pgmemory: long-term memory",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )

    async def core(self) -> str:
        """The resource memory://core: the guidance, then the rendered core memory."""
        return await self.memory.instructions(self.identity.org, self.identity.ns)

    async def call(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """One tool call; a mistake of the model's is a result with is_error."""
        if name in common.NAMES:
            return await self.tools.call_result(name, {} if arguments is None else arguments)
        try:
            args = common.check_input(name, {} if arguments is None else arguments, TOOLS)
            return ToolResult(await self._recall(**args))
        except Exception as err:
            if (result := common.mistake_result(err)) is None:
                raise
            return result

    async def _recall(self, query: str, facts: int, messages: int) -> str:
        options: dict[str, Any] = {"facts": facts, "messages": messages}
        if self.identity.chat_id is not None:
            options["exclude_chat"] = self.identity.chat_id
        items = await self.memory.recall_context(
            self.identity.org, query, self.identity.ns, options
        )
        return common.context(items)

    # ------------------------------------------------------------ the MCP handlers

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions())

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            result = await self.call(params.name, params.arguments)
        except (psycopg.Error, PgMemoryError) as err:
            # Not the model's doing (the database is unreachable, the extension missing):
            # an MCP error, which the client reports as such.
            raise MCPError(types.INTERNAL_ERROR, f"memory is unavailable: {_reason(err)}") from err
        return types.CallToolResult(
            content=[types.TextContent(text=result.text)], is_error=result.is_error
        )

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[_CORE])

    async def _read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if params.uri != CORE_URI:
            raise MCPError(types.INVALID_PARAMS, f"Unknown resource: {params.uri}", params.uri)
        try:
            text = await self.core()
        except (psycopg.Error, PgMemoryError) as err:
            raise MCPError(types.INTERNAL_ERROR, f"memory is unavailable: {_reason(err)}") from err
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=CORE_URI, mime_type="text/plain", text=text)]
        )


def _reason(err: Exception) -> str:
    if isinstance(err, PgMemoryError):
        return err.message
    if isinstance(err, psycopg.Error) and err.diag.message_primary:
        return err.diag.message_primary
    return str(err).strip()


# ------------------------------------------------------------------ running it


@asynccontextmanager
async def open_server(
    dsn: str, identity: Identity, embedder: Embedder | None = None
) -> AsyncIterator[MemoryServer]:
    """A MemoryServer on its own connection to `dsn`, after one call as the user (the
    DSN, the extension and the user's read permission are checked before serving)."""
    memory = AsyncMemory(dsn, embedder, service=True)
    try:
        served = MemoryServer(memory, identity)
        await served.core()
        yield served
    finally:
        await memory.close()


async def tool_names(served: MemoryServer) -> list[str]:
    """The tools the server lists, asked through an MCP client in this process."""
    async with Client(served.server) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


async def serve_stdio(served: MemoryServer) -> None:
    """Serve over stdin/stdout until the client closes stdin."""
    server = served.server
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one)."""
    if host == "localhost":  # one address, the one clients try first (not ::1 alone)
        host = "127.0.0.1"
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family)


async def serve_http(
    served: MemoryServer, sock: socket.socket, on_ready: Callable[[str], None]
) -> None:
    """Serve streamable HTTP at /mcp on `sock` until interrupted; `on_ready` gets the URL."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    # The SDK turns on its DNS-rebinding check (Host and Origin must be loopback) for a
    # loopback host; on any other address there is no check, and no authentication.
    app = served.server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    name = f"[{host}]" if ":" in host else host
    on_ready(f"http://{name}:{port}/mcp")
    await uvicorn.Server(config).serve(sockets=[sock])

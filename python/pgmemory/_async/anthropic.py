"""`AsyncMemoryTool`: the anthropic SDK's memory tool on an `AsyncMemory`;
`AsyncMemoryFunctionTool`: one of `AsyncMemoryTools`' other tools for the SDK's tool runner.

See pgmemory.anthropic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anthropic.lib.tools import BetaAsyncAbstractMemoryTool, BetaAsyncBuiltinFunctionTool, ToolError

from .._common import CLEARED, COMMANDS, command_fields
from .._tools_common import anthropic_definition
from ..errors import PgMemoryError

if TYPE_CHECKING:
    import uuid

    from anthropic.lib.tools import BetaFunctionToolResultType
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818Command,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
        BetaToolParam,
    )

    from ..calls import Org
    from .client import AsyncMemory
    from .tools import AsyncMemoryTools


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """The memory tool on an `AsyncMemory`, bound to `org`, a user and a namespace.

    `user_id` None acts as `memory`'s own identity; otherwise as that user
    (`memory.as_user(user_id)`). `ns` None is the user's own namespace; e.g.
    `{"scope": "agent", "agent_id": "…"}` one of their agents'.
    """

    def __init__(
        self,
        memory: AsyncMemory,
        org: Org,
        *,
        user_id: uuid.UUID | str | None = None,
        ns: dict[str, Any] | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.memory = memory if user_id is None else memory.as_user(user_id)
        self.org = org
        self.ns = ns

    async def _run(self, command: BetaMemoryTool20250818Command) -> str:
        try:
            return await self.memory.run(self.org, command_fields(command), self.ns)
        except PgMemoryError as err:
            # The SQL message is exactly the text the model should see.
            raise ToolError(err.message) from err

    async def execute(self, command: BetaMemoryTool20250818Command) -> BetaFunctionToolResultType:
        if command.command in COMMANDS:
            return await super().execute(command)
        return await self._run(command)  # unknown or missing: the SQL's error text

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(command)

    async def clear_all_memory(self) -> str:
        """Delete every core memory file of the bound namespace (`memory.clear_files`).

        Called by the application, not the model: a memory error is raised as
        the `PgMemoryError` it is."""
        await self.memory.clear_files(self.org, self.ns)
        return CLEARED


class AsyncMemoryFunctionTool(BetaAsyncBuiltinFunctionTool):
    """One of `AsyncMemoryTools`' function tools (`search_memory`, `save_memory`,
    `forget_memory`, `search_conversations`) for the anthropic SDK's tool runner.

    The definition is the one `AsyncMemoryTools.anthropic()` sends; a call runs
    `AsyncMemoryTools.call_result`, and a mistake of the model's reaches it as
    `ToolError(text)`, so the runner sends that text with `is_error: true`."""

    def __init__(self, tools: AsyncMemoryTools, name: str) -> None:
        self.tools = tools
        self._definition = anthropic_definition(name)

    def to_dict(self) -> BetaToolParam:
        return self._definition

    async def call(self, input: object) -> BetaFunctionToolResultType:
        result = await self.tools.call_result(self._definition["name"], input)
        if result.is_error:
            raise ToolError(result.text)
        return result.text

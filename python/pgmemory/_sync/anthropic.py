# This file is generated from python/pgmemory/_async/anthropic.py by tools/async_to_sync.py; do not edit.
# Change the async source and run `make generate`.
"""`MemoryTool`: the anthropic SDK's memory tool on a `Memory`;
`MemoryFunctionTool`: one of `MemoryTools`' other tools for the SDK's tool runner.

See pgmemory.anthropic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaBuiltinFunctionTool, ToolError

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
    from .client import Memory
    from .tools import MemoryTools


class MemoryTool(BetaAbstractMemoryTool):
    """The memory tool on a `Memory`, bound to `org`, a user and a namespace.

    `user_id` None acts as `memory`'s own identity; otherwise as that user
    (`memory.as_user(user_id)`). `ns` None is the user's own namespace; e.g.
    `{"scope": "agent", "agent_id": "…"}` one of their agents'.
    """

    def __init__(
        self,
        memory: Memory,
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

    def _run(self, command: BetaMemoryTool20250818Command) -> str:
        try:
            return self.memory.run(self.org, command_fields(command), self.ns)
        except PgMemoryError as err:
            raise ToolError(err.message) from err

    def execute(self, command: BetaMemoryTool20250818Command) -> BetaFunctionToolResultType:
        if command.command in COMMANDS:
            return super().execute(command)
        return self._run(command)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(command)

    def clear_all_memory(self) -> str:
        """Delete every core memory file of the bound namespace (`memory.clear_files`).

        Called by the application, not the model: a memory error is raised as
        the `PgMemoryError` it is."""
        self.memory.clear_files(self.org, self.ns)
        return CLEARED


class MemoryFunctionTool(BetaBuiltinFunctionTool):
    """One of `MemoryTools`' function tools (`search_memory`, `save_memory`,
    `forget_memory`, `search_conversations`) for the anthropic SDK's tool runner.

    The definition is the one `MemoryTools.anthropic()` sends; a call runs
    `MemoryTools.call_result`, and a mistake of the model's reaches it as
    `ToolError(text)`, so the runner sends that text with `is_error: true`."""

    def __init__(self, tools: MemoryTools, name: str) -> None:
        self.tools = tools
        self._definition = anthropic_definition(name)

    def to_dict(self) -> BetaToolParam:
        return self._definition

    def call(self, input: object) -> BetaFunctionToolResultType:
        result = self.tools.call_result(self._definition["name"], input)
        if result.is_error:
            raise ToolError(result.text)
        return result.text

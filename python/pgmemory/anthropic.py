"""A backend for the anthropic SDK's memory tool (`memory_20250818`), kept in Postgres.

`MemoryTool` (on `BetaAbstractMemoryTool`) and `AsyncMemoryTool` (on
`BetaAsyncAbstractMemoryTool`) are bound to an organization, a user and a
namespace; each command the model sends goes, as it came, to one
`memory.run` call, and the text the SQL returns is the tool result::

    from anthropic import Anthropic
    from pgmemory import Memory
    from pgmemory.anthropic import MemoryTool

    memory = Memory(dsn, service=True)
    runner = Anthropic().beta.messages.tool_runner(
        model=..., max_tokens=..., messages=[...],
        tools=[MemoryTool(memory, org, user_id=user_id)],
    )
    final = runner.until_done()

A memory error (a `PgMemoryError`: missing path, no match, bad path, …) reaches
the model as `ToolError(message)`, the SQL message exactly as the reference
implementation words it, so the runner sends it as an `is_error` tool result.
Any other exception (a lost connection, say) propagates to the runner as it is.

This module needs the `anthropic` package (≥ 2.10); the rest of pgmemory does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError

from .errors import PgMemoryError

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
    )

    from .calls import Org
    from .client import AsyncMemory, Memory

__all__ = ["AsyncMemoryTool", "MemoryTool"]

# The commands the SDK's base classes dispatch to a method; any other command
# (or none) goes to the SQL as well, which refuses it with the text the model sees.
COMMANDS = frozenset({"view", "create", "str_replace", "insert", "delete", "rename"})

CLEARED = "All memory cleared"  # the reference implementation's clear_all_memory text


def command_fields(command: BetaMemoryTool20250818Command) -> dict[str, Any]:
    """The command as the model sent it, for `memory.run`: every field it gave (unknown
    ones too), none left out but those that are null. The SDK builds the command
    without validating it, so checking its fields is left to the SQL."""
    return command.model_dump(mode="json", exclude_none=True, warnings=False)


@contextmanager
def _tool_errors() -> Iterator[None]:
    # The SQL message is exactly the text the model should see.
    try:
        yield
    except PgMemoryError as err:
        raise ToolError(err.message) from err


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
        with _tool_errors():
            return self.memory.run(self.org, command_fields(command), self.ns)

    def execute(self, command: BetaMemoryTool20250818Command) -> BetaFunctionToolResultType:
        if command.command in COMMANDS:
            return super().execute(command)
        return self._run(command)  # unknown or missing: the SQL's error text

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


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """`MemoryTool` on an `AsyncMemory`, for `AsyncAnthropic`'s tool runner."""

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
        with _tool_errors():
            return await self.memory.run(self.org, command_fields(command), self.ns)

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
        """See `MemoryTool.clear_all_memory`."""
        await self.memory.clear_files(self.org, self.ns)
        return CLEARED

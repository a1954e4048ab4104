# This file is generated from python/pgmemory/_async/tools.py by tools/async_to_sync.py; do not edit.
# Change the async source and run `make generate`.
"""`MemoryTools`: the model's memory tools on a `Memory`.

See pgmemory.tools.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from .. import _tools_common as common
from .._tools_common import ToolResult

if TYPE_CHECKING:
    from ..calls import Org
    from .anthropic import MemoryFunctionTool, MemoryTool
    from .client import Memory


class MemoryTools:
    """The model's tools on a `Memory`, bound to `org`, a user, a namespace and a chat.

    `user_id` None acts as `memory`'s own identity; otherwise as that user
    (`memory.as_user(user_id)`). `ns` None is the user's own namespace (facts and
    core memory files); `chat_id` is the current chat, which `search_conversations`
    leaves out. The identity never comes from the model's input.
    """

    def __init__(
        self,
        memory: Memory,
        org: Org,
        *,
        user_id: uuid.UUID | str | None = None,
        ns: dict[str, Any] | None = None,
        chat_id: str | None = None,
    ) -> None:
        self.memory = memory if user_id is None else memory.as_user(user_id)
        self.org = org
        self.ns = ns
        self.chat_id = chat_id

    def anthropic(self) -> list[dict[str, Any]]:
        """The tool definitions for the Anthropic Messages API: name, description, input_schema."""
        return common.anthropic_definitions()

    def openai(self) -> list[dict[str, Any]]:
        """The tool definitions for OpenAI function calling: type function, name,
        description, parameters."""
        return common.openai_definitions()

    def runner_tools(self) -> list[MemoryTool | MemoryFunctionTool]:
        """The tools for the anthropic SDK's tool runner (needs the `anthropic` package):
        Anthropic's built-in memory tool on this binding (`MemoryTool`), and a
        function tool for each of the others."""
        from .anthropic import MemoryFunctionTool, MemoryTool

        memory_tool = MemoryTool(self.memory, self.org, ns=self.ns)
        return [memory_tool, *(MemoryFunctionTool(self, n) for n in common.FUNCTION_TOOLS)]

    def call(self, name: str, input: dict[str, Any]) -> str:
        """Run one tool call; the text for the model (JSON for data, words for a mistake).

        A mistake of the model's (an unknown tool, a missing or mistyped argument, a
        memory error such as an id that is no fact of the user) is returned as text,
        never raised; a failure of the database itself (a lost connection) is raised."""
        return self.call_result(name, input).text

    def call_result(self, name: str, input: dict[str, Any]) -> ToolResult:
        """`call`, and whether its text is an error (`is_error` of a tool result)."""
        try:
            args = common.check_input(name, input)
            if name == "memory":
                return ToolResult(self.memory.run(self.org, args, self.ns))
            if name == "search_memory":
                return ToolResult(self._search_memory(**args))
            if name == "save_memory":
                return ToolResult(self._save_memory(**args))
            if name == "forget_memory":
                return ToolResult(self._forget_memory(**args))
            return ToolResult(self._search_conversations(**args))
        except Exception as err:
            if (result := common.mistake_result(err)) is None:
                raise
            return result

    def _search_memory(self, query: str, k: int) -> str:
        return common.memories(self.memory.archival.search(self.org, query, self.ns, k))

    def _save_memory(self, content: str) -> str:
        fact = {"content": content, "source": common.save_source(self.chat_id)}
        row = self.memory.archival.save_extracted(self.org, [fact], self.ns)[0]
        if row.id is not None:
            return common.saved(row.id)
        assert row.duplicate_of is not None
        existing = self.memory.archival.get(self.org, row.duplicate_of)
        return common.duplicate(row.duplicate_of, existing["content"])

    def _forget_memory(self, id: uuid.UUID, superseded_by: uuid.UUID | None) -> str:
        self.memory.archival.forget(self.org, id, superseded_by)
        return common.forgotten(id)

    def _search_conversations(self, query: str, k: int) -> str:
        hits = self.memory.recall.search(self.org, query, self.chat_id, k)
        return common.messages(hits)

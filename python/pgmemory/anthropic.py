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

`MemoryFunctionTool` and `AsyncMemoryFunctionTool` put the other tools of
`pgmemory.tools.MemoryTools` (search_memory, save_memory, …) in the runner;
`MemoryTools.runner_tools()` makes them, with the memory tool, for one binding.

This module needs the `anthropic` package (≥ 2.10); the rest of pgmemory does not.
`AsyncMemoryTool` is written in `_async/anthropic.py`; `MemoryTool` in
`_sync/anthropic.py` is generated from it by tools/async_to_sync.py.
"""

from ._async.anthropic import AsyncMemoryFunctionTool, AsyncMemoryTool
from ._common import CLEARED as CLEARED
from ._common import COMMANDS as COMMANDS
from ._common import command_fields as command_fields
from ._sync.anthropic import MemoryFunctionTool, MemoryTool

__all__ = ["AsyncMemoryFunctionTool", "AsyncMemoryTool", "MemoryFunctionTool", "MemoryTool"]

"""The model's memory tools: `MemoryTools` on a `Memory`, `AsyncMemoryTools` on an `AsyncMemory`.

Bound to an organization, a user, a namespace and the current chat, they give
the tool definitions for the Anthropic Messages API (`.anthropic()`) or OpenAI
function calling (`.openai()`), and run the model's calls (`.call(name, input)`
returns the text for the model; `.call_result` also says whether it is an
error)::

    tools = MemoryTools(memory, org, user_id=user_id, chat_id=chat_id)
    reply = client.messages.create(..., tools=tools.anthropic())
    for block in reply.content:
        if block.type == "tool_use":
            text = tools.call(block.name, block.input)

The tools: `memory` (the six commands of Anthropic's memory tool, for models
without it), `search_memory`, `save_memory`, `forget_memory` and
`search_conversations`. `.runner_tools()` gives them to the anthropic SDK's
tool runner, with Anthropic's built-in memory tool for `memory` (it needs the
`anthropic` package; the rest of this module does not). docs/tools.md has
every input and output.

`AsyncMemoryTools` is written in `_async/tools.py`; `MemoryTools` in
`_sync/tools.py` is generated from it by tools/async_to_sync.py.
"""

from ._async.tools import AsyncMemoryTools
from ._sync.tools import MemoryTools
from ._tools_common import INSTRUCTIONS, ToolResult

__all__ = ["INSTRUCTIONS", "AsyncMemoryTools", "MemoryTools", "ToolResult"]

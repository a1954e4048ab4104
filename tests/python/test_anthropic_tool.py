"""`pgmemory.anthropic`: the anthropic SDK's memory tool, kept in Postgres.

The real SDK drives it: a fake Messages API on 127.0.0.1 answers with scripted
`tool_use` blocks, `client.beta.messages.tool_runner` runs the tool against the
test database, and the tests assert the `tool_result` blocks the SDK sends
back (ids, exact texts, `is_error`) and then the rows in Postgres. Every test
runs once with `MemoryTool` on a `Memory` and once with `AsyncMemoryTool` on an
`AsyncMemory` (with `AsyncAnthropic`'s runner).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError

from pgmemory import AsyncMemory, Forbidden, Memory
from pgmemory.anthropic import AsyncMemoryTool, MemoryTool
from tests.conftest import SERVICE_LOGIN

MODEL = "claude-test"
PROMPT = [{"role": "user", "content": "Keep notes for me."}]
TOOL_PARAM = {"type": "memory_20250818", "name": "memory"}

# ------------------------------------------------------------------ a fake Messages API


def _message(n: int, content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": f"msg_{n:02d}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


class FakeMessagesAPI:
    """Answers each POST /v1/messages with the next scripted reply: one turn of
    `tool_use` blocks per entry of `turns` (each input gets an id `toolu_NN`, in
    order), then a final `end_turn` text. `requests` records every request body."""

    def __init__(self, turns: list[list[dict[str, Any]]], final_text: str = "Noted.") -> None:
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.tool_use_ids: list[list[str]] = []
        replies: list[dict[str, Any]] = []
        counter = 0
        for n, inputs in enumerate(turns, start=1):
            blocks = []
            for tool_input in inputs:
                counter += 1
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{counter:02d}",
                        "name": "memory",
                        "input": tool_input,
                    }
                )
            self.tool_use_ids.append([b["id"] for b in blocks])
            replies.append(_message(n, blocks, "tool_use"))
        replies.append(_message(len(turns) + 1, [{"type": "text", "text": final_text}], "end_turn"))
        self._replies = replies
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with api._lock:
                    api.paths.append(self.path)
                    api.requests.append(body)
                    n = len(api.requests)
                if self.path.split("?")[0] != "/v1/messages" or n > len(api._replies):
                    status, reply = (
                        500,
                        {
                            "type": "error",
                            "error": {"type": "api_error", "message": "unexpected request"},
                        },
                    )
                else:
                    status, reply = 200, api._replies[n - 1]
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> FakeMessagesAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def tool_results(self) -> list[list[dict[str, Any]]]:
        """The tool_result blocks of each request after the first: the last message of
        each is the user turn the SDK built from the tool calls it answered."""
        turns = []
        for body in self.requests[1:]:
            last = body["messages"][-1]
            assert last["role"] == "user"
            turns.append(last["content"])
        return turns


# ------------------------------------------------------------------ sync and async, one suite


class Driver:
    """Builds tools of one kind (sync or async) on a service client of this test's
    database, and runs them on one event loop; `check` is a sync service client for
    asserting rows."""

    def __init__(self, kind: str, dsn: str, loop: asyncio.AbstractEventLoop) -> None:
        self.kind = kind
        self.loop = loop
        self.check = Memory(dsn, service=True)
        self.memory: Memory | AsyncMemory
        self.memory = (
            Memory(dsn, service=True) if kind == "sync" else AsyncMemory(dsn, service=True)
        )

    def close(self) -> None:
        self.check.close()
        if isinstance(self.memory, AsyncMemory):
            self.loop.run_until_complete(self.memory.close())
        else:
            self.memory.close()

    def tool(self, org: uuid.UUID, **kwargs: Any) -> MemoryTool | AsyncMemoryTool:
        if isinstance(self.memory, AsyncMemory):
            return AsyncMemoryTool(self.memory, org, **kwargs)
        return MemoryTool(self.memory, org, **kwargs)

    def tool_on(self, memory: Memory | AsyncMemory, org: uuid.UUID, **kwargs: Any) -> Any:
        if isinstance(memory, AsyncMemory):
            return AsyncMemoryTool(memory, org, **kwargs)
        return MemoryTool(memory, org, **kwargs)

    def wait(self, value: Any) -> Any:
        return self.loop.run_until_complete(value) if asyncio.iscoroutine(value) else value

    def call(self, tool: MemoryTool | AsyncMemoryTool, tool_input: dict[str, Any]) -> Any:
        """What the runner does with a tool_use input: `tool.call(input)`."""
        return self.wait(tool.call(tool_input))

    def clear(self, tool: MemoryTool | AsyncMemoryTool) -> Any:
        return self.wait(tool.clear_all_memory())

    def run_tools(self, api: FakeMessagesAPI, tool: MemoryTool | AsyncMemoryTool) -> Any:
        """Runs the SDK's tool runner against `api` to completion; the final message."""
        params: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 1024,
            "messages": PROMPT,
            "tools": [tool],
        }
        if isinstance(tool, AsyncMemoryTool):

            async def run() -> Any:
                client = anthropic.AsyncAnthropic(
                    base_url=api.base_url, api_key="test", max_retries=0
                )
                async with client:
                    return await client.beta.messages.tool_runner(**params).until_done()

            return self.loop.run_until_complete(run())
        with anthropic.Anthropic(base_url=api.base_url, api_key="test", max_retries=0) as client:
            return client.beta.messages.tool_runner(**params).until_done()


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest, login_dsn: Callable[[str], str]) -> Iterator[Driver]:
    loop = asyncio.new_event_loop()
    drv = Driver(request.param, login_dsn(SERVICE_LOGIN), loop)
    try:
        yield drv
    finally:
        drv.close()
        loop.close()


def files(driver: Driver, org: uuid.UUID, user: uuid.UUID, ns: dict[str, Any] | None = None):
    """(path, bytes, version) of each of the user's files in `ns`, as that user sees them."""
    return [(f.path, f.bytes, f.version) for f in driver.check.as_user(user).list_files(org, ns)]


def content(driver: Driver, org: uuid.UUID, user: uuid.UUID, path: str, ns: Any = None) -> Any:
    got = driver.check.as_user(user).read(org, path, ns)
    return None if got is None else got["content"]


ROOT_HEADER = (
    "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n"
)
SNIPPET_HEADER = (
    "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
)
NOT_FOUND = "The path {} does not exist. Please provide a valid path."

# What the fake model asks for, turn by turn: several calls in a turn, or one;
# the six commands, and failing calls among them.
TURNS: list[list[dict[str, Any]]] = [
    [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/notes.md", "file_text": "hello\nworld\n"},
    ],
    [
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "world",
            "new_str": "there",
        }
    ],
    [
        {
            "command": "insert",
            "path": "/memories/notes.md",
            "insert_line": 1,
            "insert_text": "middle\n",
        },
        {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
    ],
    [
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "absent",
            "new_str": "x",
        },
        {"command": "view", "path": "/memories/../etc/passwd"},
        {"command": "create", "path": "/etc/passwd", "file_text": "root"},
        {"command": "launch", "path": "/memories"},
    ],
    [
        {
            "command": "rename",
            "old_path": "/memories/notes.md",
            "new_path": "/memories/archive/notes.md",
        }
    ],
    [
        {"command": "create", "path": "/memories/scratch.md", "file_text": "tmp"},
        {"command": "delete", "path": "/memories/scratch.md"},
        {"command": "view", "path": "/memories"},
    ],
]

# The tool_result of each call, in order: (content, is_error).
RESULTS: list[list[tuple[str, bool]]] = [
    [
        (ROOT_HEADER + "0B\t/memories", False),
        ("File created successfully at: /memories/notes.md", False),
    ],
    [(SNIPPET_HEADER + "     1\thello\n     2\tthere\n     3\t", False)],
    [
        ("The file /memories/notes.md has been edited.", False),
        (
            "Here's the content of /memories/notes.md with line numbers:\n"
            "     2\tmiddle\n     3\tthere\n     4\t",
            False,
        ),
    ],
    [
        (
            "No replacement was performed, old_str `absent` did not appear verbatim in /memories/notes.md.",
            True,
        ),
        ("Path /memories/../etc/passwd would escape /memories directory", True),
        ("Path must start with /memories, got: /etc/passwd", True),
        ("Unknown command: launch", True),
    ],
    [("Successfully renamed /memories/notes.md to /memories/archive/notes.md", False)],
    [
        ("File created successfully at: /memories/scratch.md", False),
        ("Successfully deleted /memories/scratch.md", False),
        (
            ROOT_HEADER
            + "19B\t/memories\n19B\t/memories/archive/\n19B\t/memories/archive/notes.md",
            False,
        ),
    ],
]


def expected_blocks(api: FakeMessagesAPI) -> list[list[dict[str, Any]]]:
    """The tool_result blocks the SDK must send for RESULTS: `is_error` only on failures."""
    turns = []
    for ids, results in zip(api.tool_use_ids, RESULTS, strict=True):
        blocks = []
        for tool_use_id, (text, is_error) in zip(ids, results, strict=True):
            block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
            if is_error:
                block["is_error"] = True
            blocks.append(block)
        turns.append(blocks)
    return turns


def test_the_sdk_runs_every_command_against_postgres(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    user = grant()
    with FakeMessagesAPI(TURNS, final_text="Noted.") as api:
        final = driver.run_tools(api, driver.tool(org, user_id=user))

    assert final.stop_reason == "end_turn"
    assert [block.text for block in final.content] == ["Noted."]
    assert len(api.requests) == len(TURNS) + 1
    assert all(path.split("?")[0] == "/v1/messages" for path in api.paths)
    first = api.requests[0]
    assert first["tools"] == [TOOL_PARAM]
    assert first["messages"] == PROMPT
    ids = [block["tool_use_id"] for turn in api.tool_results() for block in turn]
    assert ids == [f"toolu_{n:02d}" for n in range(1, 14)]
    assert api.tool_results() == expected_blocks(api)

    # The rows: one file left, changed by create, str_replace, insert and rename.
    assert files(driver, org, user) == [("/memories/archive/notes.md", 19, 4)]
    assert content(driver, org, user, "/memories/archive/notes.md") == "hello\nmiddle\nthere\n"
    assert content(driver, org, user, "/memories/notes.md") is None
    assert content(driver, org, user, "/memories/scratch.md") is None


def test_errors_reach_the_model_as_the_sql_message(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    tool = driver.tool(org, user_id=grant())
    driver.call(tool, {"command": "create", "path": "/memories/a.md", "file_text": "x\nx\n"})
    cases = [
        ({"command": "view", "path": "/memories/nope.md"}, NOT_FOUND.format("/memories/nope.md")),
        (
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": "y"},
            "No replacement was performed. Multiple occurrences of old_str `x` in lines: 1, 2. Please ensure it is unique",
        ),
        (
            {"command": "insert", "path": "/memories/a.md", "insert_line": 9, "insert_text": "z"},
            "Invalid `insert_line` parameter: 9. It should be within the range [0, 2].",
        ),
        (
            {"command": "delete", "path": "/memories"},
            "Cannot delete the /memories directory itself",
        ),
        (
            {"command": "delete", "path": "/memories/nope.md"},
            "The path /memories/nope.md does not exist",
        ),
        (
            {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/a.md"},
            "The destination /memories/a.md already exists",
        ),
        ({"path": "/memories"}, 'A command must be a JSON object with a "command" string'),
    ]
    for tool_input, message in cases:
        with pytest.raises(ToolError) as caught:
            driver.call(tool, tool_input)
        assert (caught.value.content, str(caught.value)) == (message, message), tool_input
        assert caught.value.__cause__ is not None  # the PgMemoryError, kept for logs


def test_a_user_without_permission_is_told_so(driver: Driver, org: uuid.UUID) -> None:
    stranger = driver.tool(org, user_id=uuid.uuid4())  # never granted anything in org
    with pytest.raises(ToolError) as caught:
        driver.call(stranger, {"command": "view", "path": "/memories"})
    assert caught.value.content == "not permitted: no read permission in this organization"
    assert isinstance(caught.value.__cause__, Forbidden)


def test_malformed_input_is_refused_by_the_sql(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    # The SDK builds the command without validating the model's input; it reaches the
    # SQL as sent, which says what is wrong.
    user = grant()
    tool = driver.tool(org, user_id=user)
    cases = [
        (
            {"command": "create", "path": "/memories/a.md"},
            "Missing required parameter `file_text` for command `create`",
        ),
        (
            {"command": "create", "path": "/memories/a.md", "file_text": None},
            "Missing required parameter `file_text` for command `create`",
        ),
        (
            {"command": "create", "path": "/memories/a.md", "file_text": 5},
            "Parameter `file_text` for command `create` must be a string",
        ),
        (
            {"command": "insert", "path": "/memories/a.md", "insert_line": 1.5, "insert_text": "y"},
            "Parameter `insert_line` for command `insert` must be an integer",
        ),
    ]
    for tool_input, message in cases:
        with pytest.raises(ToolError) as caught:
            driver.call(tool, tool_input)
        assert caught.value.content == message, tool_input
    assert files(driver, org, user) == []


def test_user_id_binds_the_tool_to_one_user(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    alice, bob = grant(), grant()
    as_alice, as_bob = driver.tool(org, user_id=alice), driver.tool(org, user_id=str(bob))
    create = {"command": "create", "path": "/memories/me.md", "file_text": "I am Alice\n"}
    assert driver.call(as_alice, create) == "File created successfully at: /memories/me.md"

    with pytest.raises(ToolError) as caught:
        driver.call(as_bob, {"command": "view", "path": "/memories/me.md"})
    assert caught.value.content == NOT_FOUND.format("/memories/me.md")
    assert (
        driver.call(as_bob, {"command": "view", "path": "/memories"})
        == ROOT_HEADER + "0B\t/memories"
    )
    driver.call(as_bob, {**create, "file_text": "I am Bob\n"})

    assert content(driver, org, alice, "/memories/me.md") == "I am Alice\n"
    assert content(driver, org, bob, "/memories/me.md") == "I am Bob\n"


def test_without_user_id_the_tool_acts_as_the_memory_object(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    alice = grant()
    # A client that already is the user.
    mine = driver.tool_on(driver.memory.as_user(alice), org)
    driver.call(mine, {"command": "create", "path": "/memories/a.md", "file_text": "a"})
    assert files(driver, org, alice) == [("/memories/a.md", 1, 1)]
    # The service itself, acting for the user through the namespace's owner_id.
    service = driver.tool(org, ns={"owner_id": str(alice)})
    assert driver.call(service, {"command": "view", "path": "/memories/a.md"}) == (
        "Here's the content of /memories/a.md with line numbers:\n     1\ta"
    )


def test_ns_binds_the_tool_to_a_namespace(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    alice = grant()
    agent_ns = {"scope": "agent", "agent_id": "planner"}
    agent = driver.tool(org, user_id=alice, ns=agent_ns)
    own = driver.tool(org, user_id=alice)
    driver.call(agent, {"command": "create", "path": "/memories/plan.md", "file_text": "step 1\n"})
    driver.call(own, {"command": "create", "path": "/memories/me.md", "file_text": "me\n"})

    assert driver.call(agent, {"command": "view", "path": "/memories"}) == (
        ROOT_HEADER + "7B\t/memories\n7B\t/memories/plan.md"
    )
    with pytest.raises(ToolError) as caught:
        driver.call(own, {"command": "view", "path": "/memories/plan.md"})
    assert caught.value.content == NOT_FOUND.format("/memories/plan.md")
    assert files(driver, org, alice, agent_ns) == [("/memories/plan.md", 7, 1)]
    assert files(driver, org, alice) == [("/memories/me.md", 3, 1)]


def test_clear_all_memory_empties_only_the_bound_namespace(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    alice, bob = grant(), grant()
    agent_ns = {"scope": "agent", "agent_id": "planner"}
    tool = driver.tool(org, user_id=alice)
    for path in ("/memories/a.md", "/memories/deep/b.md"):
        driver.call(tool, {"command": "create", "path": path, "file_text": "x"})
    driver.call(
        driver.tool(org, user_id=alice, ns=agent_ns),
        {"command": "create", "path": "/memories/plan.md", "file_text": "p"},
    )
    driver.call(
        driver.tool(org, user_id=bob),
        {"command": "create", "path": "/memories/a.md", "file_text": "b"},
    )

    assert driver.clear(tool) == "All memory cleared"
    assert files(driver, org, alice) == []
    assert (
        driver.call(tool, {"command": "view", "path": "/memories"}) == ROOT_HEADER + "0B\t/memories"
    )
    assert files(driver, org, alice, agent_ns) == [("/memories/plan.md", 1, 1)]
    assert files(driver, org, bob) == [("/memories/a.md", 1, 1)]
    assert driver.clear(tool) == "All memory cleared"  # nothing left: still fine


def test_clear_files_returns_how_many(
    driver: Driver, org: uuid.UUID, grant: Callable[..., uuid.UUID]
) -> None:
    alice = grant()
    user = driver.memory.as_user(alice)
    for path in ("/memories/a.md", "/memories/b.md"):
        driver.wait(user.write(org, path, "x"))
    assert driver.wait(user.clear_files(org)) == 2
    assert driver.wait(user.clear_files(org)) == 0


def test_the_tool_declares_itself_as_the_memory_tool(driver: Driver, org: uuid.UUID) -> None:
    tool = driver.tool(org, user_id=uuid.uuid4())
    base = BetaAsyncAbstractMemoryTool if driver.kind == "async" else BetaAbstractMemoryTool
    assert isinstance(tool, base)
    assert tool.to_dict() == TOOL_PARAM
    assert tool.name == "memory"
    cached = driver.tool(org, cache_control={"type": "ephemeral"})
    assert cached.to_dict() == {**TOOL_PARAM, "cache_control": {"type": "ephemeral"}}


def test_pgmemory_does_not_need_anthropic() -> None:
    code = (
        "import sys, pgmemory, pgmemory.client; assert 'anthropic' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

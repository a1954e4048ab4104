"""`pgmemory mcp`: the MCP server, driven by the `mcp` SDK's own client.

`pgmemory mcp` runs as a subprocess (its console script) and is spoken to over
stdio (`stdio_client`) and over streamable HTTP (`streamable_http_client`, one
server for the module), both through `ClientSession`. Its login is an ordinary
one, never the service (memory_web: it only sets the user's claims). The same
scenario runs over both transports, for two users of one organization: the
tools' names, schemas and texts, saving, searching, a memory-tool command,
recall_context, the core memory resource, and an argument naming another user,
which is refused and changes nothing. A second user, an org admin and a user of
another organization get servers of their own and never see the first user's
memories. `--check` is run for its output and exit status.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.client import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from pgmemory import AsyncMemory, Memory, MemoryTools, mcp_server
from pgmemory import _tools_common as common
from pgmemory import cli as pgmemory_cli
from pgmemory.tools import INSTRUCTIONS
from tests.conftest import USER_LOGIN, ServerInfo
from tests.docblocks import ROOT

PGMEMORY = Path(sys.executable).with_name("pgmemory")  # the console script of pyproject
TOOLS = [
    "memory",
    "search_memory",
    "save_memory",
    "forget_memory",
    "search_conversations",
    "recall_context",
]
READY = re.compile(r"pgmemory: MCP server at (http://\S+) for user ")
TEA = "Drinks green tea, no sugar"
BOBS = "Has a dog named Rex"  # the second user's fact
ADMINS = "Manages the Lisbon office"
OTHER_ORGS = "Lives in Porto"


@dataclass(frozen=True)
class World:
    """A database of this module, its users, and the DSNs of the service and of the
    ordinary login the servers use."""

    service_dsn: str
    login_dsn: str
    org: uuid.UUID
    other_org: uuid.UUID
    alice: uuid.UUID  # the stdio scenario's user
    ana: uuid.UUID  # the HTTP scenario's user
    bob: uuid.UUID  # a second user of the organization
    admin: uuid.UUID  # an org admin (memory.manage)
    carol: uuid.UUID  # a user of the other organization
    stranger: uuid.UUID  # no permission anywhere

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a server: PGMEMORY_DSN the ordinary login, none of our
        other settings, no embedded server to fall back on."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEMORY_")}
        env.pop("DATABASE_URL", None)
        return {**env, "PGMEMORY_DSN": self.login_dsn, "PGMEMORY_DATA": "/nonexistent", **extra}

    def identity(self, user: uuid.UUID, org: uuid.UUID | None = None) -> list[str]:
        return ["mcp", "--org", str(org or self.org), "--user", str(user)]


def _dsn(server: ServerInfo, dbname: str, login: str) -> str:
    return f"postgresql://{login}@/{dbname}?host={server.host}&port={server.port}"


@pytest.fixture(scope="module")
def world(pg_server: ServerInfo, memory_template: Any) -> Iterator[World]:
    name = f"mcp_{os.getpid()}"
    with psycopg.connect(_dsn(pg_server, "postgres", "postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE {name} TEMPLATE "{memory_template.template_dbname}"')
    org, other_org = uuid.uuid4(), uuid.uuid4()
    users = [uuid.uuid4() for _ in range(6)]
    alice, ana, bob, admin, carol, _stranger = users
    world = World(
        _dsn(pg_server, name, "postgres"), _dsn(pg_server, name, USER_LOGIN), org, other_org, *users
    )
    try:
        with Memory(world.service_dsn, service=True) as service:
            for user in (alice, ana, bob, admin):
                service.grant(org, user)
            service.grant(org, admin, "memory.manage")
            service.grant(other_org, carol)
            for user, fact in ((bob, BOBS), (admin, ADMINS)):
                service.as_user(user).archival.save(org, fact)
            service.as_user(carol).archival.save(other_org, OTHER_ORGS)
            for user in (alice, ana, bob):
                for chat in ("chat-1", "chat-2"):  # chat-2 is the servers' own chat
                    service.recall.index(org, {
                        "id": f"m-{chat}", "chat_id": chat, "owner_id": str(user),
                        "role": "user", "content": f"I'm flying to Kyoto in April ({chat}).",
                    })  # fmt: skip
        yield world
    finally:
        with psycopg.connect(_dsn(pg_server, "postgres", "postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _lines(stream: Any, into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


@pytest.fixture(scope="module")
def http_url(world: World) -> Iterator[str]:
    """`pgmemory mcp --http 127.0.0.1:0` for ana in chat-2: its URL, once it listens."""
    args = [*world.identity(world.ana), "--chat-id", "chat-2", "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [str(PGMEMORY), *args], env=world.env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    try:
        line = lines.get(timeout=60)
        found = READY.match(line)
        assert found, line
        assert (
            line
            == f"pgmemory: MCP server at {found[1]} for user {world.ana} in organization {world.org}\n"
        )
        yield found[1]
    finally:
        proc.terminate()
        # uvicorn shuts down, then raises the signal again: the status of a SIGTERM.
        assert proc.wait(timeout=30) == -signal.SIGTERM
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    assert "Traceback" not in "".join(rest), "".join(rest)


def stdio(world: World, user: uuid.UUID, *extra: str, org: uuid.UUID | None = None) -> Any:
    params = StdioServerParameters(
        command=str(PGMEMORY), args=[*world.identity(user, org), *extra], env=world.env()
    )
    return stdio_client(params)


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    result = await session.call_tool(name, arguments)
    assert [c.type for c in result.content] == ["text"], result
    return result.content[0].text, result.is_error  # type: ignore[union-attr]


def facts_of(world: World, user: uuid.UUID, org: uuid.UUID | None = None) -> list[str]:
    with Memory(world.service_dsn, service=True) as service:
        return [f.content for f in service.as_user(user).archival.list(org or world.org)]


async def scenario(world: World, session: ClientSession, user: uuid.UUID) -> None:
    """Everything one user does with the server, asserted exactly. The server was started
    for `user` in the organization, in chat-2."""
    init = await session.initialize()
    assert (init.server_info.name, init.server_info.version) == ("pgmemory", "0.1.0")
    assert init.instructions == mcp_server.INSTRUCTIONS
    assert init.instructions.startswith(INSTRUCTIONS + "\nCall recall_context with")

    # The tools: MemoryTools' own definitions, and recall_context.
    listed = (await session.list_tools()).tools
    assert [t.name for t in listed] == TOOLS
    with Memory(world.service_dsn, service=True) as mem:
        expected = [*MemoryTools(mem, world.org, user_id=user).anthropic(), common.RECALL_CONTEXT]
    assert [(t.name, t.description, t.input_schema) for t in listed] == [
        (d["name"], d["description"], d["input_schema"]) for d in expected
    ]

    # The memory tool: the memory tool's texts.
    create = {"command": "create", "path": "/memories/x.md", "file_text": "Tea, no sugar.\n"}
    assert await call(session, "memory", create) == (
        "File created successfully at: /memories/x.md",
        False,
    )
    escape = {"command": "view", "path": "/memories/../etc/passwd"}
    assert await call(session, "memory", escape) == (
        "Path /memories/../etc/passwd would escape /memories directory",
        True,
    )

    # Save, search, a duplicate.
    text, error = await call(session, "save_memory", {"content": TEA})
    saved = json.loads(text)["saved"]
    assert (text, error) == (json.dumps({"saved": saved}, separators=(",", ":")), False)
    text, error = await call(session, "save_memory", {"content": TEA.lower()})
    assert (json.loads(text), error) == ({"duplicate_of": saved, "content": TEA}, False)
    text, error = await call(session, "search_memory", {"query": "green tea"})
    assert [(m["id"], m["content"]) for m in json.loads(text)["memories"]] == [(saved, TEA)]

    # Another user's facts are found by nobody but them; their ids are no facts here.
    for fact in (BOBS, ADMINS, OTHER_ORGS):
        assert await call(session, "search_memory", {"query": fact}) == ('{"memories":[]}', False)
    with Memory(world.service_dsn, service=True) as service:
        bobs = service.as_user(world.bob).archival.list(world.org)[0].id
    assert await call(session, "forget_memory", {"id": str(bobs)}) == (
        f"fact {bobs} does not exist",
        True,
    )

    # An argument naming another user is refused and changes nothing.
    for name, args in (
        ("search_memory", {"query": BOBS, "user_id": str(world.bob)}),
        ("save_memory", {"content": "Is bob", "user_id": str(world.bob)}),
        ("recall_context", {"query": BOBS, "user_id": str(world.bob)}),
        ("search_conversations", {"query": "Kyoto", "org": str(world.other_org)}),
    ):
        key = next(k for k in args if k in ("user_id", "org"))
        params = ", ".join(common._SCHEMAS[name]["input_schema"]["properties"])
        assert await call(session, name, args) == (
            f"Unknown parameter `{key}` for tool `{name}`; its parameters are: {params}",
            True,
        )
    # The memory tool passes its input to memory.run, which reads no identity from it.
    view = {"command": "view", "path": "/memories", "user_id": str(world.bob)}
    text, error = await call(session, "memory", view)
    assert not error and "/memories/x.md" in text, text
    assert facts_of(world, world.bob) == [BOBS]
    assert facts_of(world, user) == [TEA]

    # Earlier conversations: chat-1 only (chat-2 is the server's own chat).
    text, error = await call(session, "search_conversations", {"query": "Kyoto"})
    got = [(m["chat_id"], m["content"]) for m in json.loads(text)["messages"]]
    assert (got, error) == ([("chat-1", "I'm flying to Kyoto in April (chat-1).")], False)

    # recall_context: the core memory, the facts, the messages of other chats.
    with Memory(world.service_dsn, service=True) as service:
        rendered = service.as_user(user).render(world.org)
        instructions = service.as_user(user).instructions(world.org)
    text, error = await call(session, "recall_context", {"query": "tea in Kyoto"})
    context = json.loads(text)["context"]
    assert error is False
    assert [(c["id"], c["kind"], c["content"]) for c in context] == [
        ("core", "core", rendered),
        (f"fact:{saved}", "fact", TEA),
        (context[2]["id"], "message", "I'm flying to Kyoto in April (chat-1)."),
    ]
    text, _ = await call(session, "recall_context", {"query": "tea", "facts": 0, "messages": 0})
    assert json.loads(text) == {"context": [{"id": "core", "kind": "core", "content": rendered}]}
    assert await call(session, "recall_context", {"query": "tea", "facts": 51}) == (
        "Parameter `facts` for tool `recall_context` must be between 0 and 50",
        True,
    )

    # Mistakes as MemoryTools words them, tool errors the model sees.
    assert await call(session, "nope", {}) == (
        f"Unknown tool: nope. The tools are: {', '.join(TOOLS)}",
        True,
    )
    assert await call(session, "search_memory", {}) == (
        "Missing required parameter `query` for tool `search_memory`",
        True,
    )

    # The core memory resource: Memory.instructions, read afresh.
    resources = (await session.list_resources()).resources
    assert [(r.uri, r.name, r.mime_type) for r in resources] == [
        ("memory://core", "core-memory", "text/plain")
    ]
    read = (await session.read_resource("memory://core")).contents
    assert [(c.uri, c.mime_type, c.text) for c in read] == [  # type: ignore[union-attr]
        ("memory://core", "text/plain", instructions)
    ]
    assert '<memory_file path="/memories/x.md" scope="user">\nTea, no sugar.\n' in instructions


def test_over_stdio(world: World) -> None:
    async def run() -> None:
        async with (
            stdio(world, world.alice, "--chat-id", "chat-2") as (read, write),
            ClientSession(read, write) as session,
        ):
            await scenario(world, session, world.alice)

    asyncio.run(run())


def test_over_http(world: World, http_url: str) -> None:
    async def run() -> None:
        async with (
            streamable_http_client(http_url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await scenario(world, session, world.ana)

    asyncio.run(run())


def test_other_users_never_see_a_users_memories(world: World, http_url: str) -> None:
    """Servers of a second user, an org admin and a user of another organization, after
    ana saved her fact and file (HTTP, her own server still running)."""

    async def ana_saves() -> None:
        async with (
            streamable_http_client(http_url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await call(session, "save_memory", {"content": "Ana's secret project is Falcon"})
            create = {"command": "create", "path": "/memories/ana.md", "file_text": "Falcon\n"}
            await call(session, "memory", create)

    async def sees(session: ClientSession, user: uuid.UUID) -> list[str]:
        """What of ana's a user's session finds: facts, files, conversations, recall."""
        found = []
        text, _ = await call(session, "search_memory", {"query": "Falcon project"})
        found += [m["content"] for m in json.loads(text)["memories"]]
        text, _ = await call(session, "memory", {"command": "view", "path": "/memories"})
        found += [line for line in text.splitlines() if "ana.md" in line]
        text, _ = await call(session, "search_conversations", {"query": "Kyoto"})
        found += [m["content"] for m in json.loads(text)["messages"] if user != world.bob]
        text, _ = await call(session, "recall_context", {"query": "Falcon project"})
        found += [c["content"] for c in json.loads(text)["context"] if "Falcon" in c["content"]]
        return found

    async def run() -> None:
        await ana_saves()
        async with (
            stdio(world, world.bob) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            assert await sees(session, world.bob) == []
            text, _ = await call(session, "search_conversations", {"query": "Kyoto"})
            assert sorted(m["content"] for m in json.loads(text)["messages"]) == [
                f"I'm flying to Kyoto in April ({chat})." for chat in ("chat-1", "chat-2")
            ]  # bob's own messages: ana's are the same words, and not among them
        async with AsyncMemory(world.login_dsn) as memory:
            for user, org in ((world.admin, world.org), (world.carol, world.other_org)):
                served = mcp_server.MemoryServer(memory, mcp_server.Identity(org, user))
                async with Client(served.server) as client:
                    assert await sees(client.session, user) == []
                    core = (await client.read_resource("memory://core")).contents[0]
                    assert "Falcon" not in core.text  # type: ignore[union-attr]

    asyncio.run(run())
    assert facts_of(world, world.admin) == [ADMINS]
    assert facts_of(world, world.carol, world.other_org) == [OTHER_ORGS]


def test_what_is_not_the_models_doing_is_an_mcp_error(world: World) -> None:
    """A database that cannot be reached, an unknown resource: MCP errors, not tool results."""
    gone = world.login_dsn.replace("/mcp_", "/nowhere_")

    async def run() -> None:
        async with AsyncMemory(gone) as memory:
            served = mcp_server.MemoryServer(memory, mcp_server.Identity(world.org, world.alice))
            async with Client(served.server) as client:
                with pytest.raises(MCPError) as failed:
                    await client.call_tool("search_memory", {"query": "tea"})
                assert failed.value.code == INTERNAL_ERROR
                assert failed.value.message.startswith("memory is unavailable: "), failed.value
                with pytest.raises(MCPError) as unknown:
                    await client.read_resource("memory://other")
                assert (unknown.value.code, unknown.value.message) == (
                    INVALID_PARAMS,
                    "Unknown resource: memory://other",
                )

    asyncio.run(run())


def test_http_refuses_a_foreign_host(world: World, http_url: str) -> None:
    """On loopback the SDK checks Host (DNS rebinding): a page on another name cannot
    reach the server through the user's browser."""
    import httpx2

    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Host": "evil.example", "Accept": "application/json, text/event-stream"}
    response = httpx2.post(http_url, json=body, headers=headers)
    assert response.status_code == 421, response.text


def run_pgmemory(world: World, *args: str, **env: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(PGMEMORY), *args], env=world.env(**env), capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_check(world: World) -> None:
    tools = f"tools: {', '.join(TOOLS)}\n"
    ready = f"ready: user {world.alice} in organization {world.org}\n{tools}"
    env = {"PGMEMORY_ORG": str(world.org), "PGMEMORY_USER": str(world.alice)}
    assert run_pgmemory(world, "mcp", "--check", **env) == (0, ready, "")
    # Options win over the environment; --json.
    code, out, err = run_pgmemory(world, *world.identity(world.bob), "--check", "--json", **env)
    assert (code, json.loads(out), err) == (
        0,
        {"org": str(world.org), "user": str(world.bob), "tools": TOOLS},
        "",
    )
    # A non-loopback address is served, with a warning (there is no authentication).
    code, out, err = run_pgmemory(
        world, *world.identity(world.alice), "--check", "--http", "0.0.0.0:0"
    )
    assert (code, out) == (0, ready)
    assert err == (
        "pgmemory: warning: 0.0.0.0 is not a loopback address and the server has no"
        f" authentication: whoever reaches it acts as user {world.alice} in organization"
        f" {world.org}. Put a proxy that authenticates (and TLS) in front of it: docs/mcp.md\n"
    )


def test_check_failures(world: World) -> None:
    # A user without the read permission (a user of another organization is one).
    assert run_pgmemory(world, *world.identity(world.stranger), "--check") == (
        1,
        "",
        "pgmemory: MEMORY_FORBIDDEN: not permitted: no read permission in this organization\n",
    )
    missing = world.login_dsn.replace("/mcp_", "/nowhere_")
    code, out, err = run_pgmemory(world, *world.identity(world.alice), "--check", "--dsn", missing)
    assert (code, out) == (1, "")
    assert err.startswith("pgmemory: cannot connect to the database: ") and "nowhere_" in err
    code, out, err = run_pgmemory(world, "mcp", "--check", PGMEMORY_ORG=str(world.org))
    assert (code, out) == (2, "")
    assert err.endswith("pgmemory mcp: error: give --user UUID or set PGMEMORY_USER\n"), err
    code, out, err = run_pgmemory(world, "mcp", "--check", PGMEMORY_ORG="acme", PGMEMORY_USER="x")
    assert (code, out) == (2, "")
    assert err.endswith("pgmemory mcp: error: PGMEMORY_ORG is not a UUID: 'acme'\n"), err


@pytest.mark.parametrize(
    ("given", "address"),
    [
        ("8000", ("127.0.0.1", 8000)),
        (":8000", ("127.0.0.1", 8000)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:8000", ("::1", 8000)),
        ("mcp.internal:8000", ("mcp.internal", 8000)),
    ],
)
def test_http_address(given: str, address: tuple[str, int]) -> None:
    assert pgmemory_cli._http_address(given) == address


def test_http_address_refused() -> None:
    parser = pgmemory_cli.build_parser()
    for bad in ("web", "127.0.0.1:", "1:99999"):
        with pytest.raises(SystemExit):
            parser.parse_args(["mcp", "--http", bad])


def test_the_docs_client_configurations_start_this_server() -> None:
    """docs/mcp.md's JSON configurations run `pgmemory mcp` with arguments it takes and
    only our settings in `env`."""
    text = (ROOT / "docs/mcp.md").read_text()
    configs = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.S)]
    assert len(configs) >= 2
    for config in configs:
        entry = config["mcpServers"]["pgmemory"]
        assert entry["command"] == "pgmemory"
        args = pgmemory_cli.build_parser().parse_args(entry["args"])
        assert args.func is pgmemory_cli.cmd_mcp
        assert set(entry.get("env", {})) <= {"PGMEMORY_DSN", "PGMEMORY_ORG", "PGMEMORY_USER"}


def test_without_the_mcp_extra() -> None:
    """The package imports without `mcp`; the command says which extra it needs."""
    hide = (
        "import importlib.abc, sys\n"
        "class NotInstalled(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in ('mcp', 'mcp_types'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "import pgmemory, pgmemory.cli\n"
        "sys.exit(pgmemory.cli.main(sys.argv[1:]))\n"
    )
    org, user = str(uuid.uuid4()), str(uuid.uuid4())
    done = subprocess.run(
        [sys.executable, "-c", hide, "mcp", "--check", "--org", org, "--user", user],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        "pgmemory: `pgmemory mcp` needs the mcp package: pip install 'pgmemory[mcp]'\n",
    )

"""Hostile paths and malformed commands: each refused with its code, nothing changed."""

from __future__ import annotations

import pytest

from tests.support import Failure, snapshot

OWNER = {"owner_id": "22222222-2222-2222-2222-222222222222"}
START = "Path must start with /memories, got: {}"
ESCAPE = "Path {} would escape /memories directory"
CONTROL = "Path contains control characters, which are not allowed"

HOSTILE_PATHS = [
    ("/etc/passwd", START),
    ("memories/a.md", START),
    ("", START),
    ("/memoriesX/a.md", START),
    ("/memories../a", START),
    ("/memories\\..\\a", START),
    ("//memories/a", START),
    (" /memories/a", START),
    ("/MEMORIES/a", START),
    ("/memories/../etc/passwd", ESCAPE),
    ("/memories/a/../../etc", ESCAPE),
    ("/memories/a/../b.md", ESCAPE),
    ("/memories/./a.md", ESCAPE),
    ("/memories/a/.", ESCAPE),
    ("/memories/..", ESCAPE),
    ("/memories/.", ESCAPE),
    ("/memories//a.md", ESCAPE),
    ("/memories/a//b.md", ESCAPE),
    ("/memories///", ESCAPE),
    ("/memories/..\\a", ESCAPE),
    ("/memories/a\\b.md", ESCAPE),
    ("/memories/%2e%2e/secret", ESCAPE),
    ("/memories/%2E%2E%2Fx", ESCAPE),
    ("/memories/a%2fb", ESCAPE),
    ("/memories/%5c", ESCAPE),
    ("/memories/%252e%252e/x", ESCAPE),
    ("/memories/a\nb.md", CONTROL),
    ("/memories/a\tb", CONTROL),
    ("/memories/a\rb", CONTROL),
    ("/memories/\x1b[31mred", CONTROL),
    ("/memories/a\u2028b", CONTROL),
    ("/memories/a\x7f", CONTROL),
    ("/memories/a\x85b", CONTROL),
    ("/memories/" + "a" * 1100, "Path is longer than 1024 bytes"),
]


def _commands_for(path: str) -> list[dict]:
    return [
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/new.md"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": path},
    ]


@pytest.fixture
def seeded(service, org):
    service.run(
        org, {"command": "create", "path": "/memories/a.md", "file_text": "alpha\nbeta\n"}, OWNER
    )
    service.run(org, {"command": "create", "path": "/memories/dir/b.md", "file_text": "b"}, OWNER)
    return service


@pytest.mark.parametrize(("path", "message"), HOSTILE_PATHS)
def test_hostile_path_refused_everywhere(seeded, org, path, message):
    before = snapshot(seeded.conn)
    for command in _commands_for(path):
        assert seeded.run_fails(org, command, OWNER) == Failure(
            "22023", "MEMORY_INVALID_PATH", message.format(path)
        ), command
    assert seeded.fails("SELECT memory.read(%s, %s, %s)", org, path, OWNER).hint == (
        "MEMORY_INVALID_PATH"
    )
    assert seeded.fails("SELECT memory.write(%s, %s, 'x', NULL, %s)", org, path, OWNER).hint == (
        "MEMORY_INVALID_PATH"
    )
    assert snapshot(seeded.conn) == before


MALFORMED = [
    ({"command": "view"}, "Missing required parameter `path` for command `view`"),
    (
        {"command": "create", "path": "/memories/a.md"},
        "Missing required parameter `file_text` for command `create`",
    ),
    (
        {"command": "create", "path": "/memories/a.md", "file_text": None},
        "Missing required parameter `file_text` for command `create`",
    ),
    (
        {"command": "create", "path": 5, "file_text": "x"},
        "Parameter `path` for command `create` must be a string",
    ),
    (
        {"command": "create", "path": "/memories/a.md", "file_text": ["x"]},
        "Parameter `file_text` for command `create` must be a string",
    ),
    (
        {"command": "insert", "path": "/memories/a.md", "insert_line": "1", "insert_text": "x"},
        "Parameter `insert_line` for command `insert` must be an integer",
    ),
    (
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1.5, "insert_text": "x"},
        "Parameter `insert_line` for command `insert` must be an integer",
    ),
    (
        {"command": "insert", "path": "/memories/a.md", "insert_line": 10**12, "insert_text": "x"},
        "Parameter `insert_line` for command `insert` is out of range",
    ),
    (
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1},
        "Missing required parameter `insert_text` for command `insert`",
    ),
    (
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha"},
        "Missing required parameter `new_str` for command `str_replace`",
    ),
    (
        {"command": "rename", "old_path": "/memories/a.md"},
        "Missing required parameter `new_path` for command `rename`",
    ),
    (
        {"command": "view", "path": "/memories/a.md", "view_range": [1]},
        "Parameter `view_range` for command `view` must be [start_line, end_line], two integers",
    ),
    (
        {"command": "view", "path": "/memories/a.md", "view_range": "1-2"},
        "Parameter `view_range` for command `view` must be [start_line, end_line], two integers",
    ),
    (
        {"command": "view", "path": "/memories/a.md", "view_range": [1, "end"]},
        "Parameter `view_range` for command `view` must be [start_line, end_line], two integers",
    ),
    ({"command": "explode"}, "Unknown command: explode"),
    ({}, 'A command must be a JSON object with a "command" string'),
    ([], 'A command must be a JSON object with a "command" string'),
    ({"command": 5}, 'A command must be a JSON object with a "command" string'),
    ({"command": None}, 'A command must be a JSON object with a "command" string'),
]


@pytest.mark.parametrize(("command", "message"), MALFORMED)
def test_malformed_command_refused(seeded, org, command, message):
    before = snapshot(seeded.conn)
    assert seeded.run_fails(org, command, OWNER) == Failure("22023", "MEMORY_INVALID", message)
    assert snapshot(seeded.conn) == before


BAD_NAMESPACES = [
    (
        {"scope": "galaxy", **OWNER},
        "unknown namespace scope 'galaxy' (user, agent, chat, project or organization)",
    ),
    (
        {"scope": "agent", **OWNER},
        "scope agent needs agent_id: a non-empty string of at most 1024 bytes",
    ),
    (
        {"scope": "agent", "agent_id": "", **OWNER},
        "scope agent needs agent_id: a non-empty string of at most 1024 bytes",
    ),
    (
        {"scope": "chat", "chat_id": 7, **OWNER},
        "scope chat needs chat_id: a non-empty string of at most 1024 bytes",
    ),
    (
        {"scope": "project", "project_id": "p" * 1025, **OWNER},
        "scope project needs project_id: a non-empty string of at most 1024 bytes",
    ),
    ({"agentId": "x", **OWNER}, "unknown namespace key 'agentId'"),
    (
        {"scope": "user", "chat_id": "c", **OWNER},
        "namespace key chat_id does not belong to scope user",
    ),
    ({"scope": 3}, "namespace scope must be a string"),
    ({"scope": "organization", **OWNER}, "the organization namespace has no owner_id"),
    ({"owner_id": "not-a-uuid"}, "owner_id must be a uuid"),
    ({}, "the service must pass owner_id for a user namespace"),
    ({"scope": "chat", "chat_id": "c1"}, "the service must pass owner_id for a chat namespace"),
    ([], "namespace must be a JSON object, got []"),
    ('"user"', 'namespace must be a JSON object, got "user"'),
]


@pytest.mark.parametrize(("ns", "message"), BAD_NAMESPACES)
def test_malformed_namespace_refused(seeded, org, ns, message):
    before = snapshot(seeded.conn)
    command = {"command": "create", "path": "/memories/n.md", "file_text": "x"}
    failure = seeded.fails("SELECT memory.run(%s, %s, %s::jsonb)", org, command, ns)
    assert failure == Failure("22023", "MEMORY_INVALID", message)
    assert snapshot(seeded.conn) == before


def test_missing_organization_refused(seeded):
    command = {"command": "view", "path": "/memories"}
    assert seeded.fails("SELECT memory.run(NULL, %s, %s)", command, OWNER) == Failure(
        "22023", "MEMORY_INVALID", "an organization id is required"
    )


def test_content_over_max_content_refused(seeded, org):
    seeded.value("SELECT memory.configure('max_content', '1000')")
    before = snapshot(seeded.conn)
    big = "x" * 1001
    too_large = Failure(
        "54000",
        "MEMORY_TOO_LARGE",
        "File content is 1001 characters long, over the limit of 1000 characters",
    )
    assert (
        seeded.run_fails(
            org, {"command": "create", "path": "/memories/big.md", "file_text": big}, OWNER
        )
        == too_large
    )
    assert (
        seeded.run_fails(
            org,
            {
                "command": "str_replace",
                "path": "/memories/a.md",
                "old_str": "alpha\nbeta\n",
                "new_str": big,
            },
            OWNER,
        )
        == too_large
    )
    assert (
        seeded.fails("SELECT memory.write(%s, '/memories/big.md', %s, NULL, %s)", org, big, OWNER)
        == too_large
    )
    exactly = seeded.run(
        org, {"command": "create", "path": "/memories/big.md", "file_text": "y" * 1000}, OWNER
    )
    assert exactly == "File created successfully at: /memories/big.md"
    assert len(snapshot(seeded.conn)) == len(before) + 1


def test_hostile_but_valid_names_are_stored_literally(seeded, org):
    names = [
        "/memories/'; DROP TABLE memory.files; --.md",
        '/memories/"quoted" <tag> & amp.md',
        "/memories/100%.md",
        "/memories/.hidden",
        "/memories/ünïcødé/日本語.md",
    ]
    for name in names:
        assert seeded.run(org, {"command": "create", "path": name, "file_text": name}, OWNER) == (
            f"File created successfully at: {name}"
        )
    paths = [
        row[0] for row in seeded.rows("SELECT path FROM memory.list_files(%s, %s)", org, OWNER)
    ]
    assert sorted(paths) == sorted([*names, "/memories/a.md", "/memories/dir/b.md"])
    for name in names:
        assert (
            seeded.value("SELECT memory.read(%s, %s, %s) ->> 'content'", org, name, OWNER) == name
        )

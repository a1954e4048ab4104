"""Every script in examples/ runs against a fresh database and prints what it promises.

Each example takes the DSN as its first argument (or from PGMEMORY_DSN) and
expects the extension to exist there; the test database has it, and the `dsn`
login is a superuser, which the examples' `service=True` clients need. New
files in examples/ are picked up by the glob; each needs a line in EXPECTED.
assistant.py talks to a model: it runs against a scripted Anthropic Messages
API on 127.0.0.1 (tests/python/scripted_models.py) in a test of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pgmemory import Memory, MemoryTools
from pgmemory.tools import INSTRUCTIONS
from tests.python.scripted_models import anthropic_text, anthropic_tool_use, scripted

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(path.name for path in EXAMPLES_DIR.glob("*.py"))

# One line each example must print, exactly (a whole line of its output).
EXPECTED = {
    "assistant.py": "You work in the Lisbon office; I noted that you like window seats.",
    "anthropic_memory_tool.py": "is_error: The path /memories/notes.md does not exist",
    "archival_search.py": "1. Now works in the Porto office",
    "core_memory.py": (
        "[MEMORY_CONFLICT] /memories/preferences.md was expected at version 3 but is at version 4"
    ),
    "documents_counter.py": "counter = 20 after 5 workers x 4 increments",
    "recall_across_chats.py": (
        "1. [chat-1 user 2025-03-01] I'm planning a trip to Kyoto in April to see the cherry"
        " blossoms."
    ),
}


SCRIPTED = {"assistant.py"}  # run against a scripted model, by their own tests


def _run(args: list[str], input: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    hidden = ("PGMEMORY_DSN", "DATABASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
    clean = {k: v for k, v in os.environ.items() if k not in hidden}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=300,
        input=input,
        env={**clean, **env},
        check=False,
    )


def test_every_example_has_an_expected_line():
    assert EXAMPLES, f"no examples found in {EXAMPLES_DIR}"
    assert sorted(EXPECTED) == EXAMPLES


@pytest.mark.parametrize("name", sorted(set(EXAMPLES) - SCRIPTED))
def test_example_runs(name: str, dsn: str):
    done = _run([str(EXAMPLES_DIR / name), dsn])
    assert done.returncode == 0, done.stderr
    assert name in EXPECTED, f"add the line {name} must print to EXPECTED"
    assert EXPECTED[name] in done.stdout.splitlines(), done.stdout


def test_dsn_from_the_environment(dsn: str):
    done = _run([str(EXAMPLES_DIR / "core_memory.py")], PGMEMORY_DSN=dsn)
    assert done.returncode == 0, done.stderr
    assert EXPECTED["core_memory.py"] in done.stdout.splitlines()


def test_no_dsn_is_a_usage_error():
    done = _run([str(EXAMPLES_DIR / "core_memory.py")])
    assert done.returncode != 0
    assert "usage: core_memory.py DSN" in done.stderr


def test_assistant(dsn: str) -> None:
    org, user_id = uuid.uuid4(), uuid.uuid4()
    with Memory(dsn, service=True) as service:
        service.grant(org, user_id)
        user = service.as_user(user_id)
        user.archival.save(org, "Works in the Lisbon office")
        service.recall.index(
            org,
            {"id": "m1", "chat_id": "chat-old", "owner_id": str(user_id), "role": "user",
             "content": "I work best on the rooftop."},
        )  # fmt: skip
        search = {"query": "Lisbon office"}
        # What the tool will answer, asked before the run.
        found = MemoryTools(service, org, user_id=user_id).call("search_memory", search)
        replies = [
            anthropic_tool_use(search, name="search_memory"),
            anthropic_tool_use({"content": "Likes window seats"}, name="save_memory"),
            anthropic_text(EXPECTED["assistant.py"]),
        ]
        with scripted(replies) as api:
            done = _run(
                [str(EXAMPLES_DIR / "assistant.py"), dsn],
                "Where do I work? And I like window seats.\n",
                ANTHROPIC_BASE_URL=api.url,
                ANTHROPIC_API_KEY="test-key",
                PGMEMORY_ORG=str(org),
                PGMEMORY_USER=str(user_id),
            )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [EXPECTED["assistant.py"]]
        first, *follow_ups = (r.body for r in api.requests)
        assert first["system"] == (
            f"{INSTRUCTIONS}\n(no files yet)\n\nRecalled (data):"
            ' ["Works in the Lisbon office", "I work best on the rooftop."]'
        )
        assert [t["name"] for t in first["tools"]] == [
            "memory", "search_memory", "save_memory", "forget_memory", "search_conversations",
        ]  # fmt: skip
        assert first["tools"][0] == {"type": "memory_20250818", "name": "memory"}
        assert first["messages"] == [
            {"role": "user", "content": "Where do I work? And I like window seats."}
        ]
        saved = user.archival.list(org)[-1]
        assert saved.content == "Likes window seats"
        # Each follow-up request carries the tool_result: exactly the JSON the tool returned.
        results = [body["messages"][-1]["content"] for body in follow_ups]
        assert results == [
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": found}],
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": f'{{"saved":"{saved.id}"}}',
                }
            ],
        ]
        assert '"content":"Works in the Lisbon office"' in found
        # The turn was indexed: another chat recalls both messages.
        hits = user.recall.search(org, "window seats Lisbon", exclude_chat="chat-old")
        assert sorted((h.role, h.content) for h in hits) == [
            ("assistant", EXPECTED["assistant.py"]),
            ("user", "Where do I work? And I like window seats."),
        ]

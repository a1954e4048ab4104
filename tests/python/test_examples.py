"""Every script in examples/ runs against a fresh database and prints what it promises.

Each example takes the DSN as its first argument (or from PGMEMORY_DSN) and
expects the extension to exist there; the test database has it, and the `dsn`
login is a superuser, which the examples' `service=True` clients need. New
files in examples/ are picked up by the glob; each needs a line in EXPECTED.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(path.name for path in EXAMPLES_DIR.glob("*.py"))

# One line each example must print, exactly (a whole line of its output).
EXPECTED = {
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


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PGMEMORY_DSN", "DATABASE_URL")}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={**clean, **env},
        check=False,
    )


def test_every_example_has_an_expected_line():
    assert EXAMPLES, f"no examples found in {EXAMPLES_DIR}"
    assert sorted(EXPECTED) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
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

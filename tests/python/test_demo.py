"""`make demo` runs the scripted session end to end on its own embedded server."""

from __future__ import annotations

import subprocess
import sys


def test_demo_session_prints_what_the_model_sees():
    done = subprocess.run(
        [sys.executable, "-m", "pgmemory.demo"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "File created successfully at: /memories/preferences.md" in out
    assert (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n"
        "120B\t/memories\n94B\t/memories/preferences.md\n26B\t/memories/projects/\n"
        "26B\t/memories/projects/garden.md\n"
    ) in out
    assert (
        "[error MEMORY_INVALID_PATH] Path /memories/../etc/passwd would escape /memories directory"
        in out
    )
    assert (
        '<memory_file path="/memories/preferences.md" scope="user">\n# Preferences\n'
        "- Lives in Lisbon (UTC+0).\n- Prefers metric units.\n- Likes green tea, no sugar.\n"
        "</memory_file>"
    ) in out
    assert "  3     94 B  /memories/preferences.md" in out
    assert "\033[" not in out  # no terminal escapes without a TTY

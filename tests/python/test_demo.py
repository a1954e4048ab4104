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
    # Archival memory with LocalEmbedder: a near-duplicate refused, a search, a supersede.
    assert (
        'memory.configure_embeddings(384) → {"type": "vector", "dimensions": 384}\n'
        "save_extracted: 5 facts, one embedder call, one memory.save_facts call\n"
        "  saved    Works in the Lisbon office\n"
        "  saved    Is allergic to peanuts\n"
        "  saved    Drinks green tea without sugar\n"
        "  saved    Has a daughter named Ana\n"
        "  refused  Works at the Lisbon office  (near-duplicate of 'Works in the Lisbon office',"
        " similarity 0.989)\n"
    ) in out
    assert (
        "=== Search: 'Where does the user work?' (hybrid: vector + full text) ===\n"
        "1. score 0.0328  similarity  0.282  Works in the Lisbon office\n"
        "2. score 0.0161  similarity  0.006  Has a daughter named Ana\n"
        "3. score 0.0159  similarity -0.075  Drinks green tea without sugar\n"
    ) in out
    assert (
        "=== Search again: 'Where does the user work?' ===\n"
        "1. score 0.0328  similarity  0.301  Now works in the Porto office\n"
        "2. score 0.0161  similarity  0.006  Has a daughter named Ana\n"
        "3. score 0.0159  similarity -0.075  Drinks green tea without sugar\n"
    ) in out
    assert (
        "memory.get_fact(old): 'Works in the Lisbon office' is kept, hidden from search;"
        " forgotten: True; superseded by 'Now works in the Porto office'\n"
    ) in out
    assert "\033[" not in out  # no terminal escapes without a TTY

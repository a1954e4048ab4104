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
        "memory.get_fact(org, old): 'Works in the Lisbon office' is kept, hidden from search;"
        " forgotten: True; superseded by 'Now works in the Porto office'\n"
    ) in out
    # Recall: chat-2 finds what was said in chat-1, chat-2's own message left out.
    assert (
        "=== Recall: the app indexes the messages of chat-1 (LocalEmbedder) ===\n"
        "  indexed  [chat-1 user] I'm planning a trip to Kyoto in April to see the cherry blossoms.\n"
        "  indexed  [chat-1 assistant] Lovely! Book the ryokan early: April is peak season in Kyoto.\n"
        "  indexed  [chat-1 user] My sister Marta is coming along; she is vegetarian.\n"
        "\n=== Days later, chat-2 starts; its first message is indexed as it comes ===\n"
        "  indexed  [chat-2 user] Which restaurants should we try on our Japan trip?\n"
    ) in out
    assert (
        "=== recall.search('Which restaurants should we try on our Japan trip?',"
        " exclude_chat='chat-2', k=3) ===\n"
        "1. score 0.0328  similarity  0.389  [chat-1 user] I'm planning a trip to Kyoto in April"
        " to see the cherry blossoms.\n"
        "2. score 0.0161  similarity  0.345  [chat-1 assistant] Lovely! Book the ryokan early:"
        " April is peak season in Kyoto.\n"
        "3. score 0.0159  similarity  0.187  [chat-1 user] My sister Marta is coming along;"
        " she is vegetarian.\n"
    ) in out
    assert (
        "What the model sees in chat-2's system prompt:\n"
        "<earlier_conversations>\n"
        "[2025-03-01 09:31 UTC, chat-1, user] I'm planning a trip to Kyoto in April to see the"
        " cherry blossoms.\n"
        "[2025-03-01 09:32 UTC, chat-1, assistant] Lovely! Book the ryokan early: April is peak"
        " season in Kyoto.\n"
        "[2025-03-01 09:33 UTC, chat-1, user] My sister Marta is coming along; she is vegetarian.\n"
        "</earlier_conversations>\n"
        "chat-2's own message among them: False\n"
    ) in out
    assert (
        "=== Without exclude_chat (k=2), chat-2's own message comes first ===\n"
        "1. score 0.0328  similarity  1.000  [chat-2 user] Which restaurants should we try on our"
        " Japan trip?\n"
        "2. score 0.0323  similarity  0.389  [chat-1 user] I'm planning a trip to Kyoto in April"
        " to see the cherry blossoms.\n"
    ) in out
    assert "\033[" not in out  # no terminal escapes without a TTY

"""`make demo` runs the scripted session end to end on its own embedded server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid


def test_demo_session_prints_what_the_model_sees():
    done = subprocess.run(
        [sys.executable, "-m", "pgmemory.demo"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
        # The scripted model: a real one only with a key (make demo on a developer's machine).
        env={k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))},
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
    # The whole loop: capture (the scripted model: no API key in the test's environment),
    # a contradiction superseded, a secret refused, an invented fact number dropped.
    assert (
        "=== The whole loop: capture with scripted-demo-model ===\n"
        "index_message queued chat-1 and chat-2 for capture; a worker drains the queue:\n"
        "\n=== Capture: chat-1 and chat-2 become facts ===\n"
        "capture_pending: 2 captures applied; saved 2, duplicate 0, superseded 0, forgotten 0,"
        " refused as secret 0, dropped (unknown number) 0, failed 0\n"
    ) in out
    assert (
        "=== Capture: chat-3 contradicts a fact, and holds a secret ===\n"
        "capture_pending: 1 captures applied; saved 0, duplicate 0, superseded 1, forgotten 0,"
        " refused as secret 1, dropped (unknown number) 1, failed 0\n"
        "  live                       Drinks green tea without sugar\n"
        "  live                       Has a daughter named Ana\n"
        "  live                       Is allergic to peanuts\n"
        "  superseded (kept, hidden)  Works in the Lisbon office\n"
        "  live                       Now works in the Porto office\n"
        "  live                       Has a sister, Marta, who is vegetarian"
        "  from chat-1 by scripted-demo-model\n"
        "  superseded (kept, hidden)  Is planning a trip to Kyoto in April 2025"
        "  from chat-1 by scripted-demo-model\n"
        "  live                       Is planning a trip to Osaka in April 2025; cancelled the"
        " Kyoto trip on 19 March 2025  from chat-3 by scripted-demo-model\n"
    ) in out
    assert "4111" not in out.split("holds a secret ===")[1].split("=== chat-4")[0].replace(
        "[chat-3 user] I paid the hotel with my card 4111 1111 1111 1111.", ""
    )
    assert (
        "--- system prompt (Memory.instructions) ---\n"
        "You have a long-term memory of this user, kept across conversations.\n"
    ) in out
    assert (
        "--- recall_context(query, exclude_chat='chat-4', facts=3, messages=2) ---\n"
        "[fact] Is planning a trip to Osaka in April 2025; cancelled the Kyoto trip on"
        " 19 March 2025\n"
        "[fact] Drinks green tea without sugar\n"
        "[fact] Has a sister, Marta, who is vegetarian\n"
    ) in out
    # The two messages tie in the fusion (first by vector, first by text): ties go by
    # their ids, random per run.
    recalled = out.split("[fact] Has a sister, Marta, who is vegetarian\n")[1].split("\n\n")[0]
    assert sorted(recalled.splitlines()) == [
        "[message] I'm planning a trip to Kyoto in April to see the cherry blossoms.",
        "[message] Which restaurants should we try on our Japan trip?",
    ]
    tool = re.search(
        r"=== The model's tools: memory, search_memory, save_memory, forget_memory,"
        r" search_conversations ===\n"
        r'model → search_memory \{"query": "Who is Marta\?", "k": 1\}\n(.*)\n',
        out,
    )
    assert tool is not None, out
    [memory] = json.loads(tool[1])["memories"]
    assert memory["content"] == "Has a sister, Marta, who is vegetarian"
    assert uuid.UUID(memory["id"]) and memory["created_at"].endswith("Z")
    assert "\033[" not in out  # no terminal escapes without a TTY

"""The subsets run on the other installs (tests/install_modes.py) cover every function."""

from __future__ import annotations

import re
from pathlib import Path

from tests.install_modes import PLAIN

ROOT = Path(__file__).resolve().parents[2]


def test_the_plain_subset_calls_every_public_function(db):
    public = [
        row[0]
        for row in db.execute(
            "SELECT DISTINCT proname::text FROM pg_proc WHERE pronamespace = 'memory'::regnamespace"
            " AND proname NOT LIKE '\\_%' ORDER BY 1"
        ).fetchall()
    ]
    called = set()
    for path in PLAIN:
        source = (ROOT / path).read_text()
        called.update(re.findall(r"memory\.(\w+)\(", source))
        if re.search(r"\.run(_fails)?\(", source):  # tests.support.Principal calls memory.run
            called.add("run")
    assert len(public) > 30
    assert [name for name in public if name not in called] == []

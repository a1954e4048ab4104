"""The SQL tests again, on memory installed the other ways (`make test` runs this).

`python -m tests.install_modes plain` runs PLAIN on a plain install (the
scripts run directly, no extension: pgmemory install --plain);
`python -m tests.install_modes upgrade` runs UPGRADE on a database created at
the oldest release and brought up with ALTER EXTENSION memory UPDATE.
tests/sql/test_install_modes.py checks that PLAIN calls every public function.
"""

from __future__ import annotations

import os
import sys

import pytest

# Every public function is called by one of these (checked). The suites left out (fuzz,
# bad input, hostile review, isolation properties, concurrency, faults, load, dump,
# scale, differential) repeat those calls at length; the upgrade tests need the extension.
PLAIN = [
    "tests/sql/test_smoke.py",
    "tests/sql/test_core.py",
    "tests/sql/test_facts.py",
    "tests/sql/test_recall.py",
    "tests/sql/test_capture.py",
    "tests/sql/test_recall_context.py",
    "tests/sql/test_documents.py",
    "tests/sql/test_access.py",
    "tests/sql/test_stats.py",
    "tests/sql/test_search_options.py",
    "tests/sql/test_namespace_indexes.py",
    "tests/sql/test_maintenance_statements.py",
    "tests/sql/test_portability.py",
    "tests/sql/test_privileges.py",
    "tests/sql/test_catalog.py",
]
UPGRADE = [
    "tests/sql/test_smoke.py",
    "tests/sql/test_core.py",
    "tests/sql/test_facts.py",
    "tests/sql/test_save_facts_binary.py",  # save_facts' signature changed in 0.2.0
    "tests/sql/test_set_embeddings_binary.py",  # and set_memory_embeddings'
    "tests/sql/test_search_join.py",  # memory._rank's row estimate is new in 0.2.0
    "tests/sql/test_maintenance_statements.py",  # new in 0.2.0, with the helpers it shares
]
MODES = {"plain": PLAIN, "upgrade": UPGRADE}


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] not in MODES:
        print(f"usage: python -m tests.install_modes {{{','.join(MODES)}}} [pytest args]")
        return 2
    os.environ["PGMEMORY_TEST_INSTALL"] = argv[0]
    return int(pytest.main(["-q", "-p", "no:cacheprovider", *argv[1:], *MODES[argv[0]]]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

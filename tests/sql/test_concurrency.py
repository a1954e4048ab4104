"""Concurrent edits of one core memory file: no lost update, exact versions.

Each worker is its own connection (a Principal), started together on a barrier;
every call is one transaction, as the Python client makes it.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg

from tests.support import Failure, Principal, user_claims

WORKERS = 8
BARRIER_TIMEOUT = 120  # seconds; only guards against a hang, never asserted on

PATH = "/memories/shared/notes.md"
EDITED = "The file /memories/shared/notes.md has been edited."
REPLACED = (
    "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
)


def attempt(principal: Principal, query: str, *params: Any) -> Any:
    """The single value the query returns, or the Failure it raised."""
    try:
        return principal.value(query, *params)
    except psycopg.Error as err:
        return Failure(err.sqlstate or "", err.diag.message_hint, err.diag.message_primary or "")


def together(workers: list[Principal], job: Callable[[int, Principal, threading.Barrier], Any]):
    """Runs job(index, principal, barrier) in one thread per worker; results in worker order."""
    barrier = threading.Barrier(len(workers), timeout=BARRIER_TIMEOUT)
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(job, i, p, barrier) for i, p in enumerate(workers)]
        return [f.result() for f in futures]


def same_user(as_, member) -> list[Principal]:
    """WORKERS connections of one user with read permission, acting on its own memory."""
    user_id, first = member()
    return [first] + [as_(user_claims(user_id)) for _ in range(WORKERS - 1)]


def read(principal: Principal, org: uuid.UUID, path: str) -> dict[str, Any] | None:
    return principal.value("SELECT memory.read(%s, %s)", org, path)


# ---------------------------------------------------------------- str_replace / insert


def test_concurrent_inserts_and_replaces_lose_nothing(as_, member, org):
    workers = same_user(as_, member)
    create = {"command": "create", "path": PATH, "file_text": "header\n"}
    assert workers[0].run(org, create) == f"File created successfully at: {PATH}"
    lines_per_worker = 13  # 13 inserts + 13 replaces = 26 edits per worker

    def job(w: int, me: Principal, barrier: threading.Barrier) -> list[tuple[str, Any]]:
        barrier.wait()
        outcomes: list[tuple[str, Any]] = []

        def replace(i: int) -> None:
            old, new = f"<w{w}:{i}:pending>", f"<w{w}:{i}:done>"
            command = {"command": "str_replace", "path": PATH, "old_str": old, "new_str": new}
            outcomes.append(("replace", attempt(me, "SELECT memory.run(%s, %s)", org, command)))

        for i in range(lines_per_worker):
            command = {
                "command": "insert",
                "path": PATH,
                "insert_line": 0,
                "insert_text": f"<w{w}:{i}:pending>",
            }
            outcomes.append(("insert", attempt(me, "SELECT memory.run(%s, %s)", org, command)))
            if i > 0:
                replace(i - 1)  # a marker this worker inserted earlier, others inserting meanwhile
        replace(lines_per_worker - 1)
        return outcomes

    results = together(workers, job)

    failures = [r for outcomes in results for _, r in outcomes if isinstance(r, Failure)]
    assert failures == []
    for w, outcomes in enumerate(results):
        assert [kind for kind, _ in outcomes] == ["insert"] + ["insert", "replace"] * (
            lines_per_worker - 1
        ) + ["replace"]
        replaced = 0
        for kind, text in outcomes:
            if kind == "insert":
                assert text == EDITED
            else:
                # The snippet's line numbers depend on the other workers; the
                # replaced line is in it, numbered, and the header is exact.
                assert text.startswith(REPLACED), text
                snippet = text.removeprefix(REPLACED).split("\n")
                assert any(line.endswith(f"\t<w{w}:{replaced}:done>") for line in snippet), text
                replaced += 1
    edits = sum(len(outcomes) for outcomes in results)
    assert edits == WORKERS * lines_per_worker * 2

    expected = ["header"] + [
        f"<w{w}:{i}:done>" for w in range(WORKERS) for i in range(lines_per_worker)
    ]
    file = read(workers[0], org, PATH)
    assert file is not None
    content = file["content"]
    assert content.endswith("\n")
    lines = content.removesuffix("\n").split("\n")
    assert Counter(lines) == Counter(expected)
    assert lines[-1] == "header"  # every insert went above it
    # Each worker's own lines keep its order: it inserted them one after another at line 0.
    for w in range(WORKERS):
        mine = [line for line in lines if line.startswith(f"<w{w}:")]
        assert mine == [f"<w{w}:{i}:done>" for i in reversed(range(lines_per_worker))]
    assert file["version"] == 1 + edits
    assert workers[0].rows("SELECT path, bytes, version FROM memory.list_files(%s)", org) == [
        (PATH, len(content.encode()), 1 + edits)
    ]


# ---------------------------------------------------------------- write with expected_version


def conflict(path: str, expected: int, actual: int) -> Failure:
    return Failure(
        "40001",
        "MEMORY_CONFLICT",
        f"{path} was expected at version {expected} but is at version {actual}",
    )


def test_write_expected_version_one_winner_per_round(as_, member, org):
    workers = same_user(as_, member)
    path = "/memories/race.md"
    assert workers[0].value("SELECT memory.write(%s, %s, 'start\n')", org, path) == {
        "path": path,
        "version": 1,
    }
    rounds = 6

    def job(w: int, me: Principal, barrier: threading.Barrier) -> list[tuple[int, Any]]:
        outcomes = []
        for r in range(rounds):
            barrier.wait()  # the previous round is over everywhere
            seen = read(me, org, path)["version"]
            barrier.wait()  # everybody has read before anybody writes
            text = f"round {r} by worker {w}\n"
            outcomes.append(
                (seen, attempt(me, "SELECT memory.write(%s, %s, %s, %s)", org, path, text, seen))
            )
        return outcomes

    results = together(workers, job)

    for r in range(rounds):
        version = r + 1  # what every worker read in round r
        seen = [results[w][r][0] for w in range(WORKERS)]
        assert seen == [version] * WORKERS
        outcomes = [results[w][r][1] for w in range(WORKERS)]
        winners = [w for w, o in enumerate(outcomes) if not isinstance(o, Failure)]
        assert len(winners) == 1, outcomes
        assert outcomes[winners[0]] == {"path": path, "version": version + 1}
        for w, outcome in enumerate(outcomes):
            if w != winners[0]:
                assert outcome == conflict(path, version, version + 1)
        if r == rounds - 1:
            file = read(workers[0], org, path)
            assert file["content"] == f"round {r} by worker {winners[0]}\n"
            assert file["version"] == rounds + 1

    # 0 = must not exist yet: refused on an existing file, which stays as it was.
    assert workers[0].fails("SELECT memory.write(%s, %s, 'late\n', 0)", org, path) == conflict(
        path, 0, rounds + 1
    )
    assert read(workers[0], org, path)["version"] == rounds + 1
    # A version ahead of the file is a conflict too.
    assert workers[0].fails(
        "SELECT memory.write(%s, %s, 'ahead\n', %s)", org, path, rounds + 5
    ) == conflict(path, rounds + 5, rounds + 1)


def test_write_expected_version_zero_on_new_path_one_creator(as_, member, org):
    workers = same_user(as_, member)
    path = "/memories/fresh/only-once.md"

    def job(w: int, me: Principal, barrier: threading.Barrier) -> Any:
        barrier.wait()
        return attempt(me, "SELECT memory.write(%s, %s, %s, 0)", org, path, f"by worker {w}\n")

    outcomes = together(workers, job)

    winners = [w for w, o in enumerate(outcomes) if not isinstance(o, Failure)]
    assert len(winners) == 1, outcomes
    assert outcomes[winners[0]] == {"path": path, "version": 1}
    for w, outcome in enumerate(outcomes):
        if w != winners[0]:
            assert outcome == conflict(path, 0, 1)
    file = read(workers[0], org, path)
    assert (file["content"], file["version"]) == (f"by worker {winners[0]}\n", 1)
    assert workers[0].rows("SELECT path, version FROM memory.list_files(%s)", org) == [(path, 1)]


def test_write_expected_version_for_missing_file(as_, member, org):
    [me, *_] = same_user(as_, member)
    path = "/memories/missing.md"
    assert me.fails("SELECT memory.write(%s, %s, 'x', 3)", org, path) == Failure(
        "40001", "MEMORY_CONFLICT", f"{path} was expected at version 3 but does not exist"
    )
    assert read(me, org, path) is None


# ---------------------------------------------------------------- create


def test_concurrent_create_of_one_new_path(as_, service, org):
    owner = uuid.uuid4()
    ns = {"owner_id": str(owner)}
    workers = [as_("") for _ in range(WORKERS)]  # the service, acting for `owner`
    path = "/memories/projects/plan.md"
    texts = [f"plan {w}: ünïcode ✓\nsecond line\n" for w in range(WORKERS)]

    def job(w: int, me: Principal, barrier: threading.Barrier) -> Any:
        barrier.wait()
        command = {"command": "create", "path": path, "file_text": texts[w]}
        return attempt(me, "SELECT memory.run(%s, %s, %s)", org, command, ns)

    outcomes = together(workers, job)

    assert outcomes == [f"File created successfully at: {path}"] * WORKERS
    file = service.value("SELECT memory.read(%s, %s, %s)", org, path, ns)
    assert file["version"] == WORKERS
    assert file["content"] in texts
    assert service.rows("SELECT path, version FROM memory.list_files(%s, %s)", org, ns) == [
        (path, WORKERS)
    ]
    assert service.rows(
        "SELECT scope, owner_id, scope_id FROM memory.namespaces WHERE organization_id = %s", org
    ) == [("user", owner, None)]

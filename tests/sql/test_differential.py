"""Differential test: `memory.run` against the reference memory tool.

The reference is the `anthropic` SDK's `BetaLocalFilesystemMemoryTool`, run on a
temporary directory. Every command of a fixed script goes through both; both must
succeed with the same text or fail with the same message. The only differences
(the deviations docs/core-memory.md lists) are applied to the reference side by
`SpecOracle` (tests/oracle.py), one method each.
All mismatches are collected so one run shows every difference.
"""

from __future__ import annotations

import difflib
import json
import uuid
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from tests.oracle import Command, Outcome, SpecOracle

ORG_NS: dict[str, str] = {"scope": "organization"}


def sql_run(
    db: psycopg.Connection, org: uuid.UUID, ns: dict[str, str], command: Command
) -> Outcome:
    try:
        row = db.execute(
            "SELECT memory.run(%s, %s, %s)", (org, Jsonb(command), Jsonb(ns))
        ).fetchone()
    except psycopg.Error as err:
        db.rollback()
        message = err.diag.message_primary
        return Outcome(False, message if message is not None else f"<no message: {err!r}>")
    db.commit()
    assert row is not None
    return Outcome(True, row[0])


# --------------------------------------------------------------------------------------
# The script
# --------------------------------------------------------------------------------------


def view(path: str, view_range: list[int] | None = None) -> Command:
    command: Command = {"command": "view", "path": path}
    if view_range is not None:
        command["view_range"] = view_range
    return command


def create(path: str, file_text: str) -> Command:
    return {"command": "create", "path": path, "file_text": file_text}


def str_replace(path: str, old_str: str, new_str: str) -> Command:
    return {"command": "str_replace", "path": path, "old_str": old_str, "new_str": new_str}


def insert(path: str, insert_line: int, insert_text: str) -> Command:
    return {
        "command": "insert",
        "path": path,
        "insert_line": insert_line,
        "insert_text": insert_text,
    }


def delete(path: str) -> Command:
    return {"command": "delete", "path": path}


def rename(old_path: str, new_path: str) -> Command:
    return {"command": "rename", "old_path": old_path, "new_path": new_path}


M = "/memories"
TEN_LINES = "".join(f"L{i}\n" for i in range(1, 11))
UNICODE_TEXT = "héllo wörld\n日本語のテキスト\nemoji 🎉🚀 here\ncombining e\u0301 and n\u0303\n"

SCRIPT: list[Command] = [
    # --- an empty store
    view(M),
    view(f"{M}/nothing.md"),
    # --- create: plain, no trailing newline, empty, CRLF, unicode text and names
    create(f"{M}/notes.md", "# Notes\nline two\nline three\n"),
    create(f"{M}/plain.txt", "no trailing newline\nsecond"),
    create(f"{M}/empty.md", ""),
    create(f"{M}/crlf.md", "first\r\nsecond\r\nthird\r\n"),
    create(f"{M}/unicode.md", UNICODE_TEXT),
    create(f"{M}/café.md", "precomposed name\n"),
    create(f"{M}/cafe\u0301.md", "decomposed name\n"),
    create(f"{M}/ranges.md", TEN_LINES),
    # --- nested directories 3+ levels deep, hidden files and directories
    create(f"{M}/projects/alpha/spec.md", "# Alpha spec\n"),
    create(f"{M}/projects/alpha/design/deep.md", "deep\n"),
    create(f"{M}/projects/alpha/design/deeper/deepest.md", "deepest\n"),
    create(f"{M}/projects/beta.md", "beta\n"),
    create(f"{M}/projects/.draft.md", "hidden draft\n"),
    create(f"{M}/.hidden.md", "hidden at the root\n"),
    create(f"{M}/.config/settings.md", "theme = dark\n"),
    # --- sizes: 1280 B = 1.25K -> '1.2K' (half-even), 1792 B -> '1.8K', 2000 B -> '2.0K'
    create(f"{M}/sizes/k1280.md", "a" * 1280),
    create(f"{M}/sizes/k1792.md", "b" * 1792),
    create(f"{M}/sizes/b2000.md", "c" * 2000),
    create(f"{M}/sizes/k1024.md", "d" * 1024),
    create(f"{M}/sizes/tiny.md", "é"),
    # --- name order: by code point, per directory level ('notes/' before 'notes-old.md')
    create(f"{M}/order/notes.md", "n\n"),
    create(f"{M}/order/notes-old.md", "old\n"),
    create(f"{M}/order/notes/x.md", "x\n"),
    create(f"{M}/order/a.md", "a\n"),
    create(f"{M}/order/B.md", "B\n"),
    create(f"{M}/order/Z.md", "Z\n"),
    create(f"{M}/order/é.md", "e acute\n"),
    create(f"{M}/order/_u.md", "underscore\n"),
    create(f"{M}/order/10.md", "ten\n"),
    create(f"{M}/order/9.md", "nine\n"),
    create(f"{M}/emoji/🎉.md", "party\n"),
    create(f"{M}/emoji/日本.md", "japan\n"),
    create(f"{M}/zero/a.md", ""),
    create(f"{M}/zero/b.md", ""),
    # --- directory views, with and without a trailing slash
    view(M),
    view(f"{M}/"),
    view(f"{M}/projects"),
    view(f"{M}/projects/"),
    view(f"{M}/projects/alpha"),
    view(f"{M}/sizes"),
    view(f"{M}/order"),
    view(f"{M}/emoji/"),
    view(f"{M}/zero"),
    view(f"{M}/.config"),
    # --- file views
    view(f"{M}/notes.md"),
    view(f"{M}/plain.txt"),
    view(f"{M}/empty.md"),
    view(f"{M}/crlf.md"),
    view(f"{M}/unicode.md"),
    view(f"{M}/café.md"),
    view(f"{M}/cafe\u0301.md"),
    view(f"{M}/.hidden.md"),
    view(f"{M}/emoji/🎉.md"),
    view(f"{M}/projects/alpha/design/deeper/deepest.md"),
    view(f"{M}/notes.md/inside"),
    # --- view_range
    view(f"{M}/ranges.md", [3, 5]),
    view(f"{M}/ranges.md", [7, -1]),
    view(f"{M}/ranges.md", [0, 2]),
    view(f"{M}/ranges.md", [8, 50]),
    view(f"{M}/ranges.md", [5, 3]),
    view(f"{M}/ranges.md", [1, -2]),
    view(f"{M}/ranges.md", [-5, 2]),
    view(f"{M}/ranges.md", [11, -1]),
    view(f"{M}/ranges.md", [20, -1]),
    view(f"{M}/plain.txt", [2, -1]),
    # --- create on an existing file overwrites; on a directory it fails
    create(f"{M}/notes.md", "# Notes\nline two\nline three\nline four\n"),
    view(f"{M}/notes.md"),
    create(f"{M}/projects", "not a directory any more\n"),
    # --- str_replace
    str_replace(f"{M}/notes.md", "line two", "line 2"),
    str_replace(f"{M}/notes.md", "line 2\n", "line 2\nadded a\nadded b\n"),
    view(f"{M}/notes.md"),
    str_replace(f"{M}/notes.md", "added a\nadded b\n", ""),
    view(f"{M}/notes.md"),
    str_replace(f"{M}/ranges.md", "L6\n", "L6 changed\n"),
    str_replace(f"{M}/ranges.md", "L9\nL10\n", "L9\nL10\nL11"),
    str_replace(f"{M}/plain.txt", "second", "2nd"),
    str_replace(f"{M}/crlf.md", "second\r\n", "2nd\r\n"),
    view(f"{M}/crlf.md"),
    str_replace(f"{M}/unicode.md", "🎉🚀", "✨"),
    str_replace(f"{M}/unicode.md", "e\u0301", "é"),
    view(f"{M}/unicode.md"),
    str_replace(f"{M}/missing.md", "a", "b"),
    str_replace(f"{M}/notes.md", "absent", "x"),
    create(f"{M}/dup.md", "x = 1\ny = 2\nx = 1\n"),
    str_replace(f"{M}/dup.md", "x = 1", "x = 2"),
    create(f"{M}/aaaa.md", "aaaa\n"),
    str_replace(f"{M}/aaaa.md", "aa", "b"),
    create(f"{M}/abab.md", "ab ab\nab\n"),
    str_replace(f"{M}/abab.md", "ab", "c"),
    create(f"{M}/aaa.md", "aaa\nbbb\n"),
    str_replace(f"{M}/aaa.md", "aa", "Z"),
    view(f"{M}/aaa.md"),
    create(f"{M}/special.md", "100% of a_b\\c\n[x]* (y)+ $z ^w .\n"),
    str_replace(f"{M}/special.md", "a%b", "nope"),
    str_replace(f"{M}/special.md", "% of a_b\\c", "percent"),
    str_replace(f"{M}/special.md", "[x]* (y)+ $z ^w .", "regex-free"),
    view(f"{M}/special.md"),
    str_replace(f"{M}/projects", "beta", "gamma"),
    str_replace(f"{M}/projects/", "beta", "gamma"),
    # --- insert
    insert(f"{M}/ranges.md", 0, "L0"),
    insert(f"{M}/ranges.md", 12, "after the end"),
    view(f"{M}/ranges.md"),
    insert(f"{M}/ranges.md", 99, "too far"),
    insert(f"{M}/ranges.md", -1, "negative"),
    insert(f"{M}/plain.txt", 2, "third"),
    view(f"{M}/plain.txt"),
    create(f"{M}/empty2.md", ""),
    insert(f"{M}/empty2.md", 0, "first line"),
    view(f"{M}/empty2.md"),
    create(f"{M}/empty3.md", ""),
    insert(f"{M}/empty3.md", 1, "out of range"),
    insert(f"{M}/empty3.md", 0, ""),
    view(f"{M}/empty3.md"),
    create(f"{M}/newline.md", "\n"),
    insert(f"{M}/newline.md", 1, "after the blank line"),
    view(f"{M}/newline.md"),
    insert(f"{M}/notes.md", 2, "multi\nline\n\n"),
    view(f"{M}/notes.md"),
    insert(f"{M}/crlf.md", 1, "inserted\r"),
    view(f"{M}/crlf.md"),
    insert(f"{M}/unicode.md", 4, "ünïcödé 🙂"),
    view(f"{M}/unicode.md"),
    insert(f"{M}/missing.md", 0, "x"),
    insert(f"{M}/order", 0, "x"),
    # --- delete
    delete(f"{M}/dup.md"),
    delete(f"{M}/dup.md"),
    delete(M),
    delete(f"{M}/"),
    delete(f"{M}/zero"),
    view(f"{M}/zero"),
    delete(f"{M}/emoji/🎉.md"),
    view(f"{M}/emoji"),
    delete(f"{M}/emoji/日本.md"),
    view(f"{M}/emoji"),
    delete(f"{M}/order/notes/"),
    view(f"{M}/order"),
    # --- rename
    rename(f"{M}/plain.txt", f"{M}/archive/2024/q1/plain.txt"),
    view(f"{M}/archive"),
    view(f"{M}/archive/2024/q1/plain.txt"),
    view(f"{M}/plain.txt"),
    rename(f"{M}/projects", f"{M}/work/projects"),
    view(f"{M}/work"),
    view(f"{M}/work/projects/.draft.md"),
    view(f"{M}/projects"),
    rename(M, f"{M}/elsewhere"),
    rename(f"{M}/notes.md", f"{M}/crlf.md"),
    rename(f"{M}/notes.md", f"{M}/sizes"),
    rename(f"{M}/nope.md", f"{M}/newdir/nope2.md"),
    rename(f"{M}/nope.md", f"{M}/notes.md"),
    view(f"{M}/newdir"),
    rename(f"{M}/archive/2024/q1/plain.txt", f"{M}/plain-restored.txt"),
    view(f"{M}/archive"),
    rename(f"{M}/café.md", f"{M}/renamed/ça.md"),
    rename(f"{M}/sizes/", f"{M}/renamed/sizes"),
    view(f"{M}/renamed"),
    # --- a directory is a whole path segment, never a name prefix or a LIKE pattern
    create(f"{M}/a_c/x.md", "under a_c\n"),
    create(f"{M}/abc/y.md", "under abc\n"),
    create(f"{M}/100%/z.md", "under 100%\n"),
    create(f"{M}/100 percent/w.md", "under 100 percent\n"),
    view(f"{M}/order/note"),
    str_replace(f"{M}/ord", "a", "b"),
    insert(f"{M}/ord", 0, "x"),
    delete(f"{M}/order/not"),
    rename(f"{M}/ord", f"{M}/ord2"),
    delete(f"{M}/a_c"),
    view(f"{M}/abc"),
    view(f"{M}/a_c"),
    rename(f"{M}/100%", f"{M}/pct"),
    view(f"{M}/100 percent"),
    view(f"{M}/pct/z.md"),
    # --- odd but valid edits: empty old_str, emptying a file
    create(f"{M}/blank.md", ""),
    str_replace(f"{M}/blank.md", "", "filled\n"),
    view(f"{M}/blank.md"),
    str_replace(f"{M}/blank.md", "", "x"),
    str_replace(f"{M}/blank.md", "filled\n", ""),
    view(f"{M}/blank.md"),
    # --- paths outside /memories
    view("/etc/passwd"),
    create(f"{M}/../escape.md", "x"),
    # --- the final state
    view(M),
]


def compare(
    db: psycopg.Connection,
    org: uuid.UUID,
    ns: dict[str, str],
    oracle: SpecOracle,
    commands: list[Command],
    mismatches: list[str],
) -> None:
    for command in commands:
        expected = oracle.run(command)
        got = sql_run(db, org, ns, command)
        if expected != got:
            mismatches.append(describe(len(mismatches) + 1, command, expected, got))


def final_sweep(oracle: SpecOracle) -> list[Command]:
    """A view of every directory and every file the reference holds at the end."""
    dirs, files = oracle.tree()
    return [view(path) for path in dirs + files]


def describe(number: int, command: Command, expected: Outcome, got: Outcome) -> str:
    def kind(outcome: Outcome) -> str:
        return "ok" if outcome.ok else "error"

    lines = [
        f"[{number}] {json.dumps(command, ensure_ascii=False)}",
        f"    expected {kind(expected)}: {expected.text!r}",
        f"    got      {kind(got)}: {got.text!r}",
    ]
    if "\n" in expected.text or "\n" in got.text:
        diff = difflib.unified_diff(
            expected.text.split("\n"), got.text.split("\n"), "expected", "got", lineterm=""
        )
        lines.extend(f"      {line!r}" for line in diff)
    return "\n".join(lines)


def test_script_is_big_enough() -> None:
    assert len(SCRIPT) >= 60
    assert {c["command"] for c in SCRIPT} == {
        "view",
        "create",
        "str_replace",
        "insert",
        "delete",
        "rename",
    }


def test_memory_run_matches_reference(db: psycopg.Connection, tmp_path: Path) -> None:
    org = uuid.uuid4()
    oracle = SpecOracle(tmp_path)
    mismatches: list[str] = []
    compare(db, org, ORG_NS, oracle, SCRIPT, mismatches)
    compare(db, org, ORG_NS, oracle, final_sweep(oracle), mismatches)
    assert not mismatches, (
        f"{len(mismatches)} difference(s) between memory.run and the reference:\n\n"
        + "\n\n".join(mismatches)
    )


def test_namespaces_do_not_see_each_other(db: psycopg.Connection) -> None:
    """The script interleaved in an organization and a user namespace of one org.

    Both start empty and get the same commands in lockstep, so with isolation every
    outcome is the same in both; a namespace seeing the other's files would differ
    (its first view of /memories, `The path … does not exist`, the sizes). A marker
    file in each then shows up only in its own view of /memories.
    """
    org = uuid.uuid4()
    user_ns = {"scope": "user", "owner_id": str(uuid.uuid4())}
    differences: list[str] = []
    for command in SCRIPT:
        in_org = sql_run(db, org, ORG_NS, command)
        in_user = sql_run(db, org, user_ns, command)
        if in_org != in_user:
            differences.append(describe(len(differences) + 1, command, in_org, in_user))
    assert not differences, "organization (expected) and user (got) namespaces differ:\n\n" + (
        "\n\n".join(differences)
    )

    assert sql_run(db, org, ORG_NS, create(f"{M}/only-org.md", "org\n")).ok
    assert sql_run(db, org, user_ns, create(f"{M}/only-user.md", "user\n")).ok
    org_view = sql_run(db, org, ORG_NS, view(M))
    user_view = sql_run(db, org, user_ns, view(M))
    assert org_view.ok and user_view.ok
    assert f"\t{M}/only-org.md" in org_view.text
    assert f"\t{M}/only-user.md" not in org_view.text
    assert f"\t{M}/only-user.md" in user_view.text
    assert f"\t{M}/only-org.md" not in user_view.text
    assert not sql_run(db, org, ORG_NS, view(f"{M}/only-user.md")).ok
    assert not sql_run(db, org, user_ns, view(f"{M}/only-org.md")).ok

"""pg_dump / pg_restore of a database using the extension.

The extension's tables are registered with pg_extension_config_dump, so a
dump of the database must carry every row: files with their versions and
timestamps, namespaces, permissions and settings. A restore into a fresh
database creates the extension again and loads those rows back.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import psycopg
import psycopg.types.json

from pgmemory.server import pg_bin_dir
from tests.support import SERVICE, Principal, user_claims

TABLES = {
    "namespaces": "organization_id, id",
    "files": "organization_id, namespace_id, path",
    "permissions": "organization_id, user_id, permission",
    "settings": "key",
}

AGENT = {"scope": "agent", "agent_id": "agent-✓ (planner)"}
ORGANIZATION = {"scope": "organization"}
UNICODE_PATH = "/memories/日本語/ünïcödé notes.md"
UNICODE_TEXT = "Grüße aus Köln 🌍\n東京は晴れ\nemoji: 👩‍💻\n"


def _create(path: str, text: str) -> dict[str, str]:
    return {"command": "create", "path": path, "file_text": text}


def _table(conn: psycopg.Connection, table: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM memory.{table} ORDER BY {TABLES[table]}")
        return cur.fetchall()


def _tables(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        return {table: _table(conn, table) for table in TABLES}


def _bin(name: str) -> str:
    return str(pg_bin_dir() / name)


def _pg(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _fill(service: Principal, member, org: uuid.UUID, other_org: uuid.UUID) -> dict[str, Any]:
    """Files in every kind of namespace, edits, grants and settings; returns the namespaces used."""
    owner, me = member("memory.read", "memory.manage")
    someone = uuid.uuid4()
    chat = {"scope": "chat", "chat_id": "chat-42", "owner_id": str(someone)}
    project = {"scope": "project", "project_id": "projet/été ✓", "owner_id": str(someone)}

    # The member's own memory: nested paths, unicode, edits (versions > 1).
    me.run(org, _create("/memories/notes/todo.md", "- buy milk\n- call Bob\n"))
    me.run(
        org,
        {
            "command": "str_replace",
            "path": "/memories/notes/todo.md",
            "old_str": "milk",
            "new_str": "oat milk",
        },
    )
    me.run(
        org,
        {
            "command": "insert",
            "path": "/memories/notes/todo.md",
            "insert_line": 0,
            "insert_text": "# Todo",
        },
    )
    me.run(org, _create("/memories/notes/deep/er/still/file.md", "deep\n"))
    me.run(org, _create(UNICODE_PATH, UNICODE_TEXT))
    me.run(org, _create("/memories/old.md", "to be moved\n"))
    me.run(
        org,
        {
            "command": "rename",
            "old_path": "/memories/old.md",
            "new_path": "/memories/archive/old.md",
        },
    )
    me.run(org, _create("/memories/gone.md", "deleted before the dump\n"))
    me.run(org, {"command": "delete", "path": "/memories/gone.md"})
    me.run(org, _create("/memories/.hidden", "not listed by view\n"))
    # The member's agent namespace, written with optimistic versions.
    me.value("SELECT memory.write(%s, '/memories/style.md', 'terse\n', 0, %s)", org, AGENT)
    me.value(
        "SELECT memory.write(%s, '/memories/style.md', 'terse, <b>bold</b>\n', 1, %s)", org, AGENT
    )
    # Organization memory (the member has the manage permission).
    me.run(org, _create("/memories/policy.md", "Answer in English.\n"), ORGANIZATION)
    me.run(
        org,
        {
            "command": "str_replace",
            "path": "/memories/policy.md",
            "old_str": "English",
            "new_str": "français",
        },
        ORGANIZATION,
    )
    # The service acting for another user: chat and project namespaces.
    service.run(org, _create("/memories/summary.md", 'we talked about "quotes" & <tags>\n'), chat)
    service.run(org, _create("/memories/a/b/c.md", "abc\n"), project)
    service.run(org, _create("/memories/a/empty.md", ""), project)
    # Another organization.
    service.run(other_org, _create("/memories/welcome.md", "hello\n"), ORGANIZATION)
    service.run(other_org, _create("/memories/me.md", "other org\n"), {"owner_id": str(owner)})

    # Permissions and settings.
    reader = uuid.uuid4()
    for organization, user, permission in (
        (org, reader, "memory.read"),
        (other_org, owner, "memory.read"),
        (other_org, reader, "custom.permission"),
        (other_org, reader, "memory.manage"),
    ):
        service.rows("SELECT memory.grant(%s, %s, %s)", organization, user, permission)
    service.rows("SELECT memory.revoke(%s, %s, 'memory.manage')", other_org, reader)
    service.rows("SELECT memory.configure('max_render', '5000'::jsonb)")
    service.rows("SELECT memory.configure('view_max_chars', '2000'::jsonb)")
    service.rows("SELECT memory.configure('dedupe_threshold', '0.85'::jsonb)")
    return {"owner": owner, "reader": reader, "chat": chat, "project": project}


def _listings(conn_dsn: str, org: uuid.UUID, other_org: uuid.UUID, used: dict[str, Any]):
    """What memory.run / read / list_files / render / setting answer, per namespace."""
    service = Principal(conn_dsn, SERVICE)
    me = Principal(conn_dsn, user_claims(used["owner"]))
    try:
        out: dict[str, Any] = {}
        for name, who, organization, ns in (
            ("user", me, org, {}),
            ("agent", me, org, AGENT),
            ("organization", me, org, ORGANIZATION),
            ("chat", service, org, used["chat"]),
            ("project", service, org, used["project"]),
            ("other organization", service, other_org, ORGANIZATION),
            ("other user", me, other_org, {}),
        ):
            out[name] = (
                who.run(organization, {"command": "view", "path": "/memories"}, ns),
                who.rows("SELECT * FROM memory.list_files(%s, %s)", organization, ns),
                who.value("SELECT memory.render(%s, %s)", organization, ns),
            )
        out["file views"] = (
            me.run(org, {"command": "view", "path": "/memories/notes/todo.md"}),
            me.run(org, {"command": "view", "path": UNICODE_PATH}),
            me.value("SELECT memory.read(%s, %s)", org, UNICODE_PATH),
        )
        out["settings"] = service.rows(
            "SELECT k, memory.setting(k) FROM unnest(ARRAY["
            "'max_render', 'view_max_chars', 'dedupe_threshold', 'max_content']) k"
        )
        return out
    finally:
        service.close()
        me.close()


def test_dump_and_restore_keep_every_row(
    service, member, org, dsn, pg_server, tmp_path: Path
) -> None:
    other_org = uuid.uuid4()
    used = _fill(service, member, org, other_org)
    before = _tables(dsn)

    # The original holds what was written, so the comparison below is not vacuous.
    assert len(before["namespaces"]) == 7
    with psycopg.connect(dsn) as conn:
        files = conn.execute(
            "SELECT f.organization_id = %s, n.scope, f.path, f.version, f.content"
            " FROM memory.files f JOIN memory.namespaces n"
            " ON n.organization_id = f.organization_id AND n.id = f.namespace_id"
            " ORDER BY 1 DESC, 2, 3",
            (org,),
        ).fetchall()
    assert files == [
        (True, "agent", "/memories/style.md", 2, "terse, <b>bold</b>\n"),
        (True, "chat", "/memories/summary.md", 1, 'we talked about "quotes" & <tags>\n'),
        (True, "organization", "/memories/policy.md", 2, "Answer in français.\n"),
        (True, "project", "/memories/a/b/c.md", 1, "abc\n"),
        (True, "project", "/memories/a/empty.md", 1, ""),
        (True, "user", "/memories/.hidden", 1, "not listed by view\n"),
        (True, "user", "/memories/archive/old.md", 2, "to be moved\n"),
        (True, "user", "/memories/notes/deep/er/still/file.md", 1, "deep\n"),
        (True, "user", "/memories/notes/todo.md", 3, "# Todo\n- buy oat milk\n- call Bob\n"),
        (True, "user", UNICODE_PATH, 1, UNICODE_TEXT),
        (False, "organization", "/memories/welcome.md", 1, "hello\n"),
        (False, "user", "/memories/me.md", 1, "other org\n"),
    ]
    owner, reader = used["owner"], used["reader"]
    assert sorted(row[:3] for row in before["permissions"]) == sorted(
        [
            (org, owner, "memory.manage"),
            (org, owner, "memory.read"),
            (org, reader, "memory.read"),
            (other_org, owner, "memory.read"),
            (other_org, reader, "custom.permission"),
        ]
    )
    assert [(row[0], row[1]) for row in before["settings"]] == [
        ("dedupe_threshold", 0.85),
        ("max_render", 5000),
        ("view_max_chars", 2000),
    ]
    answers = _listings(dsn, org, other_org, used)
    assert answers["user"][0] == (
        "Here're the files and directories up to 2 levels deep in /memories,"
        " excluding hidden items:\n"
        "127B\t/memories\n"
        "12B\t/memories/archive/\n"
        "12B\t/memories/archive/old.md\n"
        "38B\t/memories/notes/\n"
        "5B\t/memories/notes/deep/\n"
        "33B\t/memories/notes/todo.md\n"
        "58B\t/memories/日本語/\n"
        "58B\t/memories/日本語/ünïcödé notes.md"
    )

    dump = tmp_path / "memory.dump"
    server = ["-h", pg_server.host, "-p", str(pg_server.port), "-U", "postgres"]
    dbname = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    dumped = _pg([_bin("pg_dump"), "-Fc", *server, "-d", dbname, "-f", str(dump)])
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stderr == ""
    listed = _pg([_bin("pg_restore"), "-l", str(dump)])
    assert listed.returncode == 0, listed.stderr
    for table in TABLES:
        assert f" TABLE DATA memory {table} " in listed.stdout, listed.stdout

    restored = f"restored_{uuid.uuid4().hex[:12]}"
    admin_dsn = pg_server.server.dsn("postgres")
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {restored}")
    try:
        loaded = _pg([_bin("pg_restore"), *server, "-d", restored, str(dump)])
        assert loaded.returncode == 0, f"pg_restore failed:\n{loaded.stderr}"
        assert loaded.stderr == "", f"pg_restore reported:\n{loaded.stderr}"
        restored_dsn = (
            f"postgresql://postgres@/{restored}?host={pg_server.host}&port={pg_server.port}"
        )

        after = _tables(restored_dsn)
        for table in TABLES:
            assert after[table] == before[table], table
        assert _listings(restored_dsn, org, other_org, used) == answers

        # The restored database keeps working: edits go on from the restored versions.
        me = Principal(restored_dsn, user_claims(used["owner"]))
        try:
            assert me.run(
                org,
                {
                    "command": "str_replace",
                    "path": "/memories/notes/todo.md",
                    "old_str": "call Bob",
                    "new_str": "call Alice",
                },
            ) == (
                "The memory file has been edited. Here is the snippet showing the change"
                " (with line numbers):\n"
                "     1\t# Todo\n     2\t- buy oat milk\n     3\t- call Alice\n     4\t"
            )
            assert (
                me.value("SELECT memory.read(%s, '/memories/notes/todo.md') ->> 'version'", org)
                == "4"
            )
        finally:
            me.close()
        # ... and the original did not change.
        assert _tables(dsn) == before
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {restored} WITH (FORCE)")


def test_dump_with_configured_embeddings_restores_in_sections(
    service: Principal, org: uuid.UUID, dsn: str, pg_server, tmp_path: Path
) -> None:
    """configure_embeddings retypes a column after CREATE EXTENSION, which a dump
    does not record: restore the schema, configure the same embeddings, then the
    data (docs/operations.md)."""
    owner = {"owner_id": str(uuid.uuid4())}
    assert service.value("SELECT memory.configure_embeddings(4, 'halfvec')") == {
        "dimensions": 4,
        "type": "halfvec",
    }
    facts = [
        {"content": "Works in the Lisbon office", "embedding": [1.0, 0.0, 0.0, 0.0]},
        {"content": "Likes green tea", "embedding": [0.0, 1.0, 0.0, 0.0]},
        {"content": "Waits for an embedding"},
    ]
    service.rows("SELECT * FROM memory.save_facts(%s, %s, %s)", org, facts, owner)
    before = service.rows(
        "SELECT id, content, embedding::text, version FROM memory.facts ORDER BY content"
    )
    dump = tmp_path / "facts.dump"
    server = ["-h", pg_server.host, "-p", str(pg_server.port), "-U", "postgres"]
    dbname = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    dumped = _pg([_bin("pg_dump"), "-Fc", *server, "-d", dbname, "-f", str(dump)])
    assert dumped.returncode == 0, dumped.stderr

    restored = f"restored_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.server.dsn("postgres"), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {restored}")
    restored_dsn = f"postgresql://postgres@/{restored}?host={pg_server.host}&port={pg_server.port}"
    try:
        schema = _pg([_bin("pg_restore"), *server, "-d", restored, "--section=pre-data", str(dump)])
        assert (schema.returncode, schema.stderr) == (0, "")
        with psycopg.connect(restored_dsn, autocommit=True) as conn:
            conn.execute("SELECT memory.configure_embeddings(4, 'halfvec')")
        data = _pg(
            [
                _bin("pg_restore"),
                *server,
                "-d",
                restored,
                "--section=data",
                "--section=post-data",
                str(dump),
            ]
        )
        assert (data.returncode, data.stderr) == (0, "")
        with psycopg.connect(restored_dsn, autocommit=True) as conn:
            after = conn.execute(
                "SELECT id, content, embedding::text, version FROM memory.facts ORDER BY content"
            ).fetchall()
            assert after == [tuple(row) for row in before]
            hits = conn.execute(
                "SELECT content FROM memory.search_facts(%s, 'office', '{1,0,0,0}'::real[], %s::jsonb, 1)",
                (org, psycopg.types.json.Jsonb(owner)),
            ).fetchall()
            assert hits == [("Works in the Lisbon office",)]
    finally:
        with psycopg.connect(pg_server.server.dsn("postgres"), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {restored} WITH (FORCE)")


def test_dump_keeps_facts_messages_and_documents(
    service: Principal, org: uuid.UUID, dsn: str, pg_server, tmp_path: Path
) -> None:
    """Every kind of memory, with the default embedding column."""
    owner = str(uuid.uuid4())
    vector = [0.0] * 1536
    vector[0] = 1.0
    service.rows(
        "SELECT * FROM memory.save_facts(%s, %s, %s)",
        org,
        [{"content": "Embedded fact", "embedding": vector}, {"content": "Pending fact"}],
        {"owner_id": owner},
    )
    message = {"id": "m1", "chat_id": "c1", "owner_id": owner, "role": "user", "content": "Hi 👋"}
    assert service.value("SELECT memory.index_message(%s, %s)", org, message) is True
    assert (
        service.value("SELECT memory.document_write('eve', 'user:1/notes.md', 'v1', NULL, 3600)")
        == 1
    )
    tables = ("facts", "messages", "documents", "namespaces")
    order = {
        "facts": "id",
        "messages": "id",
        "documents": "scope_hash, path_hash",
        "namespaces": "id",
    }
    before = {
        t: service.rows(f"SELECT to_jsonb(x)::text FROM memory.{t} x ORDER BY {order[t]}")
        for t in tables
    }
    assert [len(before[t]) for t in tables] == [2, 1, 1, 1]

    dump = tmp_path / "all.dump"
    server = ["-h", pg_server.host, "-p", str(pg_server.port), "-U", "postgres"]
    dbname = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    assert _pg([_bin("pg_dump"), "-Fc", *server, "-d", dbname, "-f", str(dump)]).returncode == 0
    restored = f"restored_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.server.dsn("postgres"), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {restored}")
    try:
        loaded = _pg([_bin("pg_restore"), *server, "-d", restored, str(dump)])
        assert (loaded.returncode, loaded.stderr) == (0, "")
        with psycopg.connect(pg_server.server.dsn(restored), autocommit=True) as conn:
            after = {
                t: conn.execute(
                    f"SELECT to_jsonb(x)::text FROM memory.{t} x ORDER BY {order[t]}"
                ).fetchall()
                for t in tables
            }
            assert after == {t: [tuple(r) for r in before[t]] for t in tables}
            doc = conn.execute(
                "SELECT memory.document_read('eve', 'user:1/notes.md') ->> 'content'"
            ).fetchone()
            assert doc == ("v1",)
    finally:
        with psycopg.connect(pg_server.server.dsn("postgres"), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {restored} WITH (FORCE)")

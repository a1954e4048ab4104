"""The `pgmemory` command, every command through its console script in a subprocess.

The memory commands run against this test's database (PGMEMORY_DSN); `up`,
`status` and `down` start and stop an embedded server of their own in a
scratch data directory. Outputs are compared exactly: stdout, stderr and the
exit status (0 done, 1 error, 2 usage error, 3 `status` of a stopped server).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pgmemory import Memory, install
from pgmemory import cli as pgmemory_cli
from pgmemory import server as embedded
from tests.conftest import SERVICE_LOGIN
from tests.python.scripted_models import ScriptedServer, scripted

PGMEMORY = Path(sys.executable).with_name("pgmemory")  # the console script of pyproject
CREATE_A = {"command": "create", "path": "/memories/a.md", "file_text": "hello\nworld\n"}
VIEW_A = (
    "Here's the content of /memories/a.md with line numbers:\n"
    "     1\thello\n"
    "     2\tworld\n"
    "     3\t\n"
)
NOT_FOUND = "The path /memories/nope.md does not exist. Please provide a valid path."
NO_DATABASE = (
    "pgmemory: no database: set PGMEMORY_DSN (or DATABASE_URL),"
    " or start the embedded server with `pgmemory up`\n"
)
LISBON, PEANUTS, TEA = (
    "Works in the Lisbon office",
    "Is allergic to peanuts",
    "Drinks green tea\nno sugar",
)
SETTINGS = ("PGMEMORY_DSN", "DATABASE_URL", "PGMEMORY_DATA", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Result]


def base_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """The environment without any of our settings; the embedded server's default data
    directory is an empty folder of the test (never the user's)."""
    out = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    out["PGMEMORY_DATA"] = str(tmp_path / "no-server")
    out.update(env)
    return out


def run_cli(*args: Any, env: dict[str, str], input: str | None = None) -> Result:
    done = subprocess.run(
        [str(PGMEMORY), *map(str, args)],
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def cli(dsn: str, tmp_path: Path) -> Cli:
    """`pgmemory ARGS` with PGMEMORY_DSN set to this test's database; `env=` replaces it."""

    def call(*args: Any, env: dict[str, str] | None = None, input: str | None = None) -> Result:
        return run_cli(*args, env=env or base_env(tmp_path, PGMEMORY_DSN=dsn), input=input)

    return call


@pytest.fixture
def user(grant: Callable[..., uuid.UUID]) -> uuid.UUID:
    """A user with memory.read in `org`."""
    return grant()


def owner(user_id: uuid.UUID) -> str:
    """`--ns` for the service acting on a user's own namespace."""
    return json.dumps({"owner_id": str(user_id)})


def test_the_console_script_is_installed() -> None:
    assert PGMEMORY.is_file(), "pip install -e . installs the pgmemory script beside python"
    done = subprocess.run([str(PGMEMORY), "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "pgmemory 0.1.0\n", "")
    module = subprocess.run(
        [sys.executable, "-m", "pgmemory", "--version"], capture_output=True, text=True
    )
    assert (module.returncode, module.stdout) == (0, "pgmemory 0.1.0\n")


# ------------------------------------------------------------------ run, view, render


def test_run_and_view_as_a_user(cli: Cli, org: uuid.UUID, user: uuid.UUID) -> None:
    created = cli("run", org, json.dumps(CREATE_A), "--user", user)
    assert created == Result(0, "File created successfully at: /memories/a.md\n", "")

    assert cli("view", org, "/memories/a.md", "--user", user) == Result(0, VIEW_A, "")
    assert cli("view", org, "--user", user) == Result(
        0,
        "Here're the files and directories up to 2 levels deep in /memories,"
        " excluding hidden items:\n"
        "12B\t/memories\n"
        "12B\t/memories/a.md\n",
        "",
    )
    assert cli("view", org, "/memories/a.md", "--range", "2", "2", "--user", user) == Result(
        0, "Here's the content of /memories/a.md with line numbers:\n     2\tworld\n", ""
    )
    # The same command as JSON on stdin.
    viewed = cli(
        "run", org, "-", "--user", user, input='{"command": "view", "path": "/memories/a.md"}'
    )
    assert viewed == Result(0, VIEW_A, "")


def test_run_json_output(cli: Cli, org: uuid.UUID, user: uuid.UUID) -> None:
    done = cli("--json", "run", org, json.dumps(CREATE_A), "--user", user)
    assert (done.code, done.err) == (0, "")
    assert done.json() == {"result": "File created successfully at: /memories/a.md"}
    viewed = cli("view", org, "/memories/a.md", "--user", user, "--json")
    assert viewed.json() == {"result": VIEW_A.removesuffix("\n")}


def test_the_service_names_the_namespace(cli: Cli, org: uuid.UUID, user: uuid.UUID) -> None:
    # Without a namespace the service has no user namespace of its own.
    refused = cli("run", org, json.dumps(CREATE_A))
    assert refused == Result(
        1,
        "",
        "pgmemory: MEMORY_INVALID: the service must pass owner_id for a user namespace:"
        " pass --user UUID to act as that user\n",
    )
    agent = json.dumps({"scope": "agent", "agent_id": "planner", "owner_id": str(user)})
    assert cli("run", org, json.dumps(CREATE_A), "--ns", agent).code == 0
    assert cli("view", org, "/memories/a.md", "--ns", agent) == Result(0, VIEW_A, "")
    # Not in the user's own namespace.
    missing = cli("view", org, "/memories/a.md", "--user", user)
    assert missing == Result(
        1,
        "",
        "pgmemory: MEMORY_NOT_FOUND: The path /memories/a.md does not exist."
        " Please provide a valid path.\n",
    )


def test_render(cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID) -> None:
    assert cli("run", org, json.dumps(CREATE_A), "--user", user).code == 0
    rendered = '<memory_file path="/memories/a.md" scope="user">\nhello\nworld\n</memory_file>'
    assert cli("render", org, "--user", user) == Result(0, rendered + "\n", "")
    assert cli("render", org, "--ns", owner(user), "--json").json() == {"result": rendered}
    with Memory(dsn, service=True) as mem:
        short = mem.as_user(user).render(org, None, 40)
    assert len(short) <= 40
    assert cli("render", org, "--user", user, "--max-chars", "40") == Result(0, short + "\n", "")


# ------------------------------------------------------------------ errors a user will make


def test_a_memory_error(cli: Cli, org: uuid.UUID, user: uuid.UUID) -> None:
    view = json.dumps({"command": "view", "path": "/memories/nope.md"})
    assert cli("run", org, view, "--user", user) == Result(
        1, "", f"pgmemory: MEMORY_NOT_FOUND: {NOT_FOUND}\n"
    )
    done = cli("run", org, view, "--user", user, "--json")
    assert (done.code, done.err) == (1, f"pgmemory: MEMORY_NOT_FOUND: {NOT_FOUND}\n")
    assert done.json() == {
        "error": {"code": "MEMORY_NOT_FOUND", "message": NOT_FOUND, "sqlstate": "P0002"}
    }


def test_bad_json_is_a_usage_error(cli: Cli, org: uuid.UUID) -> None:
    bad = cli("run", org, "{bad")
    assert (bad.code, bad.out) == (2, "")
    assert bad.err.startswith("usage: pgmemory run ")
    assert bad.err.endswith(
        "pgmemory run: error: argument JSON: '{bad' is not valid JSON: Expecting property name"
        " enclosed in double quotes: line 1 column 2 (char 1)\n"
    )
    not_object = cli("run", org, "[1, 2]")
    assert not_object.code == 2
    assert not_object.err.endswith(
        "pgmemory run: error: argument JSON: must be a JSON object, got '[1, 2]'\n"
    )
    bad_ns = cli("view", org, "--ns", "{'scope': 'agent'}")
    assert bad_ns.code == 2
    assert bad_ns.err.endswith(
        "pgmemory view: error: argument --ns: \"{'scope': 'agent'}\" is not valid JSON:"
        " Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\n"
    )
    empty_stdin = cli("run", org, "-", input="")
    assert empty_stdin.code == 2
    assert empty_stdin.err.endswith(
        "pgmemory run: error: argument JSON: stdin is not valid JSON:"
        " Expecting value: line 1 column 1 (char 0)\n"
    )


def test_bad_arguments_are_usage_errors(cli: Cli, org: uuid.UUID) -> None:
    unknown = cli("frobnicate", org)
    assert (unknown.code, unknown.out) == (2, "")
    assert unknown.err.splitlines()[-1].startswith(
        "pgmemory: error: argument COMMAND: invalid choice: 'frobnicate'"
    )
    nothing = cli()
    assert nothing.code == 2
    assert nothing.err.endswith("pgmemory: error: the following arguments are required: COMMAND\n")
    not_uuid = cli("view", "acme")
    assert not_uuid.code == 2
    assert not_uuid.err.endswith("pgmemory view: error: argument ORG: not a UUID: 'acme'\n")
    zero = cli("search", org, "tea", "-k", "0")
    assert zero.code == 2
    assert zero.err.endswith("pgmemory search: error: argument -k: must be at least 1, got 0\n")
    missing = cli("erase-user", org)
    assert missing.code == 2
    assert missing.err.endswith(
        "pgmemory erase-user: error: the following arguments are required: USER\n"
    )


def test_no_server(tmp_path: Path, org: uuid.UUID) -> None:
    # No DSN in the environment and no embedded server in the data directory.
    env = base_env(tmp_path)
    assert run_cli("view", org, env=env) == Result(1, "", NO_DATABASE)
    done = run_cli("render", org, "--json", env=env)
    assert (done.code, done.err) == (1, NO_DATABASE)
    message = NO_DATABASE.removeprefix("pgmemory: ").removesuffix("\n")
    assert done.json() == {"error": {"code": None, "message": message, "sqlstate": None}}


def test_unreachable_database(tmp_path: Path, org: uuid.UUID) -> None:
    nowhere = f"postgresql://postgres@/db?host={tmp_path}&port=5432"
    done = run_cli("view", org, env=base_env(tmp_path, PGMEMORY_DSN=nowhere))
    assert (done.code, done.out) == (1, "")
    assert done.err.startswith("pgmemory: cannot connect to the database: connection")
    assert done.err.count("\n") >= 1 and "Traceback" not in done.err


def test_database_without_the_extension(
    tmp_path: Path, org: uuid.UUID, pg_server: Any, user: uuid.UUID
) -> None:
    bare = f"postgresql://postgres@/postgres?host={pg_server.host}&port={pg_server.port}"
    done = run_cli("view", org, "--user", user, env=base_env(tmp_path, PGMEMORY_DSN=bare))
    assert done == Result(
        1,
        "",
        "pgmemory: PGMEMORY_SETUP: the memory extension is not installed in this database:"
        " run CREATE EXTENSION memory CASCADE (see `pgmemory install-extension`)\n",
    )


def test_which_database(
    dsn: str, tmp_path: Path, org: uuid.UUID, user: uuid.UUID, pg_server: Any
) -> None:
    nowhere = f"postgresql://postgres@/db?host={tmp_path}&port=5432"
    args = ("run", org, json.dumps(CREATE_A), "--user", user)
    # DATABASE_URL when PGMEMORY_DSN is not set.
    assert run_cli(*args, env=base_env(tmp_path, DATABASE_URL=dsn)).code == 0
    # PGMEMORY_DSN before DATABASE_URL; --dsn before both.
    env = base_env(tmp_path, PGMEMORY_DSN=dsn, DATABASE_URL=nowhere)
    assert run_cli("view", org, "/memories/a.md", "--user", user, env=env) == Result(0, VIEW_A, "")
    env = base_env(tmp_path, PGMEMORY_DSN=nowhere, DATABASE_URL=nowhere)
    assert run_cli("--dsn", dsn, "view", org, "/memories/a.md", "--user", user, env=env).code == 0
    assert run_cli("view", org, "/memories/a.md", "--dsn", dsn, "--user", user, env=env).code == 0


# ------------------------------------------------------------------ grant, revoke


def test_grant_and_revoke(cli: Cli, org: uuid.UUID) -> None:
    someone = uuid.uuid4()
    view = ("view", org, "--user", someone)
    forbidden = cli(*view)
    assert forbidden == Result(
        1,
        "",
        "pgmemory: MEMORY_FORBIDDEN: not permitted: no read permission in this organization\n",
    )

    assert cli("grant", org, someone) == Result(
        0, f"granted memory.read to {someone} in {org}\n", ""
    )
    assert cli(*view).code == 0
    done = cli("revoke", org, someone, "--permission", "memory.read", "--json")
    assert done.json() == {
        "revoked": True,
        "org": str(org),
        "user": str(someone),
        "permission": "memory.read",
    }
    assert cli(*view) == forbidden
    assert cli("revoke", org, someone) == Result(
        0, f"revoked memory.read from {someone} in {org}\n", ""
    )


# ------------------------------------------------------------------ archival search, embeddings


def _save(dsn: str, org: uuid.UUID, user: uuid.UUID, *facts: str) -> list[uuid.UUID]:
    # Facts saved pending (no embedder): there is no CLI command that saves facts.
    with Memory(dsn, service=True) as mem:
        return [mem.as_user(user).archival.save(org, fact) for fact in facts]


def test_search_full_text(cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID) -> None:
    lisbon, _, tea = _save(dsn, org, user, LISBON, PEANUTS, TEA)
    # Saved without an embedder: pending, and the search says so.
    pending = (
        "pgmemory: 3 facts wait for an embedding; only full text finds them"
        " until `pgmemory embed-pending`\n"
    )
    assert cli("search", org, "Lisbon office", "--user", user) == Result(
        0, f"0.0164  {lisbon}  {LISBON}\n", pending
    )
    # One hit per line: a newline inside a fact is shown as \n.
    assert cli("search", org, "tea", "--ns", owner(user)) == Result(
        0, f"0.0164  {tea}  Drinks green tea\\nno sugar\n", pending
    )
    assert cli("search", org, "unheard-of", "--user", user) == Result(0, "", pending)

    done = cli("search", org, "Lisbon office", "--user", user, "--json")
    assert (done.err, done.json()["pending"]) == ("", 3)
    (hit,) = done.json()["hits"]
    assert {k: v for k, v in hit.items() if k != "created_at"} == {
        "id": str(lisbon),
        "content": LISBON,
        "score": 1 / 61,
        "similarity": None,
        "text_rank": hit["text_rank"],
        "ns": {"scope": "user", "owner_id": str(user)},
    }
    assert hit["text_rank"] > 0
    # Several namespaces: a JSON array.
    many = json.dumps([{"owner_id": str(user)}, {"scope": "organization"}])
    assert (
        cli("search", org, "Lisbon", "--ns", many, "-k", "1").out == f"0.0164  {lisbon}  {LISBON}\n"
    )


# tqdm's bar without a total: count, elapsed time, rate (or seconds per item when slow).
PROGRESS = re.compile(r"embedded: (\d+) memories \[[\d:]+, [^\]]+\]")


def test_embed_pending_and_hybrid_search(
    cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID
) -> None:
    assert cli("configure-embeddings", "--embedder", "local") == Result(
        0, "type=vector dimensions=384\n", ""
    )
    lisbon, _, _ = _save(dsn, org, user, LISBON, PEANUTS, TEA)

    # Not a terminal: no progress bar, the count on stdout.
    assert cli("embed-pending", "--batch", "2") == Result(0, "embedded 3\n", "")
    assert cli("embed-pending") == Result(0, "embedded 0\n", "")

    found = cli("search", org, "Where does the user work?", "--user", user, "--local-embedder")
    assert found.code == 0
    assert found.out.splitlines()[0].endswith(f"  {lisbon}  {LISBON}")
    hits = cli("search", org, "workplace city", "--user", user, "--embedder", "local", "--json")
    top = hits.json()["hits"][0]
    assert (top["content"], top["similarity"] > 0.3) == (LISBON, True)


def test_embed_pending_progress_on_a_terminal(
    cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID, tmp_path: Path
) -> None:
    assert cli("configure-embeddings", "--embedder", "local").code == 0
    _save(dsn, org, user, LISBON, PEANUTS, TEA)
    leader, follower = pty.openpty()
    # A terminal of 24 rows and 120 columns (a new pty has none; tqdm fits the bar to it).
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    try:
        done = subprocess.run(
            [str(PGMEMORY), "embed-pending", "--batch", "2", "--json"],
            env=base_env(tmp_path, PGMEMORY_DSN=dsn),
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            timeout=120,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0
    assert json.loads(done.stdout)["embedded"] == 3
    # One line rewritten in place (carriage returns), its last state ended by a newline;
    # how many states between depends on time (tqdm redraws at most every 0.1 s).
    screen = b"".join(chunks).decode()
    assert screen.endswith("\r\n")
    states = [s.rstrip() for s in screen.removesuffix("\r\n").split("\r") if s.strip()]
    assert states[0] == "embedded: 0 memories [00:00, ? memories/s]"
    assert PROGRESS.fullmatch(states[-1]).group(1) == "3"


def test_embed_pending_errors(cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID) -> None:
    _save(dsn, org, user, LISBON)
    # The database still has its default 1536 dimensions.
    assert cli("embed-pending") == Result(
        1, "", "pgmemory: EMBEDDING_INVALID: embedding has 384 dimensions, expected 1536\n"
    )
    wrong = cli("embed-pending", "--embedder", "local", "--model", "x")
    assert wrong.code == 2
    assert wrong.err.endswith(
        "pgmemory embed-pending: error: --model, --base-url and --dimensions are for"
        " --embedder openai\n"
    )
    unknown = cli("embed-pending", "--embedder", "openai", "--model", "mystery")
    assert unknown.code == 2
    assert (
        "pgmemory embed-pending: error: dimensions is required for model 'mystery'" in unknown.err
    )
    nothing = cli("configure-embeddings")
    assert nothing.code == 2
    assert nothing.err.endswith(
        "pgmemory configure-embeddings: error: give --dimensions N or --embedder"
        " (whose dimensions to use)\n"
    )
    assert cli(
        "configure-embeddings", "--dimensions", "8", "--type", "halfvec", "--json"
    ).json() == {
        "type": "halfvec",
        "dimensions": 8,
    }


@pytest.fixture
def fake_openai() -> Iterator[ScriptedServer]:
    """A /v1/embeddings on 127.0.0.1 answering 4-dimensional vectors (recording requests)."""

    def embeddings(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = [
            {"object": "embedding", "index": i, "embedding": [1.0, float(len(t)), 0.0, 0.5]}
            for i, t in enumerate(body["input"])
        ]
        return 200, {"object": "list", "data": data, "model": body["model"]}

    with scripted(embeddings) as server:
        yield server


def test_embed_pending_with_an_openai_endpoint(
    cli: Cli,
    dsn: str,
    org: uuid.UUID,
    user: uuid.UUID,
    fake_openai: ScriptedServer,
) -> None:
    url = f"{fake_openai.url}/v1"
    assert cli("configure-embeddings", "--dimensions", "4").out == "type=vector dimensions=4\n"
    ids = _save(dsn, org, user, LISBON, PEANUTS)
    openai = (
        "--embedder",
        "openai",
        "--model",
        "fake-embed",
        "--dimensions",
        "4",
        "--base-url",
        url,
    )
    done = cli("embed-pending", *openai, "--json")
    assert (done.code, done.json()["embedded"]) == (0, 2)
    assert [(r.path, r.body["model"], r.body["input"]) for r in fake_openai.requests] == [
        ("/v1/embeddings", "fake-embed", [LISBON, PEANUTS])
    ]
    with Memory(dsn, service=True) as mem:
        assert [mem.archival.get(org, i)["embedding_pending"] for i in ids] == [False, False]


# ------------------------------------------------------------------ export, import, erase


def test_export_erase_import(
    cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID, tmp_path: Path
) -> None:
    assert cli("run", org, json.dumps(CREATE_A), "--user", user).code == 0
    (fact,) = _save(dsn, org, user, LISBON)
    with Memory(dsn, service=True) as mem:
        expected = mem.as_user(user).export(org)

    printed = cli("export", org, "--user", user)
    assert (printed.code, printed.err) == (0, "")
    assert printed.json() == expected
    assert cli("export", org, "--ns", owner(user), "--json").json() == expected

    saved = tmp_path / "memories.json"
    assert cli("export", org, "--user", user, "-o", saved) == Result(
        0, f"exported files=1 facts=1 messages=0 to {saved}\n", ""
    )
    assert json.loads(saved.read_text()) == expected

    assert cli("erase-user", org, user) == Result(
        0, "erased facts=1 files=1 messages=0 namespaces=1 permissions=1\n", ""
    )
    assert cli("view", org, "/memories/a.md", "--ns", owner(user)).err == (
        "pgmemory: MEMORY_NOT_FOUND: The path /memories/a.md does not exist."
        " Please provide a valid path.\n"
    )

    assert cli("import", org, saved, "--ns", owner(user)) == Result(
        0, "imported facts=1 files=1 messages=0\n", ""
    )
    assert cli("view", org, "/memories/a.md", "--ns", owner(user)) == Result(0, VIEW_A, "")
    assert cli("search", org, "Lisbon", "--ns", owner(user)).out == f"0.0164  {fact}  {LISBON}\n"

    # The same items again: nothing is loaded.
    again = cli("import", org, "-", "--ns", owner(user), input=saved.read_text())
    assert again.code == 1
    assert again.err.startswith("pgmemory: MEMORY_EXISTS: an item of this export already exists")

    erased = cli("erase-user", org, user, "--json")
    assert erased.json() == {
        "facts": 1,
        "files": 1,
        "messages": 0,
        "namespaces": 1,
        "permissions": 0,
    }
    imported = cli("import", org, saved, "--ns", owner(user), "--json")
    assert imported.json() == {"facts": 1, "files": 1, "messages": 0}


def test_export_and_import_errors(
    cli: Cli, org: uuid.UUID, user: uuid.UUID, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.json"
    done = cli("import", org, missing, "--user", user)
    assert done.code == 2
    assert done.err.endswith(
        f"pgmemory import: error: cannot read {missing}: No such file or directory\n"
    )
    broken = tmp_path / "broken.json"
    broken.write_text('{"files": [')
    done = cli("import", org, broken, "--user", user)
    assert done.code == 2
    assert done.err.endswith(
        f"pgmemory import: error: {broken} is not valid JSON: Expecting value:"
        " line 1 column 12 (char 11)\n"
    )
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    done = cli("import", org, listed, "--user", user)
    assert done.code == 2
    assert done.err.endswith(
        f"pgmemory import: error: {listed} must hold a JSON object (an export)\n"
    )
    # An object that is not an export: the database says what is wrong.
    assert cli(
        "import", org, "-", "--user", user, input='{"format": "pgmemory", "version": 1, "files": 1}'
    ) == Result(1, "", 'pgmemory: MEMORY_INVALID: export data needs "files": an array of objects\n')
    nowhere = tmp_path / "no" / "such" / "dir.json"
    assert cli("export", org, "--user", user, "-o", nowhere) == Result(
        1, "", f"pgmemory: {nowhere}: No such file or directory\n"
    )


# ------------------------------------------------------------------ install-extension


def fake_pg_config(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A pg_config that is the embedded server's except for --sharedir: (script, sharedir)."""
    share = tmp_path / name / "share"
    share.mkdir(parents=True)
    script = tmp_path / name / "pg_config"
    real = embedded.pg_bin_dir() / "pg_config"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = "--sharedir" ]; then echo "{share}"; else exec "{real}" "$@"; fi\n'
    )
    script.chmod(0o755)
    return script, share


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mode & 0o777, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_install_extension_installs_what_make_install_does(cli: Cli, tmp_path: Path) -> None:
    by_make, make_share = fake_pg_config(tmp_path, "make")
    by_cli, cli_share = fake_pg_config(tmp_path, "cli")
    extension = install.source_dir()
    subprocess.run(
        ["make", "-s", "-C", str(extension), "install", f"PG_CONFIG={by_make}"],
        check=True,
        capture_output=True,
    )

    done = cli("install-extension", "--pg-config", by_cli)
    target = cli_share / "extension"
    version, files = install.extension_files()
    # memory.control, memory--<version>.sql, then released and upgrade scripts, if any.
    assert list(files)[:2] == ["memory.control", f"memory--{version}.sql"]
    warning = (
        f"pgmemory: warning: pgvector is not installed in {target};"
        " CREATE EXTENSION memory needs pgvector >= 0.8\n"
    )
    assert done == Result(
        0, f"installed memory {version} into {target}: {', '.join(files)}\n", warning
    )
    installed = tree(cli_share)
    assert installed == tree(make_share)
    assert sorted(installed) == sorted(f"extension/{name}" for name in files)
    assert {mode for mode, _ in installed.values()} == {0o644}

    # Again, over the existing files, with pgvector beside them (no warning), as JSON.
    (target / "vector.control").write_text("default_version = '0.8.1'\n")
    again = cli("install-extension", "--pg-config", by_cli, "--json")
    assert (again.code, again.err) == (0, "")
    assert again.json() == {"version": version, "directory": str(target), "files": list(files)}
    (target / "vector.control").write_text("default_version = '0.7.4'\n")
    old = cli("install-extension", "--pg-config", by_cli)
    assert old.err == (
        f"pgmemory: warning: pgvector 0.7 is installed in {target}; memory needs pgvector >= 0.8\n"
    )


def test_install_extension_errors(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "pg_config"
    assert cli("install-extension", "--pg-config", missing) == Result(
        1, "", f"pgmemory: cannot run pg_config {missing}: No such file or directory\n"
    )
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\necho 'no such option' >&2\nexit 1\n")
    failing.chmod(0o755)
    assert cli("install-extension", "--pg-config", failing) == Result(
        1, "", f"pgmemory: {failing} --sharedir failed: no such option\n"
    )


def test_the_script_is_the_makefiles(tmp_path: Path) -> None:
    # install.py concatenates the parts as extension/Makefile does: the same bytes.
    if shutil.which("make") is None:
        pytest.skip("needs make")
    by_make, _ = fake_pg_config(tmp_path, "make")
    extension = install.source_dir()
    subprocess.run(
        ["make", "-s", "-C", str(extension), "all", f"PG_CONFIG={by_make}"],
        check=True,
        capture_output=True,
    )
    version, files = install.extension_files()
    built = (extension / "build" / f"memory--{version}.sql").read_bytes()
    assert files[f"memory--{version}.sql"] == built


# ------------------------------------------------------------------ up, status, down


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A scratch data directory for `up` (short: the socket lives inside); whatever runs
    there is stopped at the end."""
    embedded.sweep_stale_runs("cli")
    path = embedded.scratch_root() / f"cli-{os.getpid()}"
    embedded.kill_stale(path)
    shutil.rmtree(path, ignore_errors=True)
    yield path
    embedded.kill_stale(path)
    shutil.rmtree(path, ignore_errors=True)


def test_up_status_down(data_dir: Path, tmp_path: Path, org: uuid.UUID) -> None:
    env = base_env(tmp_path, PGMEMORY_DATA=str(data_dir))
    dsn = f"postgresql://postgres@/pgmemory?host={data_dir}&port=5432"
    version, _ = install.extension_files()
    assert run_cli("status", env=env) == Result(3, f"not running ({data_dir})\n", "")
    assert run_cli("--json", "status", env=env).json() == {
        "running": False,
        "data_dir": str(data_dir),
    }

    up = run_cli("up", env=env)
    assert up == Result(0, f"{dsn}\n", f"pgmemory: embedded server started in {data_dir}\n")
    # The server outlived the command, with the database and the extension in place.
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT extname, extversion FROM pg_extension ORDER BY extname"
        ).fetchall() == [("memory", version), ("plpgsql", "1.0"), ("vector", "0.8.5")]

    pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    assert run_cli("status", env=env) == Result(0, f"running ({data_dir}, pid {pid})\n{dsn}\n", "")
    assert run_cli("status", "--json", env=env).json() == {
        "running": True,
        "dsn": dsn,
        "data_dir": str(data_dir),
        "pid": pid,
    }
    again = run_cli("up", "--json", env=env)
    assert (again.code, again.err) == (
        0,
        f"pgmemory: embedded server already running in {data_dir}\n",
    )
    assert again.json() == {"dsn": dsn, "data_dir": str(data_dir), "started": False}

    # Without a DSN, memory commands use the embedded server.
    user = str(uuid.uuid4())
    ns = json.dumps({"owner_id": user})
    assert run_cli("run", org, json.dumps(CREATE_A), "--ns", ns, env=env).code == 0
    assert run_cli("view", org, "/memories/a.md", "--ns", ns, env=env) == Result(0, VIEW_A, "")

    assert run_cli("down", env=env) == Result(0, f"embedded server stopped ({data_dir})\n", "")
    assert not embedded._alive(pid) or pgmemory_cli._zombie(pid)  # exited (reaped or not)
    assert run_cli("status", env=env).code == 3
    assert run_cli("down", "--json", env=env).json() == {
        "stopped": False,
        "data_dir": str(data_dir),
    }
    assert run_cli("view", org, "--ns", ns, env=env) == Result(1, "", NO_DATABASE)

    # Up again on the same data directory: the memories are still there.
    assert run_cli("--data-dir", data_dir, "up", env=base_env(tmp_path)).out == f"{dsn}\n"
    assert run_cli("view", org, "/memories/a.md", "--ns", ns, env=env) == Result(0, VIEW_A, "")
    other = base_env(tmp_path)  # PGMEMORY_DATA elsewhere; --data-dir names the server
    assert run_cli("down", "--data-dir", data_dir, env=other).code == 0


def test_stats_and_facts(cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID) -> None:
    assert cli("stats", org, "--user", user).out == (
        "files=0 facts=0 facts_pending=0 forgotten=0 messages=0 messages_pending=0\n"
    )
    assert cli("run", org, json.dumps(CREATE_A), "--user", user).code == 0
    with Memory(dsn, service=True) as mem:
        archival = mem.as_user(user).archival
        ids = [archival.save(org, t) for t in ("Lives in Porto", "Lives in Lisbon", "Two\nlines")]
        archival.forget(org, ids[0], superseded_by=ids[1])
    assert cli("--json", "stats", org, "--user", user).json() == {
        "files": 1,
        "facts": 2,
        "facts_pending": 2,
        "forgotten": 1,
        "messages": 0,
        "messages_pending": 0,
    }
    assert cli("facts", org, "--user", user) == Result(
        0, f"{ids[1]}  v1  pending Lives in Lisbon\n{ids[2]}  v1  pending Two\\nlines\n", ""
    )
    page = cli("--json", "facts", org, "--user", user, "--max", "1", "--forgotten")
    assert [f["id"] for f in page.json()["facts"]] == [str(ids[0])]
    rest = cli("--json", "facts", org, "--user", user, "--after", ids[0], "--forgotten")
    assert [f["content"] for f in rest.json()["facts"]] == ["Lives in Lisbon", "Two\nlines"]


def test_configure_embeddings_asks_before_turning_embeddings_pending(
    cli: Cli, dsn: str, org: uuid.UUID, user: uuid.UUID
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT memory.configure_embeddings(4)")
        conn.execute(
            "SELECT memory.save_fact(%s, 'Lives in Lisbon', '{1,0,0,0}', %s)",
            (org, Jsonb({"owner_id": str(user)})),
        )
    # Not a terminal: refused with what it would do, and nothing changes.
    refused = cli("configure-embeddings", "--dimensions", "8")
    assert (refused.code, refused.out) == (2, "")
    assert refused.err.endswith(
        "pgmemory configure-embeddings: error: this turns 1 embeddings pending"
        " (all computed again); pass --yes to go ahead\n"
    )
    with Memory(dsn, service=True) as mem:
        assert mem.embedding_status() == {
            "dimensions": 4,
            "type": "vector",
            "embedded": 1,
            "pending": 0,
        }
    # The same settings change nothing, so nothing is asked.
    assert cli("configure-embeddings", "--dimensions", "4") == Result(
        0, "type=vector dimensions=4\n", ""
    )
    assert cli("configure-embeddings", "--dimensions", "8", "--yes") == Result(
        0,
        "type=vector dimensions=8\n",
        "pgmemory: 1 embeddings are pending now: run `pgmemory embed-pending`\n",
    )
    with Memory(dsn, service=True) as mem:
        assert mem.embedding_status()["pending"] == 1


# ------------------------------------------------------------------ maintain


def test_maintain(cli: Cli, dsn: str, login_dsn, tmp_path: Path, org: uuid.UUID, user: uuid.UUID):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT memory.configure_embeddings(4)")
        conn.execute("SELECT memory.configure('namespace_index_min_rows', '30')")
        facts = [{"content": f"fact {n}", "embedding": [1.0, n, 0.5, -n]} for n in range(40)]
        conn.execute(
            "SELECT count(*) FROM memory.save_facts(%s, %s, %s, 1.0)",
            (org, Jsonb(facts), Jsonb({"owner_id": str(user)})),
        )
        ns, name = conn.execute(
            "SELECT n, memory._namespace_index('fact', %s, n)"
            " FROM memory._namespace_id(%s, 'user', %s, NULL) n",
            (org, org, user),
        ).fetchone()

        def own_indexes() -> list[tuple[str, bool]]:
            return conn.execute(
                "SELECT c.relname::text, i.indisvalid FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname ~ '^facts_ns_' ORDER BY 1"
            ).fetchall()

        # Concurrently: the index is built by the statements; maintain() then has nothing left.
        assert cli("maintain", "--concurrently", "--json").json() == []
        assert own_indexes() == [(name, True), (f"{name}_text", True)]
        assert cli("maintain") == Result(0, "nothing to change\n", "")
        conn.execute("SELECT memory.configure('namespace_index_min_rows', '0')")
        assert cli("maintain", "--json").json() == [
            {
                "action": "dropped",
                "kind": "fact",
                "organization_id": str(org),
                "namespace_id": str(ns),
                "live_rows": 40,
                "index_name": name,
            }
        ]
        conn.execute("SELECT memory.configure('namespace_index_min_rows', '30')")
        assert cli("maintain") == Result(0, f"created fact {org}/{ns} (40 rows) {name}\n", "")
        conn.execute("SELECT memory.configure('namespace_index_min_rows', '0')")
        # A login of the service that does not own the tables may not build concurrently.
        service_login = base_env(tmp_path, PGMEMORY_DSN=login_dsn(SERVICE_LOGIN))
        refused = cli("maintain", "--concurrently", env=service_login)
        assert refused == Result(
            1,
            "",
            f"pgmemory: PGMEMORY_SETUP: must be owner of index {name}_text: CREATE and DROP INDEX"
            " CONCURRENTLY need the owner of memory.facts and memory.messages; connect as that"
            " role, or maintain without concurrently\n",
        )
        assert own_indexes() == [(name, True), (f"{name}_text", True)]

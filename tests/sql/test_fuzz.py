"""Hostile input fuzzing (the error codes of docs/sql-reference.md).

Hypothesis throws random and hostile input at memory.run (any command or junk;
paths mixing valid segments, traversal, percent-encodings, control characters,
unicode and very long strings; view_range / insert_line of every JSON type), at
the `ns` argument of every namespace-taking function, at facts and vectors
(save_facts, save_fact, set_memory_embeddings), at searches (query text, vector,
namespaces, k, options) and at import. Every call must answer with either a result
or an error whose HINT is one of the documented codes with that code's SQLSTATE: never
XX000, never another SQLSTATE, never an error without a code. A call that fails
must leave every table exactly as it was (snapshot before, compare after); a call
that succeeds must leave only well-formed rows (normalized paths below /memories,
embeddings of the configured dimension with finite elements).

Each example starts from the same seeded tables (restored when an earlier example
changed them), so that a failure replays. What the generators leave out, and why:
- NUL (U+0000): PostgreSQL refuses it in text and jsonb (22P05 / 22P02) while it
  parses the call's parameters, before any function of ours runs; nothing to test.
- JSON numbers beyond what jsonb's numeric type holds (~1e131072) and NaN/Infinity
  literals in JSON: refused by the jsonb parser, likewise before our code runs.
  (NaN / Infinity do reach our code through real[] and float8 parameters and as
  JSON strings; both are generated.)
- Integer parameters beyond their SQL type (int4 k, bigint expected_version) and
  real[] elements that are not float4 values: the cast of the parameter fails in
  the caller's own statement. Every float4 value, NaN and ±Infinity are generated.

KNOWN_BUGS lists SQL bugs this file found (each with a strict-xfail regression test
at the end). While one is open, an error matching its signature is counted, not
failed; when the fix lands its regression test passes, which strict xfail turns
into a failure: then delete the entry.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.conftest import SERVICE_LOGIN, USER_LOGIN
from tests.support import SERVICE, Failure, Principal, user_claims

# Every documented code and its SQLSTATE (docs/sql-reference.md#errors).
DOCUMENTED_CODES = {
    "MEMORY_NOT_FOUND": "P0002",
    "MEMORY_NO_MATCH": "22023",
    "MEMORY_AMBIGUOUS": "22023",
    "MEMORY_EXISTS": "23505",
    "MEMORY_CONFLICT": "40001",
    "MEMORY_DOCUMENT_CONFLICT": "40001",
    "MEMORY_INVALID_PATH": "22023",
    "MEMORY_INVALID": "22023",
    "MEMORY_TOO_LARGE": "54000",
    "MEMORY_FORBIDDEN": "42501",
    "EMBEDDING_INVALID": "22023",
}


@dataclass(frozen=True)
class KnownBug:
    sqlstate: str
    message: str  # a piece of the primary message
    test: str  # its regression test below


KNOWN_BUGS: dict[str, KnownBug] = {}  # all five found so far are fixed; their tests stay
KNOWN_HITS: Counter[str] = Counter()


# Long runs: PGMEMORY_PROPERTY_SCALE=20 runs twenty times the CI examples;
# PGMEMORY_PROPERTY_NO_SHRINK=1 reports a failure as found, unshrunk.
SCALE = float(os.environ.get("PGMEMORY_PROPERTY_SCALE", "1"))


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        phases=[Phase.explicit, Phase.generate]
        if os.environ.get("PGMEMORY_PROPERTY_NO_SHRINK")
        else list(Phase),
        deadline=None,
        derandomize=True,  # the same inputs on every run: CI is reproducible
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,  # the arena is reset per example
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
        print_blob=False,
    )


ORG = "44444444-4444-4444-8444-444444444444"
OTHER_ORG = "55555555-5555-4555-8555-555555555555"
OWNER_ID = "66666666-6666-4666-8666-666666666666"  # whom the service acts for
USER_ID = "77777777-7777-4777-8777-777777777777"  # a user with read and manage in ORG
OWNER = {"owner_id": OWNER_ID}

# ----------------------------------------------------------------------------- JSON


class Raw(str):
    """A JSON number literal written exactly so (1.0, -0, 1e-400, 1E+2)."""


def dump(value: Any) -> str:
    """JSON text (not ASCII-escaped), with Raw numbers as written."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{dump(str(k))}:{dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each as often as its weight says. (st.one_of with a
    strategy repeated does not weigh it: Hypothesis avoids repeating an input, so a
    branch with few values, like st.none(), is soon used up.)"""
    total = sum(weight for weight, _ in choices)

    def pick(n: int) -> st.SearchStrategy[Any]:
        for weight, strategy in choices:
            if n < weight:
                return strategy
            n -= weight
        raise AssertionError(n)

    return st.integers(0, total - 1).flatmap(pick)


# Any character PostgreSQL accepts in text: everything but NUL (and surrogates,
# which UTF-8 cannot carry).
CHARS = st.characters(codec="utf-8", exclude_characters="\x00")
TEXT = st.text(CHARS, max_size=12)
NASTY = st.sampled_from(
    [
        "",
        " ",
        "'",
        '"',
        "\\",
        "%",
        "%s",
        "$1",
        "'; DROP TABLE memory.files; --",
        "\u2028",
        "\x1b[2J",
        '<memory_file path="x">',
        "</memory_file>",
        "é",
        "\U0001f600",
        "\ufeff",
        "a\u0301",
        "\t\n\r",
        "::",
        "&|!()<->:*",
        "alpha",
        "alpha\nbeta\n",
        "null",
    ]
)
HUGE = st.builds(
    lambda piece, n: piece * n,
    st.sampled_from(["a", "é", "ab\n", "w "]),
    st.sampled_from([1025, 100_000, 100_001, 150_000]),
)
ANY_TEXT = weighted((4, TEXT), (2, NASTY), (1, HUGE))
NUMBER = st.one_of(
    st.integers(-3, 12),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            "1.0",
            "-0",
            "0.0",
            "2.00",
            "1e2",
            "1E+2",
            "2.5",
            "0.1",
            "1e-400",
            "1e400",
            "-1e400",
            "1e39",
            "3.4028235e38",
            "3.4028236e38",
            "1e-46",
            "1.5e-45",
            "1e-38",
            "2147483648",
            "-2147483649",
            "123456789012345678901234567890",
        ]
    ).map(Raw),
)
SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT, NASTY)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=8,
)

# ----------------------------------------------------------------------------- paths

SEGMENT = st.one_of(
    st.sampled_from(["a.md", "dir", "b.md", "sub", "c.md", "new.md", "x"]),
    st.sampled_from(
        [
            "..",
            ".",
            "",
            "...",
            ".hidden",
            "%2e%2e",
            "%2E",
            "%2f",
            "%5C",
            "%25",
            "%252e",
            "a%2Fb",
            "%00",
            "\\",
            "..\\..",
            "~",
            "*",
            "?",
            "\u2028",
            "\u2029",
            "\x85",
            "\x1b[31m",
            "\t",
            "\n",
            "\r",
            "\x7f",
            "\u202e",
            "\ufeff",
            "e\u0301",
            "\U0001f600",
            "日本語",
            "'",
            '"',
            "<>&",
        ]
    ),
    TEXT,
)
PREFIX = st.sampled_from(
    [
        "/memories",
        "/memories",
        "/memories",
        "/memories",
        "",
        "/",
        "memories",
        "/memoriesX",
        "/MEMORIES",
        "//memories",
        " /memories",
        "/memories/..",
        "/etc",
        "\\memories",
    ]
)
BUILT_PATH = st.builds(
    lambda prefix, segments, tail: prefix + "".join("/" + s for s in segments) + tail,
    PREFIX,
    st.lists(SEGMENT, max_size=5),
    st.sampled_from(["", "", "", "/", "//", "/."]),
)
LONG_PATH = st.builds(
    lambda piece, n: "/memories/" + piece * n,
    st.sampled_from(["a", "é", "ab/", "../"]),
    st.sampled_from([300, 600, 1014, 1015, 1100, 5000]),
)
GOOD_PATH = st.sampled_from(
    [
        "/memories",
        "/memories/",
        "/memories/a.md",
        "/memories/a.md/",
        "/memories/dir",
        "/memories/dir/",
        "/memories/dir/b.md",
        "/memories/dir/sub",
        "/memories/dir/sub/c.md",
        "/memories/new.md",
        "/memories/dir/new é.md",
        "/memories/.hidden",
        "/memories/100%.md",
        "/memories/a.md/x.md",
    ]
)
HOSTILE_PATH = weighted((4, BUILT_PATH), (1, LONG_PATH), (1, TEXT))
PATH = weighted((1, GOOD_PATH), (1, HOSTILE_PATH))

# ----------------------------------------------------------------------------- commands

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
ARGS: dict[str, tuple[str, ...]] = {
    "view": ("path", "view_range"),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str", "new_str"),
    "insert": ("path", "insert_line", "insert_text"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}
CONTENT = st.one_of(TEXT, NASTY)
# Arguments as a careful caller sends them ...
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "path": GOOD_PATH,
    "old_path": GOOD_PATH,
    "new_path": GOOD_PATH,
    "file_text": CONTENT,
    "old_str": st.one_of(st.sampled_from(["alpha", "beta\n", "a", "gamma", "bee", "c\n"]), TEXT),
    "new_str": CONTENT,
    "insert_text": CONTENT,
    "insert_line": st.integers(-1, 5),
    "view_range": st.one_of(st.none(), st.lists(st.integers(-3, 5), min_size=2, max_size=2)),
}
# ... and as an attacker (or a confused model) does.
LINE = st.one_of(NUMBER, NUMBER, SCALAR, JSON)
HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "path": HOSTILE_PATH,
    "old_path": HOSTILE_PATH,
    "new_path": HOSTILE_PATH,
    "file_text": st.one_of(HUGE, JSON),
    "old_str": st.one_of(ANY_TEXT, JSON),
    "new_str": st.one_of(HUGE, JSON),
    "insert_text": st.one_of(HUGE, JSON),
    "insert_line": LINE,
    "view_range": st.one_of(
        st.lists(NUMBER, min_size=2, max_size=2), st.lists(LINE, max_size=3), JSON
    ),
}


@st.composite
def command_st(draw: Callable[..., Any]) -> Any:
    """One of the six commands, each argument careful or hostile; sometimes anything."""
    kind = draw(st.integers(0, 19))
    if kind == 19:
        return draw(JSON)
    name = draw(st.sampled_from(COMMANDS))
    command: dict[str, Any] = {"command": name}
    if kind == 18:
        command["command"] = draw(
            st.one_of(st.sampled_from([n.upper() for n in COMMANDS] + ["clear", ""]), SCALAR)
        )
    for key in ARGS[name]:
        how = draw(st.integers(0, 14))
        if how < 9:
            command[key] = draw(GOOD[key])
        elif how < 14:
            command[key] = draw(HOSTILE[key])
        # else: left out
    for key in draw(st.lists(st.sampled_from([*GOOD, "junk", "Path"]), max_size=1)):
        command[key] = draw(HOSTILE.get(key, JSON))
    if command.get("view_range", 0) is None:
        del command["view_range"]
    return command


# ----------------------------------------------------------------------------- namespaces

UUID_FORMS = [
    OWNER_ID,
    OWNER_ID.upper(),
    OWNER_ID.replace("-", ""),
    "{" + OWNER_ID + "}",
    "urn:uuid:" + OWNER_ID,
    OWNER_ID[:8] + OWNER_ID[9:],
    OWNER_ID + "0",
    " " + OWNER_ID,
    "00000000-0000-0000-0000-000000000000",
    "66666666-6666-4666-8666-66666666666g",
    "",
]
NS_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "scope": st.one_of(
        st.sampled_from(["user", "agent", "chat", "project", "organization"]),
        st.sampled_from(["USER", "", "org", " user", "user\n", "organisation"]),
        SCALAR,
    ),
    "owner_id": st.one_of(st.sampled_from(UUID_FORMS), TEXT, SCALAR),
    **{
        key: st.one_of(
            st.sampled_from(["x", "", "a" * 1024, "a" * 1025, "é" * 512, "é" * 513]),
            TEXT,
            NASTY,
            SCALAR,
        )
        for key in ("agent_id", "chat_id", "project_id")
    },
}


ID_KEY = {"agent": "agent_id", "chat": "chat_id", "project": "project_id"}


@st.composite
def ns_st(draw: Callable[..., Any], service: bool | None = None) -> Any:
    """A namespace: mostly well-shaped (with owner_id when the service calls), with
    one key or value gone wrong."""
    kind = draw(st.integers(0, 9))
    if kind == 9:
        return draw(JSON)
    ns: dict[str, Any] = {}
    if kind < 6:  # a shape a caller would use, its values careful or hostile
        scope = draw(st.sampled_from([None, "user", "agent", "chat", "project", "organization"]))
        if scope is not None:
            ns["scope"] = scope if draw(st.integers(0, 4)) else draw(NS_VALUES["scope"])
        if scope in ID_KEY:
            key = ID_KEY[scope]
            ns[key] = "x" if draw(st.integers(0, 2)) else draw(NS_VALUES[key])
        with_owner = draw(st.integers(0, 9)) < (5 if service is None else 8 if service else 1)
        if with_owner:
            ns["owner_id"] = OWNER_ID if draw(st.integers(0, 2)) else draw(NS_VALUES["owner_id"])
    if kind >= 6 or draw(st.integers(0, 3)) == 3:
        for key in draw(st.lists(st.sampled_from([*NS_VALUES, "agentId", "junk"]), max_size=2)):
            ns[key] = draw(NS_VALUES.get(key, JSON))
    return ns


NS = ns_st()


def ns_or_array(service: bool) -> st.SearchStrategy[Any]:
    one = ns_st(service)
    return weighted(
        (4, one), (2, st.lists(one, max_size=3)), (1, st.lists(st.just(OWNER), max_size=40))
    )


def caller_and_ns(ns: Callable[[bool], st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """(as_user, a namespace shaped for that caller)."""
    return st.booleans().flatmap(lambda as_user: st.tuples(st.just(as_user), ns(not as_user)))


# ----------------------------------------------------------------------------- vectors

FLOAT4 = st.floats(width=32)  # every float4 value, NaN and ±Infinity included
REAL_ARRAY = st.one_of(
    st.none(),
    st.lists(FLOAT4, min_size=4, max_size=4),
    st.lists(FLOAT4, max_size=6),
    st.lists(st.one_of(FLOAT4, st.none()), min_size=4, max_size=4),
    st.lists(st.lists(FLOAT4, min_size=2, max_size=2), min_size=2, max_size=2),  # 2-D
)
ELEMENT = st.one_of(
    st.integers(-2, 2),
    NUMBER,
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1", "nan", ""]),
    st.none(),
    st.booleans(),
    st.lists(st.integers(0, 1), max_size=2),
    st.just({}),
)
VECTOR_JSON = weighted(
    (2, st.lists(st.integers(-3, 3), min_size=4, max_size=4)),
    (4, st.lists(NUMBER, min_size=4, max_size=4)),
    (2, st.lists(ELEMENT, min_size=4, max_size=4)),
    (1, st.lists(ELEMENT, max_size=6)),
    (1, JSON),
)

# ----------------------------------------------------------------------------- the arena

SNAPSHOT = """
SELECT jsonb_build_object(
  'namespaces', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.organization_id, t.id) FROM memory.namespaces t),
  'files', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.organization_id, t.namespace_id, t.path)
            FROM memory.files t),
  'facts', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM memory.facts t),
  'messages', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM memory.messages t),
  'permissions', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.organization_id, t.user_id, t.permission)
                  FROM memory.permissions t),
  'settings', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.key) FROM memory.settings t),
  'documents', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.scope_hash, t.path_hash) FROM memory.documents t))
"""
TABLES = ("namespaces", "files", "facts", "messages", "permissions", "settings", "documents")
SAFE_SEGMENT = re.compile(r"[^/\x00-\x1f\x7f-\x9f\u2028\u2029\\]+")
ENCODED = re.compile(r"%(2e|2f|5c|25)", re.IGNORECASE)


def safe_path(path: str) -> bool:
    """A stored path: below /memories, no traversal in any spelling, no controls."""
    if not path.startswith("/memories/") or len(path.encode()) > 1024 or ENCODED.search(path):
        return False
    return all(
        SAFE_SEGMENT.fullmatch(segment) and segment not in (".", "..")
        for segment in path[len("/memories/") :].split("/")
    )


def vector_ok(text: str | None) -> bool:
    if text is None:
        return True
    values = [float(x) for x in text.strip("[]").split(",")]
    return len(values) == 4 and all(math.isfinite(v) for v in values)


class Arena:
    """The database every example runs against, reset to the seed between examples."""

    def __init__(
        self, su: psycopg.Connection, service: Principal, user: Principal, owner: Principal
    ) -> None:
        self.su = su
        self.service = service
        self.user = user
        self.owner = owner
        self.baseline: Any = None
        self.current: Any = None
        self.calls = 0
        self.outcomes: Counter[str] = Counter()

    def snapshot(self) -> Any:
        return self.su.execute(SNAPSHOT).fetchone()[0]

    def save_baseline(self) -> None:
        self.su.execute("DROP SCHEMA IF EXISTS fuzz_baseline CASCADE")
        self.su.execute("CREATE SCHEMA fuzz_baseline")
        for table in TABLES:
            self.su.execute(f"CREATE TABLE fuzz_baseline.{table} AS TABLE memory.{table}")
        self.baseline = self.current = self.snapshot()

    def reset(self) -> None:
        """Back to the seed, if an earlier example changed anything."""
        if self.current == self.baseline:
            return
        with self.su.transaction():
            self.su.execute(
                "DELETE FROM memory.namespaces; DELETE FROM memory.permissions; "
                "DELETE FROM memory.settings; DELETE FROM memory.documents"
            )
            for table in TABLES:
                # Generated columns (content hashes, dedupe keys) are derived again.
                columns = self.su.execute(
                    "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
                    " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
                    " AND attgenerated = ''",
                    (f"memory.{table}",),
                ).fetchone()[0]
                self.su.execute(
                    f"INSERT INTO memory.{table} ({columns})"
                    f" SELECT {columns} FROM fuzz_baseline.{table}"
                )
        self.current = self.snapshot()
        assert self.current == self.baseline

    def attempt(self, principal: Principal, query: str, *params: Any) -> Any:
        """One call: its rows, or the Failure it raised, once the contract holds."""
        self.calls += 1
        before = self.current
        try:
            rows = principal.execute(
                query, params[0] if len(params) == 1 and isinstance(params[0], dict) else params
            )
        except psycopg.Error as err:
            failure = Failure.of(err)
            self.outcomes[f"{failure.hint}: {failure.message[:40]}"] += 1
            self.current = self.snapshot()
            assert self.current == before, f"a failed call changed the tables: {failure} {params}"
            known = next(
                (
                    name
                    for name, bug in KNOWN_BUGS.items()
                    if failure.hint is None
                    and failure.sqlstate == bug.sqlstate
                    and bug.message in failure.message
                ),
                None,
            )
            if known is not None:
                KNOWN_HITS[known] += 1
                return failure
            assert failure.hint in DOCUMENTED_CODES, (
                f"no documented code: {failure} for {query} {params}"
            )
            assert failure.sqlstate == DOCUMENTED_CODES[failure.hint], f"wrong SQLSTATE: {failure}"
            return failure
        self.outcomes["ok"] += 1
        self.current = self.snapshot()
        self.check_rows()
        return rows

    def check_rows(self) -> None:
        """Whatever succeeded left only well-formed rows."""
        files = self.current["files"] or []
        for row in files:
            assert safe_path(row["path"]), f"stored path {row['path']!r}"
            assert len(row["content"]) <= 100_000
        paths = {(row["organization_id"], row["namespace_id"], row["path"]) for row in files}
        for org, ns, path in paths:
            parts = path.split("/")
            for n in range(3, len(parts)):
                assert (org, ns, "/".join(parts[:n])) not in paths, f"a file holds {path!r}"
        for row in (self.current["facts"] or []) + (self.current["messages"] or []):
            assert vector_ok(row["embedding"]), f"stored embedding {row['embedding']!r}"
        for row in self.current["facts"] or []:
            assert row["content"].strip(" ") and len(row["content"]) <= 100_000


@pytest.fixture
def arena(as_, login_dsn, dsn) -> Iterator[Arena]:
    with psycopg.connect(dsn, autocommit=True) as su:
        su.execute("SET synchronous_commit = off")
        su.execute("SELECT memory.configure_embeddings(4)")
        su.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, USER_ID))
        su.execute("SELECT memory.grant(%s, %s, 'memory.manage')", (ORG, USER_ID))
        service = as_(SERVICE, login_dsn(SERVICE_LOGIN))
        user = as_(user_claims(USER_ID), login_dsn(USER_LOGIN))
        su.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, OWNER_ID))
        owner = as_(user_claims(OWNER_ID), login_dsn(USER_LOGIN))
        for principal in (service, user, owner):
            principal.conn.execute("SET synchronous_commit = off")
        seed = [
            ("/memories/a.md", "alpha\nbeta\ngamma\n", OWNER),
            ("/memories/dir/b.md", "bee", OWNER),
            ("/memories/dir/sub/c.md", "c\n", OWNER),
            ("/memories/a.md", "the user's own\n", {}),
            ("/memories/policy.md", "Answer in English.\n", {"scope": "organization"}),
        ]
        for path, text, ns in seed:
            principal = user if ns == {} else service
            principal.rows(
                "SELECT memory.write(%s, %s, %s, NULL, %s::jsonb)", ORG, path, text, json.dumps(ns)
            )
        service.rows(
            "SELECT * FROM memory.save_facts(%s, %s::jsonb, %s::jsonb)",
            ORG,
            dump(
                [
                    {"content": "Works in Lisbon", "embedding": [1, 0, 0, 0]},
                    {"content": "Likes green tea"},
                    {"content": "Plays the violin", "embedding": [0, 1, 0, 0]},
                ]
            ),
            json.dumps(OWNER),
        )
        service.rows(
            "SELECT memory.forget(%s, id) FROM memory.search_facts(%s, 'violin', NULL, %s::jsonb)",
            ORG,
            ORG,
            json.dumps(OWNER),
        )
        for mid, content, vector in (("m1", "We met in Porto", [0, 0, 1, 0]), ("m2", "Tea?", None)):
            message = {"id": mid, "chat_id": "c1", "owner_id": OWNER_ID, "role": "user"}
            service.rows(
                "SELECT memory.index_message(%s, %s::jsonb, %s::real[])",
                ORG,
                json.dumps({**message, "content": content}),
                vector,
            )
        arena = Arena(su, service, user, owner)
        arena.save_baseline()
        yield arena
        known = {name: KNOWN_HITS[name] for name in KNOWN_BUGS if KNOWN_HITS[name]}
        if arena.calls > 1:
            print(
                f"\n{arena.calls} calls: {arena.outcomes['ok']} answered, "
                f"{arena.calls - arena.outcomes['ok']} refused; known bugs met: {known or 'none'}"
            )
        KNOWN_HITS.clear()


def acting(arena: Arena, as_user: bool) -> tuple[Principal, Any]:
    """The principal and its usual namespace: the service for OWNER, or the user."""
    return (arena.user, {}) if as_user else (arena.service, OWNER)


# ----------------------------------------------------------------------------- the properties


@fuzz_settings(1200)
@given(command=command_st(), as_user=st.booleans())
def test_run_answers_with_a_result_or_a_spec_error(arena: Arena, command: Any, as_user: bool):
    arena.reset()
    principal, ns = acting(arena, as_user)
    got = arena.attempt(
        principal, "SELECT memory.run(%s, %s::jsonb, %s::jsonb)", ORG, dump(command), dump(ns)
    )
    if not isinstance(got, Failure):
        assert isinstance(got[0][0], str) and got[0][0], got


NS_CALLS = {
    "view": 'SELECT memory.run(%(org)s, \'{"command": "view", "path": "/memories"}\', %(ns)s::jsonb)',
    "create": 'SELECT memory.run(%(org)s, \'{"command": "create", "path": "/memories/n.md", "file_text": "n"}\', %(ns)s::jsonb)',
    "list_files": "SELECT * FROM memory.list_files(%(org)s, %(ns)s::jsonb)",
    "render": "SELECT memory.render(%(org)s, %(ns)s::jsonb, %(n)s::int)",
    "read": "SELECT memory.read(%(org)s, %(path)s, %(ns)s::jsonb)",
    "write": "SELECT memory.write(%(org)s, %(path)s, %(text)s, %(version)s::bigint, %(ns)s::jsonb)",
    "clear_files": "SELECT memory.clear_files(%(org)s, %(ns)s::jsonb)",
    "save_fact": "SELECT memory.save_fact(%(org)s, %(text)s, NULL, %(ns)s::jsonb, %(source)s::jsonb)",
    "search_facts": "SELECT * FROM memory.search_facts(%(org)s, %(text)s, NULL, %(ns)s::jsonb)",
    "export": "SELECT memory.export(%(org)s, %(ns)s::jsonb)",
}


@fuzz_settings(500)
@given(
    call=st.sampled_from(sorted(NS_CALLS)),
    who=caller_and_ns(lambda service: weighted((3, ns_st(service)), (1, ns_or_array(service)))),
    org=st.sampled_from([ORG] * 8 + [OTHER_ORG, None]),
    path=weighted((2, GOOD_PATH), (1, PATH)),
    text=weighted((2, CONTENT), (1, ANY_TEXT)),
    n=weighted((3, st.none()), (2, st.integers(-2, 300)), (1, st.integers(-(2**31), 2**31 - 1))),
    version=weighted(
        (3, st.none()), (2, st.integers(-2, 3)), (1, st.integers(-(2**63), 2**63 - 1))
    ),
    source=weighted((3, st.none()), (1, JSON)),
)
def test_namespaces_are_parsed_or_refused(
    arena: Arena,
    call: str,
    who: tuple[bool, Any],
    org: str | None,
    path: str,
    text: str,
    n: int | None,
    version: int | None,
    source: Any,
):
    arena.reset()
    as_user, ns = who
    principal, _ = acting(arena, as_user)
    params = {
        "org": org,
        "ns": dump(ns),
        "path": path,
        "text": text,
        "n": n,
        "version": version,
        "source": None if source is None else dump(source),
    }
    arena.attempt(principal, NS_CALLS[call], params)


FACT = weighted(
    (
        19,
        st.fixed_dictionaries(
            {"content": weighted((10, CONTENT), (1, HUGE), (1, JSON))},
            optional={
                "embedding": VECTOR_JSON,
                "source": JSON,
                "embedding_model": st.one_of(TEXT, SCALAR),
                "junk": JSON,
            },
        ),
    ),
    (1, JSON),
)


@fuzz_settings(500)
@given(
    facts=weighted((9, st.lists(FACT, min_size=1, max_size=3)), (1, JSON)),
    threshold=weighted(
        (9, st.none()), (1, st.floats()), (1, st.sampled_from([0.92, 1.0, 0.0, 1e-300]))
    ),
    as_user=st.booleans(),
)
def test_facts_are_saved_whole_or_refused(arena: Arena, facts: Any, threshold: Any, as_user: bool):
    arena.reset()
    principal, ns = acting(arena, as_user)
    got = arena.attempt(
        principal,
        "SELECT ord, id, duplicate_of FROM memory.save_facts(%s, %s::jsonb, %s::jsonb, %s::float8)",
        ORG,
        dump(facts),
        dump(ns),
        threshold,
    )
    if not isinstance(got, Failure):
        assert [row[0] for row in got] == list(range(1, len(facts) + 1)), got
        assert all((row[1] is None) != (row[2] is None) for row in got), got


@fuzz_settings(300)
@given(
    content=ANY_TEXT, vector=REAL_ARRAY, source=st.one_of(st.none(), JSON), as_user=st.booleans()
)
def test_save_fact_vectors(arena: Arena, content: str, vector: Any, source: Any, as_user: bool):
    arena.reset()
    principal, ns = acting(arena, as_user)
    arena.attempt(
        principal,
        "SELECT memory.save_fact(%s, %s, %s::real[], %s::jsonb, %s::jsonb)",
        ORG,
        content,
        vector,
        dump(ns),
        None if source is None else dump(source),
    )


ROW_NAMES = ("pending-fact", "pending-message", "live-fact", "random")


@st.composite
def embedding_batch(draw: Callable[..., Any]) -> tuple[list[tuple[str, Any]], Any, Any]:
    """Mostly the seeded rows with right or wrong hashes and hostile vectors."""
    size = draw(st.integers(0, 3))
    entries = draw(
        st.lists(
            st.tuples(st.sampled_from(ROW_NAMES), st.sampled_from(["right", "wrong", None])),
            min_size=size,
            max_size=size,
        )
    )
    vectors = draw(st.lists(VECTOR_JSON, min_size=size, max_size=size))
    if draw(st.integers(0, 9)) == 0:
        vectors = draw(JSON)
    skew = draw(st.sampled_from([None] * 27 + ["ids", "hashes", "vectors"]))
    return entries, vectors, skew


@fuzz_settings(300)
@given(batch=embedding_batch(), model=st.one_of(st.none(), TEXT))
def test_embeddings_are_written_whole_or_refused(arena: Arena, batch: Any, model: Any):
    arena.reset()
    entries, vectors, skew = batch
    rows = {
        "pending-fact": next(f for f in arena.baseline["facts"] if f["embedding"] is None),
        "live-fact": next(f for f in arena.baseline["facts"] if f["embedding"] is not None),
        "pending-message": next(m for m in arena.baseline["messages"] if m["embedding"] is None),
    }
    ids = [rows[name]["id"] if name in rows else str(uuid.uuid4()) for name, _ in entries]
    hashes = [
        None
        if h is None
        else rows[name]["content_hash"]
        if h == "right" and name in rows
        else "0" * 32
        for name, h in entries
    ]
    if skew == "ids":
        ids.append(str(uuid.uuid4()))
    elif skew == "hashes":
        hashes.append("0" * 32)
    elif skew == "vectors" and isinstance(vectors, list):
        vectors = [*vectors, [0, 0, 0, 1]]
    arena.attempt(
        arena.service,
        "SELECT memory.set_memory_embeddings(%s::uuid[], %s::text[], %s::jsonb, %s)",
        ids,
        hashes,
        dump(vectors),
        model,
    )


TIMESTAMP = st.one_of(
    st.sampled_from(
        [
            "2024-01-02T03:04:05Z",
            "2024-13-45",
            "yesterday",
            "infinity",
            "",
            "10000-01-01",
            "0001-01-01 BC",
        ]
    ),
    SCALAR,
)


def field(good: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return weighted((4, good), (1, hostile))


WHEN = st.just("2024-01-02T03:04:05Z")


MESSAGE = weighted(
    (
        9,
        st.fixed_dictionaries(
            {
                "id": field(
                    st.sampled_from(["m1", "m3"]), st.sampled_from(["", "x" * 1025]) | SCALAR
                ),
                "chat_id": field(st.sampled_from(["c1", "c2"]), st.just("") | TEXT | SCALAR),
                "owner_id": field(
                    st.sampled_from([OWNER_ID, USER_ID]), st.sampled_from(UUID_FORMS) | SCALAR
                ),
                "role": field(st.just("user"), st.sampled_from(["", "r" * 65]) | SCALAR),
                "content": field(CONTENT, ANY_TEXT | SCALAR),
            },
            optional={
                "temporary": field(st.booleans(), SCALAR),
                "created_at": field(WHEN, TIMESTAMP),
                "embedding_model": st.one_of(TEXT, SCALAR),
                "junk": JSON,
            },
        ),
    ),
    (1, JSON),
)


@fuzz_settings(300)
@given(message=MESSAGE, vector=REAL_ARRAY, as_user=st.integers(0, 9))
def test_messages_are_indexed_or_refused(arena: Arena, message: Any, vector: Any, as_user: int):
    arena.reset()
    arena.attempt(
        arena.user if as_user == 9 else arena.service,
        "SELECT memory.index_message(%s, %s::jsonb, %s::real[])",
        ORG,
        dump(message),
        vector,
    )


OPTIONS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "rrf_k": st.one_of(NUMBER, SCALAR),
            "vector_weight": st.one_of(NUMBER, SCALAR),
            "text_weight": st.one_of(NUMBER, SCALAR),
            "junk": SCALAR,
        },
    ),
    JSON,
)
QUERY = st.one_of(
    ANY_TEXT,
    st.sampled_from(["Works in Lisbon", "where does he work?", "tea & violin | !porto"]),
    st.builds(  # a long question: many distinct words
        lambda n: " ".join(f"w{i}x" for i in range(n)), st.sampled_from([10, 5_000, 100_000])
    ),
)


@fuzz_settings(400)
@given(
    which=st.sampled_from(["facts", "messages"]),
    query=weighted((5, QUERY), (1, st.none())),
    vector=REAL_ARRAY,
    who=caller_and_ns(lambda service: weighted((2, st.none()), (1, ns_or_array(service)))),
    exclude=st.one_of(st.none(), TEXT, st.just("c1")),
    k=weighted((4, st.integers(1, 12)), (1, st.integers(-(2**31), 2**31 - 1))),
    options=weighted((3, st.just({})), (2, OPTIONS)),
)
def test_searches_answer_or_refuse(
    arena: Arena,
    which: str,
    query: Any,
    vector: Any,
    who: tuple[bool, Any],
    exclude: Any,
    k: Any,
    options: Any,
):
    arena.reset()
    as_user, ns = who
    principal, own = acting(arena, as_user)
    opts = None if options is None else dump(options)
    if which == "facts":
        arena.attempt(
            principal,
            "SELECT * FROM memory.search_facts(%s, %s, %s::real[], %s::jsonb, %s::int, %s::jsonb)",
            ORG,
            query,
            vector,
            dump(own if ns is None else ns),
            k,
            opts,
        )
    else:
        # The messages' owner searches them; the service may not (it has no messages).
        arena.attempt(
            arena.owner if as_user or k % 5 else arena.service,
            "SELECT * FROM memory.search_messages(%s, %s, %s::real[], %s, %s::int, %s::jsonb)",
            ORG,
            query,
            vector,
            exclude,
            k,
            opts,
        )


EXPORT_ITEM = {
    "files": st.fixed_dictionaries(
        {
            "path": field(st.sampled_from(["/memories/i1.md", "/memories/i/2.md"]), PATH | SCALAR),
            "content": field(CONTENT, ANY_TEXT | SCALAR),
            "version": field(st.integers(1, 3), NUMBER | SCALAR),
            "created_at": field(WHEN, TIMESTAMP),
            "updated_at": field(WHEN, TIMESTAMP),
        }
    ),
    "facts": st.fixed_dictionaries(
        {
            "id": field(st.uuids().map(str), st.sampled_from(UUID_FORMS) | SCALAR),
            "content": field(CONTENT, ANY_TEXT | SCALAR),
            "version": field(st.integers(1, 3), NUMBER | SCALAR),
            "embedding": field(st.none() | st.just([0, 0, 0, 1]), VECTOR_JSON),
            "source": JSON,
            "created_at": field(WHEN, TIMESTAMP),
            "updated_at": field(WHEN, TIMESTAMP),
            "forgotten_at": field(st.none(), TIMESTAMP),
            "superseded_by": field(st.none(), st.uuids().map(str) | SCALAR),
        }
    ),
    "messages": st.fixed_dictionaries(
        {
            "id": field(st.sampled_from(["i1", "i2"]), TEXT | SCALAR),
            "chat_id": field(st.just("ci"), TEXT | SCALAR),
            "role": field(st.just("user"), TEXT | SCALAR),
            "content": field(CONTENT, ANY_TEXT | SCALAR),
            "embedding": field(st.none() | st.just([0, 1, 0, 0]), VECTOR_JSON),
            "created_at": field(WHEN, TIMESTAMP),
            "indexed_at": field(WHEN, TIMESTAMP),
        }
    ),
}
EXPORT = weighted(
    (
        9,
        st.fixed_dictionaries(
            {"format": st.just("pgmemory"), "version": st.just(1)}
            | {key: field(st.lists(item, max_size=2), JSON) for key, item in EXPORT_ITEM.items()}
        ),
    ),
    (1, JSON),
)


@fuzz_settings(300)
@given(
    data=EXPORT, who=caller_and_ns(lambda service: weighted((2, st.none()), (1, ns_st(service))))
)
def test_import_loads_whole_or_refuses(arena: Arena, data: Any, who: tuple[bool, Any]):
    arena.reset()
    as_user, ns = who
    principal, own = acting(arena, as_user)
    arena.attempt(
        principal,
        "SELECT memory.import(%s, %s::jsonb, %s::jsonb)",
        ORG,
        dump(data),
        dump(own if ns is None else ns),
    )


# ----------------------------------------------------------------------------- bugs found


def _known(name: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(name in KNOWN_BUGS, reason=f"known bug {name}", strict=True)


def _refused(principal: Principal, query: str, *params: Any) -> Failure:
    failure = principal.fails(query, *params)
    assert (
        failure.hint in DOCUMENTED_CODES and failure.sqlstate == DOCUMENTED_CODES[failure.hint]
    ), failure
    return failure


@_known("view_range_fraction")
def test_bug_view_range_with_a_fractional_zero(arena: Arena):
    # [1.0, 2] passes the "is an integer" check (1.0 = trunc(1.0)), then ('1.0')::int fails.
    got = arena.service.value(
        "SELECT memory.run(%s, %s::jsonb, %s::jsonb)",
        ORG,
        '{"command": "view", "path": "/memories/a.md", "view_range": [1.0, 2]}',
        json.dumps(OWNER),
    )
    assert got.endswith("     1\talpha\n     2\tbeta"), got


@_known("embedding_underflow")
def test_bug_embedding_element_below_float4_range(arena: Arena):
    # 1e-50 is finite and below the 3.4e38 bound checked, but ('1e-50')::real underflows.
    _refused(
        arena.service,
        "SELECT * FROM memory.save_facts(%s, %s::jsonb, %s::jsonb)",
        ORG,
        '[{"content": "tiny", "embedding": [1e-50, 0, 0, 1]}]',
        json.dumps(OWNER),
    )


@_known("search_option_overflow")
def test_bug_search_option_beyond_float8(arena: Arena):
    # A JSON number passes "non-negative number", then (opts ->> 'rrf_k')::float8 overflows.
    _refused(
        arena.service,
        "SELECT * FROM memory.search_facts(%s, 'lisbon', NULL, %s::jsonb, 10, %s::jsonb)",
        ORG,
        json.dumps(OWNER),
        '{"rrf_k": 1e400}',
    )


@_known("query_too_long_for_tsvector")
def test_bug_search_query_too_long_for_tsvector(arena: Arena):
    # The query text has no size limit; to_tsvector refuses over 1 MB with a bare 54000.
    query = " ".join(f"w{i}x" for i in range(200_000))
    _refused(
        arena.service,
        "SELECT * FROM memory.search_facts(%s, %s, NULL, %s::jsonb)",
        ORG,
        query,
        json.dumps(OWNER),
    )


@_known("import_time_zone_displacement")
def test_bug_import_timestamp_given_as_a_number(arena: Arena):
    # A number where a timestamp belongs: ('-3958390643883979776')::timestamptz raises
    # 22009, which import's handler (22007, 22008, ...) does not turn into MEMORY_INVALID.
    data = {
        "format": "pgmemory",
        "version": 1,
        "files": [
            {
                "path": "/memories/i.md",
                "content": "x",
                "version": 1,
                "created_at": -3958390643883979776,
                "updated_at": "2024-01-02T03:04:05Z",
            }
        ],
        "facts": [],
        "messages": [],
    }
    _refused(
        arena.service,
        "SELECT memory.import(%s, %s::jsonb, %s::jsonb)",
        ORG,
        json.dumps(data),
        json.dumps(OWNER),
    )

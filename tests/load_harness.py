"""The load harness: 16 clients doing what an assistant platform does, then an
integrity check of the database against what every client was told.

tests/sql/test_load_short.py runs it for 20 seconds, tests/sql/test_faults.py
under server crashes, and `python -m bench.load` for 10 minutes (its
throughput and latency in bench/results/load.json). Nothing here is timed or
asserted on time: `Load` runs the clients, `Load.check()` returns the problems.

Mixed clients (all but the embed and capture workers) pick one operation at a time:

- core edits through `memory.run`: a unique token line inserted into a shared
  notes file, or one of their own tokens removed with `str_replace` (row-lock
  contention on 16 files); structural work in a folder of their own (create,
  rename a file, rename a directory of files, delete a directory, edit); views
  and `render`;
- an optimistic counter in a core file: `memory.read` then `memory.write`
  with `expected_version`, retried on MEMORY_CONFLICT;
- fact saves with dedupe: batches of 1-4 facts, most with a vector near one of
  the user's topics (some close enough to be duplicates, some at the
  threshold, some far), some without a vector, some repeating an earlier text;
- fact searches and message searches (text + vector);
- message indexing: new messages (with or without a vector), edits of earlier
  ones, temporary ones; many user messages carry a marker ("remember: <token>")
  that the capture workers turn into a fact;
- document read-modify-write of shared counters, retried on
  MEMORY_DOCUMENT_CONFLICT.

The embed workers loop over `pending_embeddings` / `set_memory_embeddings`
with random unit vectors, as `Memory.embed_pending` does.

The capture workers loop over `pending_captures` / `capture_facts` as
`Memory.capture_pending` does, with a rule instead of a model: one `add` per
leased user message with a marker (some with a vector), and now and then a
`supersede` or `forget` of a fact captured earlier from the same chat (read
from the database, as the real worker searches the owner's facts), an `add`
repeating a known fact (`duplicate`), a secret (`secret`), a random or another
owner's fact id (`unknown_fact`). Every status is predicted and compared.
Some leases are given back (`fail_capture`), some answers are malformed
(MEMORY_INVALID, then given back), some applied captures are sent again
(MEMORY_CONFLICT), parked chats are retried; with `capture_lease_seconds`
set short, some leases are held past their end and then applied
(MEMORY_CONFLICT: lost).

Every call is one transaction with the caller's claims, as the Python client
makes it. Each client keeps a ledger of what was acknowledged (the call
returned). A call whose connection broke (server restarted) is in doubt: the
client reconnects and reads back whether it took effect, so the ledger stays
exact. The integrity check then compares the database with the ledgers:

- every file's version is 1 + the number of changes made to it, and its
  content holds exactly the tokens acknowledged and not removed;
- counter files and documents hold exactly the acknowledged increments, and
  their versions follow;
- every client's folder is exactly as its acknowledged operations left it;
- every acknowledged fact and message is present with its content, every
  acknowledged embedding is the one stored, temporary messages stored nothing;
- no two live facts of one namespace have cosine similarity >= the dedupe
  threshold;
- no chat was leased to two capture workers at once: per chat, no two lease
  intervals overlap (each taken from the lease call's return to the release
  call's start or the lease's end, whichever is first: inside the lease the
  database held, so an overlap is a real one); no capture was applied twice,
  no message version reached two applied captures;
- every fact a capture acknowledged is stored with its content, owner,
  chat and capture id, live unless an acknowledged operation superseded (then
  with `superseded_by` the new fact) or forgot it; no other fact carries a
  capture id and no other fact is forgotten.

Expected errors (MEMORY_CONFLICT, MEMORY_DOCUMENT_CONFLICT; the capture
workers' MEMORY_CONFLICT of a lease that ran out or was applied, and their
MEMORY_INVALID of a malformed answer) are retried or counted; any other error
is unexpected and reported. So is a capture status that differs from the
predicted one, and a MEMORY_CONFLICT on a lease that had not run out.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import statistics
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

SET_CLAIMS = "SELECT set_config('request.jwt.claims', %s, true)"
SERVICE = ""  # no claims: the service (the login is a superuser or in memory_service)
EXPECTED_HINTS = frozenset({"MEMORY_CONFLICT", "MEMORY_DOCUMENT_CONFLICT"})
INTERRUPTED_STATES = frozenset({"57P01", "57P02", "57P03"})  # shutdown, crash, starting up
DOC_SCOPE = "load/runtime"
EMBED_MODEL = "load-random"
CAPTURE_MODEL = "load-rule"
MARKER = re.compile(r"remember: (\S+)")
CLOCK_SLACK = 0.1  # seconds: the server's lease clock against ours (an overlap needs more)

# Mixed clients: operation → weight.
MIX: dict[str, int] = {
    "core.token": 20,
    "core.counter": 8,
    "core.folder": 10,
    "core.view": 6,
    "facts.save": 18,
    "facts.search": 12,
    "messages.index": 14,
    "messages.search": 6,
    "documents.rmw": 8,
}


@dataclass
class Config:
    clients: int = 16  # embed and capture workers included
    embed_workers: int = 2
    capture_workers: int = 2
    capture_batch: int = 4  # chats per pending_captures
    capture_max_messages: int = 20
    # Set (seconds), capture_lease_seconds is set to it and every 100th lease of a
    # worker is held past its end before it is applied (a lost lease). The default
    # (300 s) outlasts any reconnection: an interrupted apply is then read back exactly.
    capture_lease_seconds: int | None = None
    seconds: float = 600.0
    users: int = 8
    files_per_user: int = 2
    documents: int = 8
    topics: int = 200
    dimensions: int = 64
    seed: int = 1
    # A broken connection is then in doubt and resolved, not an unexpected error
    # (the crash test restarts the server under the load).
    allow_interruptions: bool = False
    reconnect_for: float = 180.0  # seconds a client keeps trying to reconnect


@dataclass
class World:
    """What every client shares: the organization, users, files, documents, topics."""

    org: uuid.UUID
    users: list[uuid.UUID]
    notes: list[tuple[int, str]]  # (user index, path) of the shared notes files
    counter_path: str
    documents: list[str]
    topics: np.ndarray  # users x topics x dimensions, unit vectors
    threshold: float


class Interrupted(Exception):
    """The connection broke during a call: its outcome is unknown."""


def claims_of(user: uuid.UUID) -> str:
    return json.dumps({"sub": str(user), "role": "authenticated"})


def unit(rng: np.random.Generator, dims: int) -> np.ndarray:
    v = rng.standard_normal(dims)
    return (v / np.linalg.norm(v)).astype(np.float32)


def as_list(v: np.ndarray) -> list[float]:
    return [float(x) for x in v.astype(np.float32)]


def parse_vector(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return value.astype(np.float32)
    if hasattr(value, "to_numpy"):  # pgvector's Vector
        return np.asarray(value.to_numpy(), dtype=np.float32)
    return np.asarray(json.loads(str(value)), dtype=np.float32)


def _is_interruption(err: BaseException) -> bool:
    if isinstance(err, psycopg.InterfaceError):
        return True
    if isinstance(err, psycopg.Error):
        state = err.sqlstate or ""
        if state in INTERRUPTED_STATES or state.startswith("08"):
            return True
        return isinstance(err, psycopg.OperationalError) and not state
    return False


# ---------------------------------------------------------------- ledgers


@dataclass
class OpStats:
    count: int = 0
    retries: int = 0  # expected conflicts, retried
    rows: int = 0  # rows written, where it means something (embeddings)
    latencies: list[float] = field(default_factory=list)


@dataclass
class Lease:
    """One chat leased by a capture worker, and what became of it."""

    worker: int
    capture_id: str
    owner: uuid.UUID
    chat: str
    start: float  # monotonic: pending_captures returned (the lease began before)
    expires: float  # the call's start + the lease: it lasts at least until then
    messages: list[tuple[str, str, str]]  # (message id, role, content) handed out
    end: float = float("inf")  # the release was sent (it ended after), else expires
    outcome: str = "held"  # applied, failed (given back), lost, abandoned

    def __post_init__(self) -> None:
        self.end = min(self.end, self.expires)


@dataclass
class Planned:
    """One operation of a capture answer and the statuses capture_facts may give it."""

    op: dict[str, Any]
    statuses: frozenset[str]
    target: str | None = None  # the known fact a duplicate names
    vector: np.ndarray | None = None


@dataclass
class Ledger:
    """What one client was told (or read back after an interruption)."""

    tokens: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))  # note → live
    note_changes: Counter[int] = field(default_factory=Counter)  # note → changes applied
    counter_increments: Counter[int] = field(default_factory=Counter)  # user → increments
    folder: dict[str, tuple[str, int]] = field(default_factory=dict)  # path → (content, version)
    facts: dict[str, tuple[int, str, str, np.ndarray | None]] = field(
        default_factory=dict
    )  # id → (user, ns key, content, vector)
    duplicates_of: set[str] = field(default_factory=set)
    messages: dict[tuple[str, str], tuple[int, str]] = field(
        default_factory=dict
    )  # (chat, id) → (user, content)
    temporary: set[tuple[str, str]] = field(default_factory=set)
    embeddings: dict[str, list[np.ndarray]] = field(
        default_factory=lambda: defaultdict(list)
    )  # id → vectors written
    document_increments: Counter[int] = field(default_factory=Counter)
    leases: list[Lease] = field(default_factory=list)
    captured: dict[str, tuple[uuid.UUID, str, str, str]] = field(
        default_factory=dict
    )  # fact id → (owner, chat, capture id, content): saved by an acknowledged capture
    ended: dict[str, str | None] = field(
        default_factory=dict
    )  # fact id → the fact superseding it (None: forgotten), by an acknowledged capture
    statuses: Counter[str] = field(default_factory=Counter)  # capture_facts statuses
    acknowledged: int = 0  # acknowledged writes
    in_doubt: int = 0  # interrupted calls, resolved by reading back
    resolved_applied: int = 0
    unresolved: list[str] = field(default_factory=list)


@dataclass
class ErrorLog:
    unexpected: list[str] = field(default_factory=list)
    unexpected_count: int = 0
    interruptions: int = 0

    def add(self, what: str) -> None:
        self.unexpected_count += 1
        if len(self.unexpected) < 50:
            self.unexpected.append(what)


# ---------------------------------------------------------------- one client


class Client:
    """One connection, one thread, its own ledger."""

    def __init__(self, load: Load, index: int, role: str) -> None:
        self.load = load
        self.index = index
        self.role = role
        self.world = load.world
        self.config = load.config
        self.rng = random.Random(load.config.seed * 1000 + index)
        self.np_rng = np.random.default_rng(load.config.seed * 1000 + index)
        self.ledger = Ledger()
        self.errors = ErrorLog()
        self.stats: dict[str, OpStats] = defaultdict(OpStats)
        self.conn: psycopg.Connection[Any] | None = None
        self.seq = 0
        self.home = index % len(self.world.users)  # the user whose namespace holds our folder
        self.prefix = f"/memories/c{index:02d}"
        self.box = 0
        self.chats: list[str] = []
        self.my_messages: list[tuple[str, str, int]] = []  # (chat, id, user)
        self.fact_texts: list[tuple[int, str]] = []  # (user, content) saved by us
        self.leased = 0  # chats leased (capture workers): the rare fates go by this count
        self.saved_by_me: list[tuple[uuid.UUID, str]] = []  # (owner, fact id) we captured

    # ---- connection and calls

    def connect(self) -> None:
        deadline = time.monotonic() + self.config.reconnect_for
        while True:
            try:
                self.conn = psycopg.connect(self.load.dsn, autocommit=True)
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def call(self, claims: str | None, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """One transaction; raises Interrupted when the connection broke."""
        if self.conn is None or self.conn.closed:
            self.connect()
        assert self.conn is not None
        try:
            with self.conn.transaction(), self.conn.cursor() as cur:
                if claims is not None:
                    cur.execute(SET_CLAIMS, (claims,))
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []
        except psycopg.Error as err:
            if _is_interruption(err):
                with contextlib.suppress(Exception):
                    self.conn.close()
                self.conn = None
                raise Interrupted(f"{type(err).__name__}: {err}") from err
            raise

    def value(self, claims: str | None, sql: str, *params: Any) -> Any:
        return self.call(claims, sql, *params)[0][0]

    def settle(self, what: str, check: Callable[[], bool], apply: Callable[[], None]) -> None:
        """After an interruption: reconnect, read back whether the call took effect."""
        self.ledger.in_doubt += 1
        if not self.config.allow_interruptions:
            self.errors.add(f"{what}: connection broke")
        else:
            self.errors.interruptions += 1
        deadline = time.monotonic() + self.config.reconnect_for
        while True:
            try:
                if check():
                    apply()
                    self.ledger.resolved_applied += 1
                return
            except Interrupted:
                if time.monotonic() > deadline:
                    self.ledger.unresolved.append(what)
                    return
                time.sleep(0.2)

    def user_claims(self, user: int) -> str:
        return claims_of(self.world.users[user])

    def token(self) -> str:
        self.seq += 1
        return f"t{self.index:02d}.{self.seq:07d}.{self.rng.randrange(16**4):04x}"

    # ---- the loop

    def run(self, stop: threading.Event) -> None:
        ops = list(MIX)
        weights = [MIX[o] for o in ops]
        try:
            self.connect()
        except psycopg.Error as err:
            self.errors.add(f"connect: {err}")
            return
        while not stop.is_set():
            op = self.role if self.role != "mixed" else self.rng.choices(ops, weights)[0]
            started = time.perf_counter()
            try:
                name = getattr(self, "op_" + op.replace(".", "_"))()
            except Interrupted as err:  # a read, or the first half of a read-modify-write
                if self.config.allow_interruptions:
                    self.errors.interruptions += 1
                else:
                    self.errors.add(f"{op}: {err}")
                continue
            except psycopg.Error as err:
                diag = err.diag
                self.errors.add(f"{op}: {err.sqlstate} {diag.message_hint}: {diag.message_primary}")
                continue
            except Exception as err:  # a bug in the load itself is a failure too
                self.errors.add(f"{op}: {type(err).__name__}: {err}")
                continue
            if name is None:  # nothing to do this time (embed or capture worker idle)
                stop.wait(0.05)
                continue
            if not name:  # the operation recorded its calls itself
                continue
            stats = self.stats[name]
            stats.count += 1
            stats.latencies.append(time.perf_counter() - started)
        if self.conn is not None:
            self.conn.close()

    # ---- core memory: tokens in shared notes

    def op_core_token(self) -> str:
        note = self.rng.randrange(len(self.world.notes))
        user, path = self.world.notes[note]
        claims = self.user_claims(user)
        mine = self.ledger.tokens[note]
        if mine and (len(mine) >= 5 or self.rng.random() < 0.4):
            token = self.rng.choice(sorted(mine))
            command = {"command": "str_replace", "path": path, "old_str": token + "\n"}
            command["new_str"] = ""

            def removed() -> None:
                mine.discard(token)
                self.ledger.note_changes[note] += 1
                self.ledger.acknowledged += 1

            try:
                self.call(claims, "SELECT memory.run(%s, %s)", self.world.org, Jsonb(command))
            except Interrupted:
                self.settle(
                    "remove token", lambda: token not in self.read_note(claims, path), removed
                )
                return "core.remove"
            removed()
            return "core.remove"
        token = self.token()
        command = {"command": "insert", "path": path, "insert_line": 1, "insert_text": token}

        def inserted() -> None:
            mine.add(token)
            self.ledger.note_changes[note] += 1
            self.ledger.acknowledged += 1

        try:
            self.call(claims, "SELECT memory.run(%s, %s)", self.world.org, Jsonb(command))
        except Interrupted:
            self.settle("insert token", lambda: token in self.read_note(claims, path), inserted)
            return "core.insert"
        inserted()
        return "core.insert"

    def read_note(self, claims: str, path: str) -> set[str]:
        doc = self.value(claims, "SELECT memory.read(%s, %s)", self.world.org, path)
        return set(doc["content"].split("\n")[1:]) - {""}

    # ---- core memory: optimistic counter with memory.write

    def op_core_counter(self) -> str:
        user = self.rng.randrange(len(self.world.users))
        claims = self.user_claims(user)
        path = self.world.counter_path
        token = self.token()
        while True:
            doc = self.value(claims, "SELECT memory.read(%s, %s)", self.world.org, path)
            state = json.loads(doc["content"])
            state["count"] += 1
            state["last"][str(self.index)] = token
            try:
                self.call(
                    claims,
                    "SELECT memory.write(%s, %s, %s, %s)",
                    self.world.org,
                    path,
                    json.dumps(state, sort_keys=True),
                    doc["version"],
                )
            except Interrupted:

                def applied() -> bool:
                    now = self.value(claims, "SELECT memory.read(%s, %s)", self.world.org, path)
                    return json.loads(now["content"])["last"].get(str(self.index)) == token

                self.settle("counter write", applied, lambda: self.counted(user))
                return "core.counter"
            except psycopg.Error as err:
                if err.diag.message_hint == "MEMORY_CONFLICT":
                    self.stats["core.counter"].retries += 1
                    continue
                raise
            self.counted(user)
            return "core.counter"

    def counted(self, user: int) -> None:
        self.ledger.counter_increments[user] += 1
        self.ledger.acknowledged += 1

    # ---- core memory: a folder of our own (create / rename / delete / edit)

    def folder_now(self, claims: str) -> dict[str, tuple[str, int]]:
        rows = self.call(
            claims,
            "SELECT f.path, f.version FROM memory.list_files(%s) f WHERE starts_with(f.path, %s)",
            self.world.org,
            self.prefix + "/",
        )
        out = {}
        for path, version in rows:
            doc = self.value(claims, "SELECT memory.read(%s, %s)", self.world.org, path)
            out[path] = (doc["content"], version)
        return out

    def op_core_folder(self) -> str:
        claims = self.user_claims(self.home)
        model = self.ledger.folder
        loose = sorted(p for p in model if p.count("/") == 3)
        boxed = sorted({p.rsplit("/", 1)[0] for p in model if p.count("/") == 4})
        roll = self.rng.random()
        if len(loose) < 4 or roll < 0.3:
            self.seq += 1
            path = f"{self.prefix}/n{self.seq}.md"
            text = f"note {self.seq}\nline two\n"
            command: dict[str, Any] = {"command": "create", "path": path, "file_text": text}
            name = "core.create"

            def change(m: dict[str, tuple[str, int]]) -> None:
                m[path] = (text, 1)

        elif roll < 0.5:
            path = self.rng.choice(loose)
            content, _ = model[path]
            new = content.replace("line two", f"line {self.seq}", 1)
            command = {"command": "str_replace", "path": path, "old_str": content, "new_str": new}
            name = "core.edit"

            def change(m: dict[str, tuple[str, int]]) -> None:
                m[path] = (new, m[path][1] + 1)

        elif roll < 0.75:
            old = self.rng.choice(loose)
            new_path = f"{self.prefix}/box{self.box}/{old.rsplit('/', 1)[1]}"
            command = {"command": "rename", "old_path": old, "new_path": new_path}
            name = "core.rename_file"

            def change(m: dict[str, tuple[str, int]]) -> None:
                content, version = m.pop(old)
                m[new_path] = (content, version + 1)

        elif boxed and roll < 0.9:
            directory = self.rng.choice(boxed)
            self.box += 1
            target = f"{self.prefix}/old{self.box}"
            command = {"command": "rename", "old_path": directory, "new_path": target}
            name = "core.rename_dir"

            def change(m: dict[str, tuple[str, int]]) -> None:
                for p in [p for p in m if p.startswith(directory + "/")]:
                    content, version = m.pop(p)
                    m[target + p[len(directory) :]] = (content, version + 1)

        else:
            olds = sorted({p.rsplit("/", 1)[0] for p in model if "/old" in p})
            if not olds:
                return self.op_core_view()
            directory = self.rng.choice(olds)
            command = {"command": "delete", "path": directory}
            name = "core.delete_dir"

            def change(m: dict[str, tuple[str, int]]) -> None:
                for p in [p for p in m if p.startswith(directory + "/")]:
                    del m[p]

        expected = dict(model)
        change(expected)

        def adopt() -> None:
            model.clear()
            model.update(expected)
            self.ledger.acknowledged += 1

        try:
            self.call(claims, "SELECT memory.run(%s, %s)", self.world.org, Jsonb(command))
        except Interrupted:
            self.settle(name, lambda: self.folder_now(claims) == expected, adopt)
            return name
        adopt()
        return name

    def op_core_view(self) -> str:
        user = self.rng.randrange(len(self.world.users))
        claims = self.user_claims(user)
        if self.rng.random() < 0.5:
            self.call(
                claims,
                "SELECT memory.run(%s, %s)",
                self.world.org,
                Jsonb({"command": "view", "path": "/memories"}),
            )
            return "core.view"
        self.call(claims, "SELECT memory.render(%s)", self.world.org)
        return "core.render"

    # ---- facts

    def namespace(self) -> tuple[str, dict[str, str]]:
        if self.rng.random() < 0.2:
            return "agent", {"scope": "agent", "agent_id": "planner"}
        return "user", {}

    def op_facts_save(self) -> str:
        user = self.rng.randrange(len(self.world.users))
        ns_key, ns = self.namespace()
        claims = self.user_claims(user)
        batch: list[dict[str, Any]] = []
        vectors: list[np.ndarray | None] = []
        expect_duplicate: list[bool] = []
        for _ in range(self.rng.randint(1, 4)):
            self.seq += 1
            roll = self.rng.random()
            if roll < 0.2:
                content = f"pending fact {self.index}.{self.seq}: likes item {self.rng.random()}"
                batch.append({"content": content})
                vectors.append(None)
                expect_duplicate.append(False)
                continue
            if roll < 0.27 and self.fact_texts:
                same_user, text = self.rng.choice(self.fact_texts)
                if same_user == user and ns_key == "user":
                    batch.append({"content": "  " + text.upper() + " "})  # same normalized text
                    vectors.append(None)
                    expect_duplicate.append(True)
                    continue
            topic = self.rng.randrange(self.config.topics)
            noise = self.rng.choice((0.05, 0.15, 0.3, 0.42, 0.45, 0.5, 1.0, 1.5))
            base = self.world.topics[user, topic]
            v = base + noise * self.np_rng.standard_normal(base.shape[0]) / np.sqrt(base.shape[0])
            v = (v / np.linalg.norm(v)).astype(np.float32)
            content = f"topic {topic} of user {user}, said by {self.index} as {self.seq}"
            batch.append({"content": content, "embedding": as_list(v)})
            vectors.append(v)
            expect_duplicate.append(False)
        sql = "SELECT ord, id, duplicate_of FROM memory.save_facts(%s, %s, %s) ORDER BY ord"

        def record(rows: list[tuple[Any, ...]]) -> None:
            for ord_, fact_id, duplicate_of in rows:
                i = ord_ - 1
                if expect_duplicate[i] and fact_id is not None:
                    self.errors.add(f"facts.save: an exact text repeat was saved: {batch[i]}")
                if fact_id is not None:
                    self.ledger.facts[str(fact_id)] = (
                        user,
                        ns_key,
                        batch[i]["content"],
                        vectors[i],
                    )
                    if ns_key == "user" and not expect_duplicate[i]:
                        self.fact_texts.append((user, batch[i]["content"]))
                else:
                    self.ledger.duplicates_of.add(str(duplicate_of))
            self.ledger.acknowledged += 1

        try:
            rows = self.call(claims, sql, self.world.org, Jsonb(batch), Jsonb(ns))
        except Interrupted:
            saved: list[tuple[Any, ...]] = []

            def applied() -> bool:
                nonlocal saved
                contents = [f["content"] for f in batch]
                found = dict(
                    self.call(
                        SERVICE,
                        "SELECT f.content, f.id FROM memory.facts f"
                        " JOIN memory.namespaces n ON n.organization_id = f.organization_id"
                        " AND n.id = f.namespace_id"
                        " WHERE f.organization_id = %s AND n.owner_id = %s AND n.scope = %s"
                        " AND f.content = ANY(%s)",
                        self.world.org,
                        self.world.users[user],
                        ns_key,
                        contents,
                    )
                )
                saved = [(i + 1, found.get(c), None) for i, c in enumerate(contents)]
                return bool(found)

            self.settle("facts.save", applied, lambda: record([r for r in saved if r[1]]))
            return "facts.save"
        record(rows)
        return "facts.save"

    def op_facts_search(self) -> str:
        user = self.rng.randrange(len(self.world.users))
        _, ns = self.namespace()
        topic = self.rng.randrange(self.config.topics)
        self.call(
            self.user_claims(user),
            "SELECT id, score FROM memory.search_facts(%s, %s, %b::real[], %s, 10)",
            self.world.org,
            f"what about topic {topic}?",
            as_list(self.world.topics[user, topic]),
            Jsonb(ns),
        )
        return "facts.search"

    # ---- messages

    def op_messages_index(self) -> str:
        roll = self.rng.random()
        if roll < 0.05:
            return self.index_message(temporary=True)
        if roll < 0.2 and self.my_messages:
            return self.index_message(edit=self.rng.choice(self.my_messages))
        return self.index_message()

    def index_message(
        self, *, temporary: bool = False, edit: tuple[str, str, int] | None = None
    ) -> str:
        self.seq += 1
        if edit is not None:
            chat, msg_id, user = edit
            name = "messages.edit"
        else:
            user = self.rng.randrange(len(self.world.users))
            if not self.chats or self.rng.random() < 0.1:
                self.chats.append(f"chat-{self.index}-{len(self.chats)}")
            chat = self.rng.choice(self.chats)
            msg_id = f"m{self.seq}"
            name = "messages.temporary" if temporary else "messages.index"
        content = (
            f"message {self.seq} from client {self.index}: the user asked about "
            f"topic {self.rng.randrange(self.config.topics)} and {self.rng.random():.6f}"
        )
        role = self.rng.choice(("user", "assistant"))
        if role == "user" and self.rng.random() < 0.6:
            content += f"; remember: {self.token()}"  # a fact for the capture workers
        # No created_at: the server's now(), so a chat's messages follow the order they
        # were indexed in (a fixed one would order them by random row id around the
        # capture watermark, and most would fall behind it).
        message = {
            "id": msg_id,
            "chat_id": chat,
            "owner_id": str(self.world.users[user]),
            "role": role,
            "content": content,
            "temporary": temporary,
        }
        vector = unit(self.np_rng, self.config.dimensions) if self.rng.random() < 0.5 else None
        if vector is not None:
            message["embedding_model"] = EMBED_MODEL

        def record() -> None:
            if temporary:
                self.ledger.temporary.add((chat, msg_id))
            else:
                self.ledger.messages[(chat, msg_id)] = (user, content)
                if edit is None:
                    self.my_messages.append((chat, msg_id, user))
                if vector is not None:
                    self.ledger.embeddings[self.message_key(chat, msg_id, content)].append(vector)
            self.ledger.acknowledged += 1

        try:
            stored = self.value(
                SERVICE,
                "SELECT memory.index_message(%s, %s, %b::real[])",
                self.world.org,
                Jsonb(message),
                as_list(vector) if vector is not None else None,
            )
        except Interrupted:
            if temporary:
                self.settle(name, lambda: True, record)
                return name

            def applied() -> bool:
                rows = self.call(
                    SERVICE,
                    "SELECT content FROM memory.messages WHERE organization_id = %s"
                    " AND chat_id = %s AND message_id = %s",
                    self.world.org,
                    chat,
                    msg_id,
                )
                return bool(rows) and rows[0][0] == content

            self.settle(name, applied, record)
            return name
        if stored == temporary:  # true for a stored message, false for a temporary one
            self.errors.add(f"index_message returned {stored} for temporary={temporary}")
        record()
        return name

    @staticmethod
    def message_key(chat: str, msg_id: str, content: str) -> str:
        return f"message:{chat}:{msg_id}:{content}"

    def op_messages_search(self) -> str:
        user = self.rng.randrange(len(self.world.users))
        self.call(
            self.user_claims(user),
            "SELECT id, score FROM memory.search_messages(%s, %s, %b::real[], %s, 5)",
            self.world.org,
            f"what did we say about topic {self.rng.randrange(self.config.topics)}?",
            as_list(unit(self.np_rng, self.config.dimensions)),
            self.rng.choice(self.chats) if self.chats else None,
        )
        return "messages.search"

    # ---- documents

    def op_documents_rmw(self) -> str:
        doc = self.rng.randrange(len(self.world.documents))
        path = self.world.documents[doc]
        token = self.token()
        while True:
            current = self.value(SERVICE, "SELECT memory.document_read(%s, %s)", DOC_SCOPE, path)
            state = json.loads(current["content"])
            state["count"] += 1
            state["last"][str(self.index)] = token
            try:
                self.call(
                    SERVICE,
                    "SELECT memory.document_write(%s, %s, %s, %s)",
                    DOC_SCOPE,
                    path,
                    json.dumps(state, sort_keys=True),
                    current["version"],
                )
            except Interrupted:

                def applied() -> bool:
                    now = self.value(
                        SERVICE, "SELECT memory.document_read(%s, %s)", DOC_SCOPE, path
                    )
                    return json.loads(now["content"])["last"].get(str(self.index)) == token

                self.settle("documents.rmw", applied, lambda: self.incremented(doc))
                return "documents.rmw"
            except psycopg.Error as err:
                if err.diag.message_hint == "MEMORY_DOCUMENT_CONFLICT":
                    self.stats["documents.rmw"].retries += 1
                    continue
                raise
            self.incremented(doc)
            return "documents.rmw"

    def incremented(self, doc: int) -> None:
        self.ledger.document_increments[doc] += 1
        self.ledger.acknowledged += 1

    # ---- capture workers

    def timed(self, name: str, started: float, rows: int = 0) -> None:
        stats = self.stats[name]
        stats.count += 1
        stats.rows += rows
        stats.latencies.append(time.perf_counter() - started)

    def op_capture(self) -> str | None:
        """One round: lease a few chats, then decide and apply (or give back) each."""
        cfg = self.config
        if self.rng.random() < 0.01:  # chats parked after capture_max_attempts failures
            started = time.perf_counter()
            self.call(SERVICE, "SELECT memory.retry_captures(%s)", self.world.org)
            self.timed("capture.retry", started)
        lease_for = cfg.capture_lease_seconds or 300
        called, started = time.monotonic(), time.perf_counter()
        rows = self.call(
            SERVICE,
            "SELECT capture_id, org, owner_id, chat_id, messages, context"
            " FROM memory.pending_captures(%s, %s)",
            cfg.capture_batch,
            cfg.capture_max_messages,
        )
        got = time.monotonic()
        self.timed("capture.lease", started, len(rows))
        if not rows:
            return None
        leases = []
        for capture_id, org, owner, chat, messages, _context in rows:
            lease = Lease(
                self.index,
                str(capture_id),
                owner,
                chat,
                got,
                called + lease_for,
                [(m["id"], m["role"], m["content"]) for m in messages],
            )
            self.ledger.leases.append(lease)
            leases.append(lease)
            if org != self.world.org or len(messages) > cfg.capture_max_messages or not messages:
                self.errors.add(f"pending_captures: {org} {chat}: {len(messages)} messages")
        held: list[tuple[Lease, list[Planned]]] = []
        try:
            for lease in leases:
                self.leased += 1
                slow = cfg.capture_lease_seconds is not None and self.leased % 100 == 20
                plan = self.plan_capture(lease)
                if slow:  # applied after the others, once the lease has run out
                    held.append((lease, plan))
                    continue
                self.settle_capture(lease, plan)
            for lease, plan in held:  # the server set its end before we got it
                time.sleep(max(0.0, lease.start + lease_for - time.monotonic()) + 2 * CLOCK_SLACK)
                self.apply_capture(lease, plan, expect_lost=True)
        except Interrupted:  # the leases not reached stay held until they run out
            for lease in leases:
                if lease.outcome == "held":
                    lease.outcome = "abandoned"
            raise
        return ""

    def known_facts(self, lease: Lease) -> list[tuple[str, str]]:
        """The live facts captured from this chat, oldest first (ours while we hold it)."""
        started = time.perf_counter()
        rows = self.call(
            SERVICE,
            "SELECT f.id, f.content FROM memory.facts f"
            " JOIN memory.namespaces n ON n.organization_id = f.organization_id"
            " AND n.id = f.namespace_id"
            " WHERE f.organization_id = %s AND n.scope = 'user' AND n.owner_id = %s"
            " AND f.forgotten_at IS NULL AND f.source ->> 'chat_id' = %s"
            " ORDER BY f.created_at, f.id LIMIT 20",
            self.world.org,
            lease.owner,
            lease.chat,
        )
        self.timed("capture.known", started, len(rows))
        return [(str(i), c) for i, c in rows]

    def plan_capture(self, lease: Lease) -> list[Planned]:
        """The rule's answer: adds first (one save_facts run), then the others."""
        live = dict(self.known_facts(lease))
        plan: list[Planned] = []
        dims = self.config.dimensions

        def vector() -> np.ndarray | None:
            return unit(self.np_rng, dims) if self.rng.random() < 0.3 else None

        def with_vector(op: dict[str, Any], v: np.ndarray | None) -> dict[str, Any]:
            return {**op, "embedding": as_list(v)} if v is not None else op

        for msg_id, role, content in lease.messages:
            found = MARKER.search(content)
            if found is None or role != "user":
                continue
            fact = f"remembers {found.group(1)} (said in {lease.chat}, {msg_id})"
            v = vector()
            # A random vector is a duplicate of nothing, but dedupe is the server's call.
            statuses = {"saved", "duplicate"} if v is not None else {"saved"}
            plan.append(
                Planned(
                    with_vector({"op": "add", "content": fact}, v), frozenset(statuses), vector=v
                )
            )
        if live and self.rng.random() < 0.1:
            fact_id, content = self.rng.choice(sorted(live.items()))
            plan.append(
                Planned({"op": "add", "content": content}, frozenset({"duplicate"}), fact_id)
            )
        if self.leased % 20 == 5:
            self.seq += 1
            secret = f"the locker password: Zq{self.index}x{self.seq}w"
            plan.append(Planned({"op": "add", "content": secret}, frozenset({"secret"})))
        if live and self.rng.random() < 0.3:
            old = self.rng.choice(sorted(live))
            del live[old]
            self.seq += 1
            v = vector()
            op = {"op": "supersede", "fact_id": old, "content": f"revised {self.index}.{self.seq}"}
            plan.append(Planned(with_vector(op, v), frozenset({"superseded"}), old, v))
        if live and self.rng.random() < 0.2:
            old = self.rng.choice(sorted(live))
            del live[old]
            plan.append(Planned({"op": "forget", "fact_id": old}, frozenset({"forgotten"}), old))
        if self.leased % 10 == 6:  # a fact id that is not a live fact of this owner
            others = [f for o, f in self.saved_by_me[-200:] if o != lease.owner]
            foreign = self.rng.choice(others) if others and self.rng.random() < 0.7 else None
            foreign = foreign or str(uuid.uuid4())
            if self.rng.random() < 0.5:
                op = {"op": "forget", "fact_id": foreign}
            else:
                op = {"op": "supersede", "fact_id": foreign, "content": f"foreign {foreign}"}
            plan.append(Planned(op, frozenset({"unknown_fact"}), foreign))
        return plan

    def settle_capture(self, lease: Lease, plan: list[Planned]) -> None:
        n = self.leased
        if n % 20 == 1:  # the model failed: given back, one attempt counted
            self.fail_capture(lease, "load: the model failed")
        elif n % 50 == 2:  # an answer the database refuses: nothing applied, given back
            bad = [*(p.op for p in plan), {"op": "merge", "content": "x"}]
            started = time.perf_counter()
            try:
                self.call(
                    SERVICE,
                    "SELECT * FROM memory.capture_facts(%s, %s, %s)",
                    lease.capture_id,
                    Jsonb(bad),
                    CAPTURE_MODEL,
                )
            except psycopg.Error as err:
                if err.diag.message_hint != "MEMORY_INVALID":
                    raise
                self.timed("capture.invalid", started)
                self.fail_capture(lease, "load: a malformed answer")
                return
            self.errors.add(f"capture_facts applied a malformed answer: {bad}")
        else:
            self.apply_capture(lease, plan)
            if lease.outcome == "applied" and n % 30 == 4:
                self.reapply(lease)

    def fail_capture(self, lease: Lease, error: str) -> None:
        lease.end = min(lease.end, time.monotonic())
        started = time.perf_counter()
        sql = "SELECT memory.fail_capture(%s, %s)"
        try:
            released = self.value(SERVICE, sql, lease.capture_id, error)
        except Interrupted:

            def gone() -> bool:
                return not self.call(
                    SERVICE, "SELECT 1 FROM memory.captures WHERE capture_id = %s", lease.capture_id
                )

            lease.outcome = "abandoned"
            self.settle("capture.fail", gone, lambda: setattr(lease, "outcome", "failed"))
            return
        self.timed("capture.fail", started)
        if released is not True:
            self.errors.add(f"fail_capture of a held lease {lease.capture_id} returned {released}")
        lease.outcome = "failed"

    def apply_capture(
        self, lease: Lease, plan: list[Planned], *, expect_lost: bool = False
    ) -> None:
        sent = time.monotonic()
        lease.end = min(lease.end, sent)
        started = time.perf_counter()
        try:
            rows = self.call(
                SERVICE,
                "SELECT ord, op, id, fact_id, status FROM memory.capture_facts(%s, %s, %s)"
                " ORDER BY ord",
                lease.capture_id,
                Jsonb([p.op for p in plan]),
                CAPTURE_MODEL,
            )
        except Interrupted:
            self.settle_apply(lease, plan)
            return
        except psycopg.Error as err:
            returned = time.monotonic()
            if err.diag.message_hint != "MEMORY_CONFLICT":
                raise
            lease.outcome = "lost"
            self.timed("capture.lost", started)
            # The lease lasts at least until lease.expires: a conflict before that
            # means someone else had the chat, or had applied it.
            if returned < lease.expires - CLOCK_SLACK:
                self.errors.add(
                    f"capture_facts: MEMORY_CONFLICT on {lease.capture_id}, a lease of"
                    f" {lease.chat} with {lease.expires - returned:.1f} s left"
                )
            return
        self.timed("capture.apply", started, len(rows))
        if expect_lost:
            self.errors.add(f"capture_facts applied {lease.capture_id} after its lease ran out")
        self.record_capture(lease, plan, rows)

    def record_capture(
        self, lease: Lease, plan: list[Planned], rows: list[tuple[Any, ...]]
    ) -> None:
        lease.outcome = "applied"
        self.ledger.acknowledged += 1
        if [r[0] for r in rows] != list(range(1, len(plan) + 1)):
            self.errors.add(f"capture_facts {lease.capture_id}: ords {[r[0] for r in rows]}")
        for (ord_, op, new_id, fact_id, status), p in zip(rows, plan, strict=False):
            self.ledger.statuses[status] += 1
            if op != p.op["op"] or status not in p.statuses:
                self.errors.add(
                    f"capture_facts {lease.capture_id} operation {ord_} {op}: status {status},"
                    f" expected {sorted(p.statuses)} ({p.op.get('content') or p.op.get('fact_id')})"
                )
                continue
            if status == "duplicate" and p.target is not None and str(fact_id) != p.target:
                self.errors.add(f"capture add duplicate of {fact_id}, expected {p.target}")
            if status in ("saved", "superseded"):
                key = str(new_id)
                self.ledger.captured[key] = (
                    lease.owner,
                    lease.chat,
                    lease.capture_id,
                    p.op["content"],
                )
                self.saved_by_me.append((lease.owner, key))
                if p.vector is not None:
                    self.ledger.embeddings[key].append(p.vector)
            if status == "superseded":
                self.ledger.ended[str(fact_id)] = str(new_id)
            elif status == "forgotten":
                self.ledger.ended[str(fact_id)] = None

    def settle_apply(self, lease: Lease, plan: list[Planned]) -> None:
        """An interrupted capture_facts: applied iff our lease is gone (exact while it lasts)."""
        what = f"capture_facts {lease.capture_id}"
        rows: list[tuple[Any, ...]] = []
        held = False

        def applied() -> bool:
            nonlocal held
            held = bool(
                self.call(
                    SERVICE,
                    "SELECT 1 FROM memory.captures WHERE capture_id = %s",
                    lease.capture_id,
                )
            )
            if held:
                return False
            if time.monotonic() >= lease.expires - CLOCK_SLACK:  # someone may hold it now
                self.ledger.unresolved.append(f"{what}: its lease ran out before the read-back")
                return False
            found = dict(
                self.call(
                    SERVICE,
                    "SELECT content, id FROM memory.facts WHERE organization_id = %s"
                    " AND source ->> 'capture_id' = %s",
                    self.world.org,
                    lease.capture_id,
                )
            )
            rows.clear()
            for i, p in enumerate(plan):
                kind, content = p.op["op"], p.op.get("content")
                if content in found:  # an add saved, or a supersede's new fact
                    status = "saved" if kind == "add" else "superseded"
                else:  # what it was predicted to be, short of saving
                    status = min(p.statuses - {"saved", "superseded"}, default="unknown_fact")
                rows.append((i + 1, kind, found.get(content), p.target, status))
            return True

        lease.outcome = "abandoned"
        self.settle(what, applied, lambda: self.record_capture(lease, plan, list(rows)))
        if held:  # still ours: give it back
            with contextlib.suppress(Interrupted):
                self.fail_capture(lease, "load: interrupted")

    def reapply(self, lease: Lease) -> None:
        """An applied capture sent again changes nothing: MEMORY_CONFLICT."""
        started = time.perf_counter()
        try:
            self.call(
                SERVICE,
                "SELECT * FROM memory.capture_facts(%s, %s, %s)",
                lease.capture_id,
                Jsonb([{"op": "add", "content": f"applied twice {lease.capture_id}"}]),
                CAPTURE_MODEL,
            )
        except psycopg.Error as err:
            if err.diag.message_hint != "MEMORY_CONFLICT":
                raise
            self.timed("capture.reapply", started)
            return
        self.errors.add(f"capture {lease.capture_id} was applied twice")

    # ---- embed workers

    def op_embed(self) -> str | None:
        rows = self.call(
            SERVICE,
            "SELECT id, kind, content, content_hash FROM memory.pending_embeddings(32)",
        )
        if not rows:
            return None
        ids = [r[0] for r in rows]
        hashes = [r[3] for r in rows]
        vectors = [unit(self.np_rng, self.config.dimensions) for _ in rows]
        keys = [str(r[0]) if r[1] == "fact" else f"pending-message:{r[0]}:{r[2]}" for r in rows]

        def record(written: list[int]) -> None:
            for i in written:
                self.ledger.embeddings[keys[i]].append(vectors[i])
            self.stats["embed.set"].rows += len(written)
            self.ledger.acknowledged += 1

        try:
            count = self.value(
                SERVICE,
                "SELECT memory.set_memory_embeddings(%s, %s, %s, %s)",
                ids,
                hashes,
                Jsonb([as_list(v) for v in vectors]),
                EMBED_MODEL,
            )
        except Interrupted:
            written: list[int] = []

            def applied() -> bool:
                written.clear()
                stored = self.stored_vectors(ids)
                for i, row_id in enumerate(ids):
                    v = stored.get(str(row_id))
                    if v is not None and np.array_equal(v, vectors[i]):
                        written.append(i)
                return bool(written)

            self.settle("embed.set", applied, lambda: record(list(written)))
            return "embed.set"
        if count == len(ids):
            record(list(range(len(ids))))
        else:  # some rows changed meanwhile (an edited message): see which were written
            stored = self.stored_vectors(ids)
            record(
                [
                    i
                    for i, row_id in enumerate(ids)
                    if (v := stored.get(str(row_id))) is not None and np.array_equal(v, vectors[i])
                ]
            )
        return "embed.set"

    def stored_vectors(self, ids: list[Any]) -> dict[str, np.ndarray]:
        rows = self.call(
            SERVICE,
            "SELECT id, embedding::text FROM memory.facts WHERE id = ANY(%s)"
            " UNION ALL SELECT id, embedding::text FROM memory.messages WHERE id = ANY(%s)",
            ids,
            ids,
        )
        return {str(i): v for i, e in rows if (v := parse_vector(e)) is not None}


# ---------------------------------------------------------------- the load


class Load:
    """Prepare, run (in threads), stop, check."""

    def __init__(self, dsn: str, config: Config | None = None) -> None:
        self.dsn = dsn
        self.config = config or Config()
        self.world: World
        self.clients: list[Client] = []
        self.threads: list[threading.Thread] = []
        self.stop_event = threading.Event()
        self.started = 0.0
        self.elapsed = 0.0

    def prepare(self) -> World:
        cfg = self.config
        rng = np.random.default_rng(cfg.seed)
        org = uuid.uuid4()
        users = [uuid.uuid4() for _ in range(cfg.users)]
        topics = rng.standard_normal((cfg.users, cfg.topics, cfg.dimensions))
        topics = (topics / np.linalg.norm(topics, axis=2, keepdims=True)).astype(np.float32)
        notes = [
            (u, f"/memories/shared/notes-{j}.md")
            for u in range(cfg.users)
            for j in range(cfg.files_per_user)
        ]
        counter_path = "/memories/shared/counter.json"
        documents = [f"counters/{j}.json" for j in range(cfg.documents)]
        with psycopg.connect(self.dsn, autocommit=True) as conn:

            def call(claims: str, sql: str, *params: Any) -> Any:
                with conn.transaction():
                    conn.execute(SET_CLAIMS, (claims,))
                    return conn.execute(sql, params).fetchall()

            # Returns at once when the embeddings already have this dimension.
            call(SERVICE, "SELECT memory.configure_embeddings(%s)", cfg.dimensions)
            threshold = float(call(SERVICE, "SELECT memory.setting('dedupe_threshold')")[0][0])
            if cfg.capture_lease_seconds is not None:
                call(
                    SERVICE,
                    "SELECT memory.configure('capture_lease_seconds', %s)",
                    Jsonb(cfg.capture_lease_seconds),
                )
            for user in users:
                call(SERVICE, "SELECT memory.grant(%s, %s, 'memory.read')", org, user)
            for u, path in notes:
                call(
                    claims_of(users[u]),
                    "SELECT memory.run(%s, %s)",
                    org,
                    Jsonb({"command": "create", "path": path, "file_text": "# notes\n"}),
                )
            for user in users:
                call(
                    claims_of(user),
                    "SELECT memory.write(%s, %s, %s, 0)",
                    org,
                    counter_path,
                    json.dumps({"count": 0, "last": {}}),
                )
            for path in documents:
                call(
                    SERVICE,
                    "SELECT memory.document_write(%s, %s, %s, NULL)",
                    DOC_SCOPE,
                    path,
                    json.dumps({"count": 0, "last": {}}),
                )
        self.world = World(org, users, notes, counter_path, documents, topics, threshold)
        return self.world

    def start(self) -> None:
        cfg = self.config
        workers = cfg.embed_workers + cfg.capture_workers
        assert cfg.clients > workers, "no mixed clients"
        self.clients = [
            Client(
                self,
                i,
                "embed" if i < cfg.embed_workers else "capture" if i < workers else "mixed",
            )
            for i in range(cfg.clients)
        ]
        self.threads = [
            threading.Thread(target=c.run, args=(self.stop_event,), name=f"load-{c.index}")
            for c in self.clients
        ]
        self.started = time.perf_counter()
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join()
        self.elapsed = time.perf_counter() - self.started

    def run(self, seconds: float | None = None) -> None:
        self.start()
        try:
            self.stop_event.wait(self.config.seconds if seconds is None else seconds)
        finally:
            self.stop()

    def acknowledged(self) -> int:
        return sum(c.ledger.acknowledged for c in self.clients)

    # ---- results

    def errors(self) -> ErrorLog:
        log = ErrorLog()
        for c in self.clients:
            log.unexpected.extend(c.errors.unexpected)
            log.unexpected_count += c.errors.unexpected_count
            log.interruptions += c.errors.interruptions
        return log

    def throughput(self, by_kind: bool = False) -> dict[str, dict[str, float]]:
        """Per operation (`core.insert`), or per kind (`core`): ops, ops/s, latencies."""
        merged: dict[str, OpStats] = defaultdict(OpStats)
        for c in self.clients:
            for name, s in c.stats.items():
                m = merged[name.split(".")[0] if by_kind else name]
                m.count += s.count
                m.retries += s.retries
                m.rows += s.rows
                m.latencies.extend(s.latencies)
        out = {}
        for name in sorted(merged):
            s = merged[name]
            lat = sorted(s.latencies) or [0.0]
            out[name] = {
                "ops": s.count,
                "per_second": round(s.count / max(self.elapsed, 1e-9), 2),
                "retries": s.retries,
                "rows": s.rows,
                "p50_ms": round(1000 * statistics.median(lat), 2),
                "p95_ms": round(1000 * lat[int(0.95 * (len(lat) - 1))], 2),
                "p99_ms": round(1000 * lat[int(0.99 * (len(lat) - 1))], 2),
            }
        return out

    def captures(self) -> dict[str, Any]:
        """What the capture workers did: leases by outcome, capture_facts statuses."""
        leases = [x for c in self.clients for x in c.ledger.leases]
        statuses: Counter[str] = Counter()
        for c in self.clients:
            statuses.update(c.ledger.statuses)
        outcomes = Counter(x.outcome for x in leases)
        return {
            "leases": len(leases),
            **{o: outcomes[o] for o in ("applied", "failed", "lost", "abandoned")},
            "messages_captured": sum(len(x.messages) for x in leases if x.outcome == "applied"),
            "statuses": dict(sorted(statuses.items())),
        }

    def check(self) -> dict[str, Any]:
        """The integrity check against every client's ledger: {'problems': [...], counts}."""
        return Integrity(self).run()


# ---------------------------------------------------------------- integrity


class Integrity:
    def __init__(self, load: Load) -> None:
        self.load = load
        self.world = load.world
        self.problems: list[str] = []
        self.checked: Counter[str] = Counter()

    def problem(self, text: str) -> None:
        if len(self.problems) < 200:
            self.problems.append(text)
        self.checked["problems"] += 1

    def run(self) -> dict[str, Any]:
        with psycopg.connect(self.load.dsn, autocommit=True) as conn:
            register_vector(conn)
            self.conn = conn
            self.files()
            self.facts()
            self.messages()
            self.embeddings()
            self.documents()
            self.dedupe()
            self.captures()
        ledgers = [c.ledger for c in self.load.clients]
        for ledger in ledgers:
            for what in ledger.unresolved:
                self.problem(f"an interrupted call could not be resolved: {what}")
        return {
            "problems": self.problems,
            "checked": dict(self.checked),
            "acknowledged_writes": sum(x.acknowledged for x in ledgers),
            "in_doubt_resolved": sum(x.in_doubt for x in ledgers),
            "in_doubt_applied": sum(x.resolved_applied for x in ledgers),
        }

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def user_files(self, user: int) -> dict[str, tuple[str, int]]:
        rows = self.rows(
            "SELECT f.path, f.content, f.version FROM memory.files f"
            " JOIN memory.namespaces n ON n.organization_id = f.organization_id"
            " AND n.id = f.namespace_id"
            " WHERE f.organization_id = %s AND n.scope = 'user' AND n.owner_id = %s",
            self.world.org,
            self.world.users[user],
        )
        return {path: (content, version) for path, content, version in rows}

    def files(self) -> None:
        clients = self.load.clients
        by_user = {u: self.user_files(u) for u in range(len(self.world.users))}
        for note, (user, path) in enumerate(self.world.notes):
            content, version = by_user[user].get(path, ("", 0))
            changes = sum(c.ledger.note_changes[note] for c in clients)
            if version != 1 + changes:
                self.problem(f"{path} of user {user}: version {version}, expected 1 + {changes}")
            tokens = set(content.split("\n")[1:]) - {""}
            live = set().union(*(c.ledger.tokens[note] for c in clients))
            if tokens != live:
                self.problem(
                    f"{path} of user {user}: {len(live - tokens)} acknowledged tokens missing,"
                    f" {len(tokens - live)} unexpected"
                )
            self.checked["file versions"] += 1
            self.checked["file tokens"] += len(live)
        for u, files in by_user.items():
            content, version = files.get(self.world.counter_path, ("{}", 0))
            state = json.loads(content)
            increments = sum(c.ledger.counter_increments[u] for c in clients)
            if state.get("count") != increments or version != 1 + increments:
                self.problem(
                    f"counter of user {u}: count {state.get('count')} version {version},"
                    f" acknowledged increments {increments}"
                )
            self.checked["counter increments"] += increments
        for c in clients:
            if c.role != "mixed":
                continue
            actual = {p: v for p, v in by_user[c.home].items() if p.startswith(c.prefix + "/")}
            if actual != c.ledger.folder:
                missing = sorted(set(c.ledger.folder) - set(actual))[:5]
                extra = sorted(set(actual) - set(c.ledger.folder))[:5]
                changed = sorted(
                    p for p in actual if p in c.ledger.folder and actual[p] != c.ledger.folder[p]
                )[:5]
                self.problem(
                    f"folder {c.prefix}: missing {missing}, unexpected {extra}, differing {changed}"
                )
            self.checked["folder files"] += len(c.ledger.folder)

    def facts(self) -> None:
        stored = {
            str(i): (owner, scope, content)
            for i, owner, scope, content in self.rows(
                "SELECT f.id, n.owner_id, n.scope, f.content FROM memory.facts f"
                " JOIN memory.namespaces n ON n.organization_id = f.organization_id"
                " AND n.id = f.namespace_id WHERE f.organization_id = %s AND f.forgotten_at IS NULL",
                self.world.org,
            )
        }
        for c in self.load.clients:
            for fact_id, (user, ns_key, content, _) in c.ledger.facts.items():
                got = stored.get(fact_id)
                if got != (self.world.users[user], ns_key, content):
                    self.problem(f"fact {fact_id} ({content!r}): stored as {got}")
                self.checked["facts"] += 1
            for fact_id in c.ledger.duplicates_of:
                if fact_id not in stored:
                    self.problem(f"fact {fact_id}, named as duplicate_of, is not stored")
                self.checked["duplicate_of"] += 1

    def messages(self) -> None:
        stored = {
            (chat, mid): (owner, content)
            for chat, mid, owner, content in self.rows(
                "SELECT m.chat_id, m.message_id, n.owner_id, m.content FROM memory.messages m"
                " JOIN memory.namespaces n ON n.organization_id = m.organization_id"
                " AND n.id = m.namespace_id WHERE m.organization_id = %s",
                self.world.org,
            )
        }
        for c in self.load.clients:
            for key, (user, content) in c.ledger.messages.items():
                if stored.get(key) != (self.world.users[user], content):
                    self.problem(f"message {key}: stored as {stored.get(key)}")
                self.checked["messages"] += 1
            for key in c.ledger.temporary:
                if key in stored:
                    self.problem(f"temporary message {key} was stored")
                self.checked["temporary messages"] += 1

    def embeddings(self) -> None:
        written: dict[str, list[np.ndarray]] = defaultdict(list)
        for c in self.load.clients:
            for key, vectors in c.ledger.embeddings.items():
                written[key].extend(vectors)
        facts = {
            str(i): (parse_vector(e), content)
            for i, e, content in self.rows(
                "SELECT id, embedding, content FROM memory.facts WHERE organization_id = %s",
                self.world.org,
            )
        }
        for c in self.load.clients:
            for fact_id, (_, _, _, vector) in c.ledger.facts.items():
                if vector is not None:
                    written[fact_id].append(vector)
        for fact_id, vectors in written.items():
            if fact_id.startswith(("message:", "pending-message:")):
                continue
            stored, _ = facts.get(fact_id, (None, None))
            if stored is None:
                self.problem(f"fact {fact_id}: an acknowledged embedding is missing")
            elif not any(np.array_equal(stored, v) for v in vectors):
                self.problem(f"fact {fact_id}: the stored embedding is none of those written")
            self.checked["fact embeddings"] += 1
        for fact_id, (stored, content) in facts.items():
            if stored is not None and fact_id not in written:
                self.problem(f"fact {fact_id} ({content!r}): an embedding nobody wrote")
        messages = self.rows(
            "SELECT id, chat_id, message_id, content, embedding FROM memory.messages"
            " WHERE organization_id = %s",
            self.world.org,
        )
        for row_id, chat, mid, content, embedding in messages:
            vectors = written.get(Client.message_key(chat, mid, content), []) + written.get(
                f"pending-message:{row_id}:{content}", []
            )
            stored = parse_vector(embedding)
            if vectors and stored is None:
                self.problem(f"message {(chat, mid)}: an acknowledged embedding is missing")
            elif vectors and not any(np.array_equal(stored, v) for v in vectors):
                self.problem(
                    f"message {(chat, mid)}: the stored embedding is none of those written"
                )
            elif stored is not None and not vectors:
                self.problem(f"message {(chat, mid)}: an embedding nobody wrote for this content")
            self.checked["message embeddings"] += bool(vectors)

    def documents(self) -> None:
        for doc, path in enumerate(self.world.documents):
            rows = self.rows(
                "SELECT content, version FROM memory.documents WHERE scope_key = %s AND path = %s",
                DOC_SCOPE,
                path,
            )
            increments = sum(c.ledger.document_increments[doc] for c in self.load.clients)
            content, version = rows[0] if rows else ("{}", 0)
            count = json.loads(content).get("count")
            if count != increments or version != 1 + increments:
                self.problem(
                    f"document {path}: count {count} version {version},"
                    f" acknowledged increments {increments}"
                )
            self.checked["document increments"] += increments

    def dedupe(self) -> None:
        """No two live facts of a namespace at cosine >= threshold (numpy, then the server)."""
        rows = self.rows(
            "SELECT namespace_id, id, embedding FROM memory.facts WHERE organization_id = %s"
            " AND forgotten_at IS NULL AND embedding IS NOT NULL",
            self.world.org,
        )
        by_ns: dict[Any, list[tuple[Any, np.ndarray]]] = defaultdict(list)
        for ns, fact_id, embedding in rows:
            by_ns[ns].append((fact_id, parse_vector(embedding)))
        threshold = self.world.threshold
        for facts in by_ns.values():
            ids = [f[0] for f in facts]
            m = np.stack([f[1] for f in facts]).astype(np.float64)
            m /= np.linalg.norm(m, axis=1, keepdims=True)
            for start in range(0, len(ids), 2048):
                block = m[start : start + 2048] @ m.T
                for i, j in zip(*np.nonzero(block >= threshold - 1e-5), strict=True):
                    a, b = start + int(i), int(j)
                    if a >= b:
                        continue
                    sim = self.rows(
                        "SELECT 1 - (a.embedding <=> b.embedding) FROM memory.facts a, memory.facts b"
                        " WHERE a.id = %s AND b.id = %s",
                        ids[a],
                        ids[b],
                    )[0][0]
                    if sim >= threshold:
                        self.problem(f"live facts {ids[a]} and {ids[b]}: cosine {sim:.6f}")
            self.checked["facts compared for dedupe"] += len(ids)

    def captures(self) -> None:
        ledgers = [c.ledger for c in self.load.clients]
        leases = [x for ledger in ledgers for x in ledger.leases]
        by_chat: dict[tuple[uuid.UUID, str], list[Lease]] = defaultdict(list)
        for lease in leases:
            by_chat[(lease.owner, lease.chat)].append(lease)
        for (owner, chat), held in by_chat.items():
            held.sort(key=lambda x: x.start)
            last: Lease | None = None  # the lease that ends last so far
            for lease in held:
                if last is not None and lease.start < last.end:
                    self.problem(
                        f"chat {chat} of {owner}: leased to worker {last.worker} ({last.capture_id})"
                        f" and worker {lease.worker} ({lease.capture_id}) at once"
                    )
                if last is None or lease.end > last.end:
                    last = lease
            self.checked["capture leases"] += len(held)
        applied = [x for x in leases if x.outcome == "applied"]
        for capture_id, n in Counter(x.capture_id for x in applied).items():
            if n > 1:
                self.problem(f"capture {capture_id}: acknowledged as applied {n} times")
        delivered: dict[tuple[Any, ...], list[str]] = defaultdict(list)
        for lease in applied:
            for msg_id, _, content in lease.messages:
                delivered[(lease.owner, lease.chat, msg_id, content)].append(lease.capture_id)
        for (owner, chat, msg_id, _), ids in delivered.items():
            if len(ids) > 1:
                self.problem(
                    f"message {msg_id} of chat {chat} of {owner}: in applied captures {ids}"
                )
        self.checked["captures applied"] += len(applied)
        self.checked["messages captured"] += len(delivered)

        captured: dict[str, tuple[uuid.UUID, str, str, str]] = {}
        ended: dict[str, str | None] = {}
        for ledger in ledgers:
            captured.update(ledger.captured)
            ended.update(ledger.ended)
        stored = {
            str(i): (owner, scope, content, capture_id, chat, forgotten, superseded_by)
            for i, owner, scope, content, capture_id, chat, forgotten, superseded_by in self.rows(
                "SELECT f.id, n.owner_id, n.scope, f.content, f.source ->> 'capture_id',"
                " f.source ->> 'chat_id', f.forgotten_at IS NOT NULL, f.superseded_by::text"
                " FROM memory.facts f JOIN memory.namespaces n"
                " ON n.organization_id = f.organization_id AND n.id = f.namespace_id"
                " WHERE f.organization_id = %s"
                " AND (f.source ? 'capture_id' OR f.forgotten_at IS NOT NULL)",
                self.world.org,
            )
        }
        for fact_id, (owner, chat, capture_id, content) in captured.items():
            got = stored.get(fact_id)
            if got is None or got[:5] != (owner, "user", content, capture_id, chat):
                self.problem(f"captured fact {fact_id} ({content!r}): stored as {got and got[:5]}")
                continue
            if fact_id in ended and (not got[5] or got[6] != ended[fact_id]):
                self.problem(
                    f"captured fact {fact_id} ({content!r}): forgotten {got[5]}, superseded by"
                    f" {got[6]}; acknowledged: superseded by {ended[fact_id]}"
                )
            self.checked["captured facts"] += 1
        for fact_id, (_, _, content, capture_id, _, forgotten, _) in stored.items():
            if capture_id is not None and fact_id not in captured:
                self.problem(
                    f"fact {fact_id} ({content!r}): of capture {capture_id},"
                    " which no acknowledged capture saved"
                )
            if forgotten and fact_id not in ended:
                self.problem(
                    f"fact {fact_id} ({content!r}): forgotten, but no acknowledged"
                    " operation forgot it"
                )
        self.checked["captured facts ended"] += len(ended)

        # Applied captures hold no lease; messages behind a watermark were captured.
        open_ids = {x.capture_id for x in applied}
        for (capture_id,) in self.rows(
            "SELECT capture_id::text FROM memory.captures WHERE organization_id = %s"
            " AND capture_id IS NOT NULL",
            self.world.org,
        ):
            if capture_id in open_ids:
                self.problem(f"capture {capture_id}: applied, but its lease is still held")
        behind = self.rows(
            "SELECT k.owner_id, k.chat_id, m.message_id, m.content FROM memory.captures k"
            " JOIN memory.messages m ON m.organization_id = k.organization_id"
            " AND m.namespace_id = k.namespace_id AND m.chat_id = k.chat_id"
            " AND (m.created_at, m.id) <= (k.watermark_at, k.watermark_id)"
            " WHERE k.organization_id = %s",
            self.world.org,
        )
        skipped = [row for row in behind if tuple(row) not in delivered]
        self.checked["messages behind a watermark"] += len(behind)
        self.checked["messages behind a watermark, never captured"] += len(skipped)

"""Core memory: `memory.run` against the anthropic SDK's reference memory tool, command
by command, on one generated trace of an agent's sessions; every side's outcomes and
files are checked against the oracle of tests/oracle.py. SECTION (below) is what is
measured and how, as docs/benchmarks.md shows it.

    .venv/bin/python -m bench.core            # 10,000 commands
    .venv/bin/python -m bench.core --quick    # 2,000 commands
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg
from bench._common import (
    ORG,
    Result,
    Row,
    database,
    function_stats,
    grouped_bars,
    index,
    log_scale,
    new_result,
    options,
    percentile,
    run_together,
    save,
    section,
    server_settings,
    spread,
    stat,
    table,
)
from psycopg.types.json import Jsonb
from tests.oracle import ROOT, Command, Outcome, ReferenceTool, SpecOracle

RUN_SQL = "SELECT memory.run(%s::uuid, %s::jsonb, %s::jsonb)"
CLIENTS = 8
WARMUP = 100  # commands replayed untimed into a scratch namespace / directory first
TARGET_MS = 1.0

# Command types as reported, in table order. A failing command is its own type.
LABELS = (
    "view file", "view dir", "str_replace", "insert", "create", "rename", "delete",
    "str_replace (no match)", "view (missing)", "insert (bad line)",
)  # fmt: skip
SIDES = {
    "sql": "memory.run (SQL)",
    "sql_async": "memory.run (SQL), synchronous_commit off",
    "client": "pgmemory client",
    "local": "local tool",
    "sql8": f"memory.run, {CLIENTS} clients",
}

SECTION = """\
## Core memory (bench/core.py)

One generated trace of {commands:,} memory-tool commands (seed {seed}), each a dict exactly as the model sends it: an agent's sessions, each opening with a `view` of /memories, then a few files viewed and edited; now and then a rename (often into /memories/archive) or a delete, and a few commands that fail as an agent's do (an old_str it misremembered, a file it had renamed, a line past the end). Mix: {mix}. At the end {files_at_end} files, {bytes_at_end:,} bytes.

Each round replays the whole trace on every side, into a fresh namespace or directory, after an untimed warm-up of {warmup} commands on a scratch one:

- **memory.run (SQL)**: `SELECT memory.run(org, command, ns)` on one autocommit connection over the unix socket, as the service with `ns = {{"scope": "user", "owner_id": …}}`: one round trip per command, each committed (`fsync` {fsync}, `synchronous_commit` {synchronous_commit});
- **memory.run (SQL), synchronous_commit off**: the same with the session's commits not waiting for the WAL flush: the cost of the function without the disk;
- **pgmemory client**: `Memory(dsn).as_user(user).run(org, command)`, what an application (and `pgmemory.anthropic.MemoryTool`) does: per command a transaction that sets the user's claims, then the same call;
- **local tool**: the anthropic SDK's `BetaLocalFilesystemMemoryTool.call(command)` on a directory of the same disk (it fsyncs every file it writes);
- **{sql8}**: {clients} threads, one connection each, each replaying the trace as memory.run (SQL) into its own user's namespace, all released at once; latencies pooled over the clients.

Latency is per command, measured by the client (`perf_counter`): a round's p50 and p95 per command type, then the median of {rounds} rounds (min..max of rounds).{load}

p50 latency, ms:

{p50}

p95 latency, ms:

{p95}

Throughput (for the concurrent clients: all their commands per second of wall time), and the correctness check made on every replay: after it, the `view` of every file must be the same text as {check}

{throughput}

![core memory p50 latency per command](../bench/results/{name}-latency.png)
{profile}
Reproduce: `.venv/bin/python -m bench.core{quick}` (`--rounds N`, `--commands N`)."""
CHECK = {  # what the outcomes were compared with: the oracle, or (earlier runs) the SDK's tool
    "every command": "the oracle's (the reference tool with the deviations docs/core-memory.md lists, tests/oracle.py), and so must every command's outcome (success or failure and its text):",
    None: "the reference tool's, and so must every command's outcome (success or failure and its text; directory views excepted, whose sizes differ by design, see docs/core-memory.md):",
}
PROFILE = """
### Where memory.run spends its time

One more replay of memory.run (SQL) with `track_functions = all`; `pg_stat_user_functions` then gives each function's own (self) time. memory.run took on average {run_server_ms_per_call:.3f} ms per successful call on the server, of {client_ms_per_ok_command:.3f} ms on average per successful command measured by the client (the rest: the round trip, parse and bind, the commit and its WAL flush, psycopg). The functions with the most self time:

{table}
"""

# ------------------------------------------------------------------------------- the trace

PEOPLE = (
    "Ana", "Bruno", "Chen", "Dara", "Elif", "Farid", "Greta", "Hiro",
    "Inès", "Jonas", "Kemal", "Lena", "Mateo", "Noor", "Oskar", "Priya",
)  # fmt: skip
PROJECTS = (
    "atlas", "billing-v2", "checkout", "data-lake", "onboarding", "search", "mobile-app",
    "pricing",
)  # fmt: skip
PROJECT_DOCS = ("status", "notes", "decisions", "open_questions", "contacts")
TOPICS = (
    "preferences", "user_profile", "work_style", "todo", "decisions", "tools", "travel",
    "health", "reading_list", "glossary", "writing_style", "goals",
)  # fmt: skip
PREFS = (
    "metric units", "short answers with code first", "tea over coffee", "dark mode",
    "British spelling", "meetings before noon", "async updates over calls",
    "bullet points, no tables", "window seats", "vegetarian restaurants", "Python over Go",
    "the 24-hour clock",
)  # fmt: skip
ACTIONS = (
    "send the draft to legal", "book the venue", "review the PR", "renew the passport",
    "write the migration plan", "ship the beta", "call the landlord", "update the roadmap",
    "fix the flaky test", "order the new laptop", "file the expense report",
    "prepare the quarterly review", "reply to the recruiter", "benchmark the new index",
)  # fmt: skip
STATUSES = (
    "on track", "blocked on review", "waiting for design", "in QA", "paused",
    "launched to 10% of users", "slipping a week", "done",
)  # fmt: skip
DECISIONS = (
    "use PostgreSQL for the event store", "drop support for IE11", "hire a second SRE",
    "move the stand-up to 9:30", "keep the monolith for now", "adopt trunk-based development",
    "pay yearly instead of monthly", "travel by train when under 5 hours",
)  # fmt: skip
CITIES = ("Lisbon", "Zürich", "São Paulo", "Berlin", "Toronto", "Kraków", "東京", "Nairobi")
TOOLS = ("Neovim", "Obsidian", "Linear", "Figma", "pgAdmin", "Raycast", "Things", "Zotero")
PURPOSES = ("notes", "planning", "code review", "reading", "design", "database work")
CHANNELS = ("Slack", "email", "Signal", "the team channel", "phone")
FOODS = ("peanuts", "shellfish", "gluten", "lactose", "kiwi")
ADDENDA = (
    "(confirmed)", "— see notes", "(high priority)", "per last call", "(revisit in May)",
    "and keep it short",
)  # fmt: skip
SUFFIXES = ("old", "2024", "draft", "v2", "archived", "prev")
TEMPLATES = (
    "- Prefers {pref}",
    "- {person} is the contact for {project}; reach them on {channel}",
    "- Decided ({date}): {decision}",
    "- TODO: {action} before {date}",
    "- {project}: {status} as of {date}",
    "- Met {person} on {date} about {project}; next step: {action}",
    "- Lives in {city} since {year}",
    "- Allergic to {food}",
    "- Uses {tool} for {purpose}",
    "- {person}'s birthday: {day}",
)


@dataclass
class Step:
    label: str
    command: Command
    ok: bool  # the outcome the model expects


@dataclass
class Trace:
    steps: list[Step]
    files: dict[str, str]  # the model's files at the end

    def mix(self) -> dict[str, int]:
        counts = Counter(s.label for s in self.steps)
        return {label: counts[label] for label in LABELS if counts[label]}


class _Done(Exception):
    """The trace has its n commands (the model's files are those they leave)."""


class TraceBuilder:
    """The sessions SECTION describes, over a model of the files that keeps the commands
    valid but for the failures it means (seeded: every run replays the same commands)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.files: dict[str, str] = {}  # path -> content; insertion order is deterministic
        self.gone: list[str] = []  # paths renamed or deleted: stale memories of the agent
        self.steps: list[Step] = []
        self.day = date(2025, 1, 6)
        self.n = 0

    def build(self, n: int) -> Trace:
        self.n = n
        try:
            while True:
                self.session()
        except _Done:
            return Trace(self.steps, self.files)

    # --- the model

    def emit(self, label: str, command: Command, ok: bool = True) -> None:
        """Every command changes the model first, then is emitted: cut at the n-th."""
        self.steps.append(Step(label, command, ok))
        if len(self.steps) == self.n:
            raise _Done

    def dirs(self) -> list[str]:
        out: dict[str, None] = {}
        for path in self.files:
            parts = path.split("/")[2:-1]
            for i in range(1, len(parts) + 1):
                out["/".join([ROOT, *parts[:i]])] = None
        return sorted(out)

    def taken(self, path: str) -> bool:
        return path in self.files or any(p.startswith(path + "/") for p in self.files)

    # --- text

    def line(self) -> str:
        r = self.rng
        c = r.choice
        when = (self.day + timedelta(days=r.randint(-20, 40))).isoformat()
        return c(TEMPLATES).format(
            person=c(PEOPLE), project=c(PROJECTS), channel=c(CHANNELS), decision=c(DECISIONS),
            action=c(ACTIONS), status=c(STATUSES), city=c(CITIES), year=r.randint(2009, 2024),
            food=c(FOODS), tool=c(TOOLS), purpose=c(PURPOSES), pref=c(PREFS), date=when,
            day=when[5:],
        )  # fmt: skip

    def new_path(self) -> str:
        r = self.rng
        for _ in range(50):
            kind = r.random()
            if kind < 0.35:
                path = f"{ROOT}/{r.choice(TOPICS)}.md"
            elif kind < 0.55:
                path = f"{ROOT}/people/{r.choice(PEOPLE).lower()}.md"
            elif kind < 0.8:
                path = f"{ROOT}/projects/{r.choice(PROJECTS)}/{r.choice(PROJECT_DOCS)}.md"
            else:
                path = f"{ROOT}/meetings/{self.day.isoformat()}-{r.choice(PROJECTS)}.md"
            if not self.taken(path):
                return path
        return f"{ROOT}/notes-{len(self.steps)}.md"

    # --- a session

    def session(self) -> None:
        r = self.rng
        self.day += timedelta(days=r.choice((0, 1, 1, 2, 3)))
        self.view_dir(ROOT)
        seen: list[str] = []
        if self.files:
            seen = r.sample(list(self.files), min(r.choice((1, 1, 2, 2, 3)), len(self.files)))
            for path in seen:
                self.view_file(path)
        if r.random() < 0.12 and (dirs := self.dirs()):
            self.view_dir(r.choice(dirs))
        for _ in range(r.choice((0, 1, 1, 2, 2, 3, 4))):
            edited = self.edit([p for p in seen if p in self.files])
            if edited in self.files and r.random() < 0.2:
                self.view_file(edited)

    def edit(self, seen: list[str]) -> str | None:
        r = self.rng
        n = len(self.files)
        if n == 0:
            weights = {"create": 1}
        elif n < 6:
            weights = {"create": 60, "str_replace": 20, "insert": 15, "fail": 5}
        else:
            weights = {"str_replace": 40, "insert": 25, "create": 12 if n < 30 else 3}
            weights |= {"rename": 3, "delete": 3 if n > 10 else 0, "fail": 8}
        kind = r.choices(list(weights), list(weights.values()))[0]
        if kind == "create":
            return self.create()
        path = r.choice(seen) if seen and r.random() < 0.7 else r.choice(list(self.files))
        if kind == "str_replace":
            return self.str_replace(path) or self.insert(path)
        return {"insert": self.insert, "rename": self.rename, "delete": self.delete}.get(
            kind, self.fail
        )(path)

    # --- commands

    def view_dir(self, path: str) -> None:
        self.emit("view dir", {"command": "view", "path": path})

    def view_file(self, path: str) -> None:
        command: Command = {"command": "view", "path": path}
        if self.rng.random() < 0.15:
            total = len(self.files[path].split("\n"))
            start = self.rng.randint(1, max(1, total))
            end = self.rng.choice((-1, min(total, start + self.rng.randint(2, 10))))
            command["view_range"] = [start, end]
        self.emit("view file", command)

    def create(self) -> str:
        path = self.new_path()
        title = Path(path).stem.replace("_", " ").replace("-", " ").capitalize()
        body = [self.line() for _ in range(self.rng.randint(2, 12))]
        text = f"# {title}\n\n" + "\n".join(body)
        self.files[path] = text = text + "\n" if self.rng.random() < 0.9 else text
        self.emit("create", {"command": "create", "path": path, "file_text": text})
        return path

    def str_replace(self, path: str) -> str | None:
        r = self.rng
        content = self.files[path]
        lines = content.split("\n")
        body = [x for x in lines if x.startswith("- ") and content.count(x) == 1]
        if not body:
            return None
        line = r.choice(body)
        roll = r.random()
        if (len(content) > 3000 and roll < 0.5) or roll < 0.08:
            old, new = line + "\n", ""  # a line removed
            if content.count(old) != 1:  # the last line, without a final newline
                old, new = line, self.line()
        elif roll < 0.6:
            old, new = line, self.line()  # a line rewritten
        elif roll < 0.88:
            words = line.split(" ")
            i = r.randint(1, max(1, len(words) - 2))
            old = " ".join(words[i : i + r.randint(2, 4)])
            if not old or content.count(old) != 1:
                old = line
            new = f"{old} {r.choice(ADDENDA)}"  # a fragment amended
        else:
            k = lines.index(line)
            pair = "\n".join(lines[k : k + 2])
            old = pair if k + 1 < len(lines) and content.count(pair) == 1 else line
            new = self.line()  # two lines merged into one
        self.files[path] = content.replace(old, new)
        command = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
        self.emit("str_replace", command)
        return path

    def insert(self, path: str) -> str:
        r = self.rng
        lines = _split_lines(self.files[path])
        roll = r.random()
        at = len(lines) if roll < 0.5 else min(len(lines), 2) if roll < 0.7 else None
        if at is None:
            at = r.randint(0, len(lines))
        text = self.line()
        if r.random() < 0.1:
            text += "\n" + self.line()
        if r.random() < 0.2:
            text += "\n"  # models often end insert_text with a newline
        lines.insert(at, text.rstrip("\n"))
        out = "\n".join(lines)
        self.files[path] = out if out.endswith("\n") else out + "\n"
        command = {"command": "insert", "path": path, "insert_line": at, "insert_text": text}
        self.emit("insert", command)
        return path

    def rename(self, path: str) -> str | None:
        r = self.rng
        name = Path(path).name
        for _ in range(10):
            if r.random() < 0.5:
                dest = f"{ROOT}/archive/{name}"
                if self.taken(dest):
                    dest = f"{ROOT}/archive/{self.day.year}/{name}"
            else:
                dest = f"{path[: -len('.md')]}-{r.choice(SUFFIXES)}.md"
            if not self.taken(dest):
                self.files[dest] = self.files.pop(path)
                self.gone.append(path)
                self.emit("rename", {"command": "rename", "old_path": path, "new_path": dest})
                return dest
        return None

    def delete(self, path: str) -> None:
        r = self.rng
        dirs = self.dirs()
        if dirs and r.random() < 0.15:
            path = r.choice(dirs)
        for p in [p for p in self.files if p == path or p.startswith(path + "/")]:
            del self.files[p]
            self.gone.append(p)
        self.emit("delete", {"command": "delete", "path": path})

    def fail(self, path: str) -> None:
        r = self.rng
        roll = r.random()
        content = self.files[path]
        body = [x for x in content.split("\n") if x.startswith("- ")]
        if roll < 0.5 and body:
            # Misremembered: the line with a name, a date or a word changed.
            words = r.choice(body).split(" ")
            i = r.randint(1, len(words) - 1)
            words[i] = r.choice((*PEOPLE, "2024-12-31", "quickly", "Tuesday"))
            old = " ".join(words)
            if content.count(old) == 0:
                command = {"command": "str_replace", "path": path, "old_str": old}
                self.emit("str_replace (no match)", {**command, "new_str": self.line()}, ok=False)
                return
        if roll < 0.8:
            stale = [p for p in self.gone if not self.taken(p)]
            missing = r.choice(stale) if stale else f"{ROOT}/{r.choice(TOPICS)}-notes.md"
            if not self.taken(missing):
                self.emit("view (missing)", {"command": "view", "path": missing}, ok=False)
                return
        at = len(_split_lines(content)) + r.randint(1, 3)
        command = {"command": "insert", "path": path, "insert_line": at, "insert_text": self.line()}
        self.emit("insert (bad line)", command, ok=False)


def _split_lines(content: str) -> list[str]:
    # The reference's lines for insert: split on LF, without the empty tail of a final newline.
    lines = content.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def make_trace(n: int, seed: int = 7) -> Trace:
    """`n` memory-tool commands of an agent's sessions, the same for the same seed."""
    return TraceBuilder(seed).build(n)


# ------------------------------------------------------------------------------- the sides


class SqlSide:
    """`memory.run` on one autocommit connection, as the service acting for `owner`."""

    def __init__(
        self, dsn: str, owner: uuid.UUID, org: str = ORG, settings: dict[str, str] | None = None
    ) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        for key, value in (settings or {}).items():
            self.conn.execute("SELECT set_config(%s, %s, false)", (key, value))
        self.cur = self.conn.cursor()
        self.org = org
        self.use(owner)

    def use(self, owner: uuid.UUID) -> None:
        self.owner = owner
        self.ns = Jsonb({"scope": "user", "owner_id": str(owner)})

    def run(self, command: Command) -> Outcome:
        try:
            self.cur.execute(RUN_SQL, (self.org, Jsonb(command), self.ns))
            row = self.cur.fetchone()
        except psycopg.Error as err:
            return Outcome(False, err.diag.message_primary or repr(err))
        assert row is not None
        return Outcome(True, row[0])

    def files(self) -> list[str]:
        sql = "SELECT path FROM memory.list_files(%s::uuid, %s::jsonb)"
        return [r[0] for r in self.conn.execute(sql, (self.org, self.ns)).fetchall()]

    def close(self) -> None:
        self.conn.close()


class ClientSide:
    """`Memory(dsn).as_user(user).run(...)`: a transaction per call with the user's claims."""

    def __init__(self, dsn: str, user: uuid.UUID, org: str = ORG) -> None:
        from pgmemory import Memory

        self.memory = Memory(dsn)
        self.org = org
        self.use(user)

    def use(self, user: uuid.UUID) -> None:
        self.user = self.memory.as_user(user)

    def run(self, command: Command) -> Outcome:
        from pgmemory import PgMemoryError

        try:
            return Outcome(True, self.user.run(self.org, command))
        except PgMemoryError as err:
            return Outcome(False, err.message)

    def files(self) -> list[str]:
        return [f.path for f in self.user.list_files(self.org)]

    def close(self) -> None:
        self.memory.close()


class LocalSide:
    """The SDK's tool as it ships (tests.oracle.ReferenceTool), on the directory of `use`."""

    def use(self, base: Path) -> None:
        self.tool = ReferenceTool(base)

    def run(self, command: Command) -> Outcome:
        return self.tool.run(command)

    def files(self) -> list[str]:
        return self.tool.files()

    def close(self) -> None:
        pass


@dataclass
class Replay:
    latency_ms: list[float]
    outcomes: list[Outcome]
    wall_s: float
    final: dict[str, str] = field(default_factory=dict)  # path -> text of its view


def replay(side: Any, steps: Sequence[Step]) -> Replay:
    latency: list[float] = []
    outcomes: list[Outcome] = []
    clock = time.perf_counter_ns
    start = time.perf_counter()
    for step in steps:
        t0 = clock()
        outcome = side.run(step.command)
        latency.append((clock() - t0) / 1e6)
        outcomes.append(outcome)
    return Replay(latency, outcomes, time.perf_counter() - start)


def final_views(side: Any) -> dict[str, str]:
    """A view of every file the side holds (after the timed replay)."""
    out = {}
    for path in side.files():
        ok, text = side.run({"command": "view", "path": path})
        out[path] = text if ok else f"<error> {text}"
    return out


def view_mismatches(expected: dict[str, str], got: dict[str, str]) -> int:
    """Files on one side only, plus files whose views differ."""
    both = expected.keys() & got.keys()
    return len(expected.keys() ^ got.keys()) + sum(expected[p] != got[p] for p in both)


def outcome_mismatches(expected: Replay, got: Replay) -> int:
    return sum(a != b for a, b in zip(expected.outcomes, got.outcomes, strict=True))


def unexpected(steps: Sequence[Step], got: Replay) -> int:
    """Commands whose success or failure is not what the trace's model expects."""
    return sum(step.ok != ok for step, (ok, _text) in zip(steps, got.outcomes, strict=True))


# ------------------------------------------------------------------------------- the rounds


class Round:
    """Fresh namespaces and directories for one round of every side."""

    def __init__(self, dsn: str, scratch: Path, tag: int) -> None:
        self.dsn, self.scratch, self.tag, self.n = dsn, scratch, tag, 0

    def owner(self) -> uuid.UUID:
        self.n += 1
        return uuid.UUID(int=(0xC0 << 120) | (self.tag << 32) | self.n)

    def directory(self) -> Path:
        self.n += 1
        path = self.scratch / f"r{self.tag}-{self.n}"
        path.mkdir()
        return path

    def user(self) -> uuid.UUID:
        """An owner who holds the read permission (the client acts as a user)."""
        user = self.owner()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, user))
        return user


def warmed(
    side: Any, scratch: Any, real: Any, steps: Sequence[Step], warm: Sequence[Step]
) -> Replay:
    """The warm-up replayed on `scratch` (a namespace or directory), then the steps on
    `real` by the same side, timed; then the final views."""
    try:
        side.use(scratch)
        replay(side, warm)
        side.use(real)
        result = replay(side, steps)
        result.final = final_views(side)
    finally:
        side.close()
    return result


def run_concurrent(
    rnd: Round, steps: Sequence[Step], warm: Sequence[Step]
) -> tuple[list[Replay], float]:
    """CLIENTS threads, one connection and one user namespace each, released at once."""
    owners = [rnd.owner() for _ in range(CLIENTS)]
    sides = [SqlSide(rnd.dsn, owner) for owner in owners]
    for side, owner in zip(sides, owners, strict=True):  # warm every connection (plans, caches)
        side.use(rnd.owner())
        replay(side, warm)
        side.use(owner)
    done: list[Replay] = [Replay([], [], 0.0)] * CLIENTS

    def work(i: int) -> None:
        done[i] = replay(sides[i], steps)

    try:
        wall = run_together(CLIENTS, work)
        for side, r in zip(sides, done, strict=True):
            r.final = final_views(side)
    finally:
        for side in sides:
            side.close()
    return done, wall


def run_side(
    key: str, rnd: Round, steps: Sequence[Step], warm: Sequence[Step]
) -> tuple[list[Replay], float]:
    """One round of one side: its replays (one per client) and their wall time."""
    if key == "sql8":
        return run_concurrent(rnd, steps, warm)
    if key == "local":
        got = warmed(LocalSide(), rnd.directory(), rnd.directory(), steps, warm)
    elif key == "client":
        real, scratch = rnd.user(), rnd.user()
        got = warmed(ClientSide(rnd.dsn, scratch), scratch, real, steps, warm)
    else:
        settings = {"synchronous_commit": "off"} if key == "sql_async" else None
        real = rnd.owner()
        got = warmed(SqlSide(rnd.dsn, real, settings=settings), rnd.owner(), real, steps, warm)
    return [got], got.wall_s


def figures(steps: Sequence[Step], replays: Sequence[Replay], wall_s: float) -> dict[str, Any]:
    """One round of one side: p50/p95 per command type and overall (the clients' latencies
    pooled), commands/s."""
    by: dict[str, list[float]] = {label: [] for label in (*LABELS, "all")}
    for r in replays:
        for step, ms in zip(steps, r.latency_ms, strict=True):
            by[step.label].append(ms)
        by["all"].extend(r.latency_ms)
    out = {k: (percentile(v, 50), percentile(v, 95)) for k, v in by.items() if v}
    return {"commands_per_s": len(by["all"]) / wall_s, "latency": out}


def measure(dsn: str, trace: Trace, rounds: int) -> dict[str, list[Row]]:
    steps, warm = trace.steps, trace.steps[:WARMUP]
    per_round: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    mismatches: dict[str, tuple[list[int], list[int]]] = {side: ([], []) for side in SIDES}
    checks: list[Row] = []
    scratch = Path(tempfile.mkdtemp(prefix="pgmemory-core-"))
    try:
        oracle = SpecOracle(scratch / "oracle")
        expected = replay(oracle, steps)
        expected.final = final_views(oracle)
        for r in range(rounds):
            rnd = Round(dsn, scratch, r)
            line = [f"round {r + 1}/{rounds}:"]
            for key in ("local", "sql", "sql_async", "client", "sql8"):
                replays, wall = run_side(key, rnd, steps, warm)
                per_round[key].append(figures(steps, replays, wall))
                views, outcomes = mismatches[key]
                views.append(sum(view_mismatches(expected.final, x.final) for x in replays))
                outcomes.append(sum(outcome_mismatches(expected, x) for x in replays))
                line.append(f"{key} {len(replays) * len(steps) / wall:,.0f}/s")
                if key == "local":
                    checks.append(
                        {
                            "round": r + 1,
                            "files_at_end": len(replays[0].final),
                            "unexpected_outcomes": unexpected(steps, replays[0]),
                        }
                    )
            print(" ".join(line), flush=True)
        profiled = profile(Round(dsn, scratch, rounds), steps, warm)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    latency = []
    for key, rs in per_round.items():
        for command in (*LABELS, "all"):
            if command in rs[0]["latency"]:
                p50, p95 = zip(*(x["latency"][command] for x in rs), strict=True)
                latency.append(
                    {"side": key, "command": command, "p50_ms": stat(p50), "p95_ms": stat(p95)}
                )
    sides = [
        {
            "side": key,
            "label": label,
            "commands_per_s": stat([x["commands_per_s"] for x in per_round[key]]),
            "final_view_mismatches": mismatches[key][0],
            "outcome_mismatches": mismatches[key][1],
        }
        for key, label in SIDES.items()
    ]
    return {"latency": latency, "sides": sides, "checks": checks, **profiled}


def profile(
    rnd: Round, steps: Sequence[Step], warm: Sequence[Step], top: int = 12
) -> dict[str, list[Row]]:
    """Where memory.run spends its time on the server: one more replay (memory.run (SQL))
    with `track_functions = all`, then pg_stat_user_functions of this database (reset
    first). PostgreSQL counts only calls that return, so failed commands are left out."""
    real = rnd.owner()
    side = SqlSide(rnd.dsn, rnd.owner(), settings={"track_functions": "all"})
    try:
        replay(side, warm)
        side.use(real)
        side.conn.execute("SELECT pg_stat_force_next_flush()")  # the warm-up's counters
        side.conn.execute("SELECT pg_stat_reset()")
        got = replay(side, steps)
        side.conn.execute("SELECT pg_stat_force_next_flush()")
        side.conn.execute("SELECT 1")
    finally:
        side.close()
    rows = function_stats(rnd.dsn, "run")
    run = next(((calls, total) for name, calls, total, _ in rows if name == "run"), None)
    if run is None:
        return {}
    calls, total = run
    ok = [i for i, (good, _) in enumerate(got.outcomes) if good]
    return {
        "profile_run": [
            {
                "run_calls": calls,
                "run_server_ms_per_call": total / calls,
                "client_ms_per_ok_command": statistics.fmean(got.latency_ms[i] for i in ok),
            }
        ],
        "profile": [
            {
                "function": name,
                "calls": n,
                "self_us_per_call": 1000 * self_ms / n,
                "self_share_of_run": self_ms / total,
            }
            for name, n, _total, self_ms in rows[:top]
        ],
    }


def main() -> None:
    ap = options(__doc__, "2,000 commands instead of 10,000")
    ap.add_argument("--rounds", type=int, default=3, help="replays per side (median and spread)")
    ap.add_argument("--commands", type=int, help="trace length (overrides --quick)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    n = args.commands or (2_000 if args.quick else 10_000)
    trace = make_trace(n, args.seed)
    result = new_result(
        "core",
        args.quick,
        commands=n,
        seed=args.seed,
        rounds=args.rounds,
        warmup=WARMUP,
        clients=CLIENTS,
        mix=trace.mix(),
        expected_failures=sum(not s.ok for s in trace.steps),
        bytes_at_end=sum(len(c.encode()) for c in trace.files.values()),
        compared="every command",  # with the oracle (earlier runs: directory views excepted)
    )
    print(f"trace: {n:,} commands, {len(trace.files)} files at the end; " + _mix_text(trace.mix()))
    with database(result, "core") as dsn:
        names = ("fsync", "synchronous_commit", "shared_buffers", "wal_sync_method", "jit")
        result["environment"]["server_settings"] = server_settings(dsn, names)
        result["tables"] = measure(dsn, trace, args.rounds)
    save(result, args.out)


# ------------------------------------------------------------------------------- reporting


def _mix_text(mix: dict[str, int]) -> str:
    total = sum(mix.values())
    return ", ".join(f"{label} {count / total:.1%}" for label, count in mix.items())


def _latency(r: Result) -> dict[str, dict[str, Row]]:
    return index(r["tables"]["latency"], "side", "command")


def _sides(r: Result) -> dict[str, Row]:
    return index(r["tables"]["sides"], "side")


def latency_table(r: Result, stat_key: str) -> str:
    c, by = r["config"], _latency(r)
    rows = [
        (
            "**all commands**" if cmd == "all" else cmd,
            f"{c['commands'] if cmd == 'all' else c['mix'][cmd]:,}",
            *(spread(by[k][cmd][stat_key], ".3f") for k in SIDES),
        )
        for cmd in (*LABELS, "all")
        if cmd == "all" or cmd in c["mix"]
    ]
    return table(["command", "in trace", *(s["label"] for s in _sides(r).values())], rows)


def throughput_table(r: Result) -> str:
    rows = [
        (
            s["label"],
            spread(s["commands_per_s"], ",.0f"),
            "reference"
            if key == "local"
            else f"{sum(s['final_view_mismatches'])} / {sum(s['outcome_mismatches'])}",
        )
        for key, s in _sides(r).items()
    ]
    return table(
        ["side", "commands/s", "mismatches: final views / command outcomes (all rounds)"], rows
    )


def _worst(r: Result, key: str) -> tuple[str, float]:
    by = {cmd: x["p50_ms"]["median"] for cmd, x in _latency(r)[key].items() if cmd != "all"}
    label = max(by, key=lambda k: by[k])
    return label, by[label]


def targets(r: Result) -> list[dict[str, Any]]:
    overall = _latency(r)["sql"]["all"]["p50_ms"]
    worst, worst_ms = _worst(r, "sql")
    nosync_worst, nosync_worst_ms = _worst(r, "sql_async")
    others = [s for key, s in _sides(r).items() if key != "local"]
    views = sum(sum(s["final_view_mismatches"]) for s in others)
    outcomes = sum(sum(s["outcome_mismatches"]) for s in others)
    rounds = r["config"]["rounds"]
    return [
        {
            "target": f"memory.run p50 ≤ {TARGET_MS:g} ms per command over a local socket",
            "measured": f"{overall['median']:.2f} ms (all commands, median of {rounds} "
            f"rounds, {overall['min']:.2f}..{overall['max']:.2f})",
            "met": overall["median"] <= TARGET_MS,
        },
        {
            "target": f"memory.run p50 ≤ {TARGET_MS:g} ms for every command type",
            "measured": f"worst: {worst} {worst_ms:.2f} ms; with synchronous_commit off "
            f"{_latency(r)['sql_async'][worst]['p50_ms']['median']:.2f} ms (worst {nosync_worst} "
            f"{nosync_worst_ms:.2f} ms)",
            "met": worst_ms <= TARGET_MS,
        },
        {
            "target": "memory.run leaves the same files as the reference tool",
            "measured": f"{views} final-view and {outcomes} command-outcome mismatches "
            f"over {rounds} rounds of every side",
            "met": views == 0 and outcomes == 0,
        },
    ]


def markdown(r: Result) -> str:
    c, env, t = r["config"], r["environment"], r["tables"]
    load = env.get("loadavg_before")
    profile = ""
    if "profile" in t:
        rows = [
            (
                f"`{f['function']}`",
                f"{f['calls']:,}",
                f"{f['self_us_per_call']:.1f}",
                f"{f['self_share_of_run']:.0%}",
            )
            for f in t["profile"]
        ]
        headers = ["function", "calls", "self µs per call", "share of memory.run's time"]
        profile = PROFILE.format(**t["profile_run"][0], table=table(headers, rows))
    return section(
        SECTION,
        r,
        env["server_settings"],
        mix=_mix_text(c["mix"]),
        files_at_end=t["checks"][0]["files_at_end"],
        sql8=_sides(r)["sql8"]["label"],
        load=f" Load average when the run started: {load[0]:.2f} on {env['machine']['nproc']} cores."
        if load
        else "",
        p50=latency_table(r, "p50_ms"),
        p95=latency_table(r, "p95_ms"),
        check=CHECK[c.get("compared")],
        throughput=throughput_table(r),
        profile=profile,
    )


def figure(plt: Any, r: Result) -> Any:
    """p50 per command type: memory.run, the local tool, memory.run under 8 clients."""
    c, by = r["config"], _latency(r)
    commands = [label for label in LABELS if label in c["mix"]] + ["all"]
    series = {
        SIDES[k]: [by[k][cmd]["p50_ms"] for cmd in commands] for k in ("sql", "local", "sql8")
    }
    fig, ax = plt.subplots(figsize=(11, 4.8))
    labels = [*commands[:-1], "all commands"]
    grouped_bars(ax, labels, series, rotation=25, ha="right")
    ax.axhline(TARGET_MS, color="grey", linestyle="--", linewidth=1, label="1 ms target")
    log_scale(ax)
    ax.set_ylabel(f"p50 latency, ms (median of {c['rounds']} rounds, min..max)")
    ax.set_title(f"Memory-tool commands, {c['commands']:,}-command trace")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


FIGURES = {"-latency": figure}


if __name__ == "__main__":
    main()

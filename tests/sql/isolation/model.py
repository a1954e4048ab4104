"""The model of tests/sql/test_isolation_properties.py: principals, namespaces and
what they hold, and the texts the SQL must answer with (text oracles)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from anthropic.lib.tools._beta_builtin_memory_tool import _format_file_size

from tests.conftest import SERVICE_LOGIN, USER_LOGIN
from tests.support import SERVICE, Failure, user_claims

ORG1 = "11111111-1111-4111-8111-111111111111"
ORG2 = "22222222-2222-4222-8222-222222222222"
UNKNOWN_ORG = "33333333-3333-4333-8333-333333333333"
ORGS = (ORG1, ORG2, UNKNOWN_ORG)

READ = "memory.read"
MANAGE = "memory.manage"

# The errors the model expects: a HINT and its SQLSTATE (messages are not compared).
FORBIDDEN = Failure("42501", "MEMORY_FORBIDDEN", "")
NOT_FOUND = Failure("P0002", "MEMORY_NOT_FOUND", "")
INVALID = Failure("22023", "MEMORY_INVALID", "")
INVALID_PATH = Failure("22023", "MEMORY_INVALID_PATH", "")
EXISTS = Failure("23505", "MEMORY_EXISTS", "")
CONFLICT = Failure("40001", "MEMORY_CONFLICT", "")
NO_MATCH = Failure("22023", "MEMORY_NO_MATCH", "")
AMBIGUOUS = Failure("22023", "MEMORY_AMBIGUOUS", "")
ERRORS = (FORBIDDEN, NOT_FOUND, INVALID, INVALID_PATH, EXISTS, CONFLICT, NO_MATCH, AMBIGUOUS)
SQLSTATE = {error.hint: error.sqlstate for error in ERRORS}

ROOT = "/memories"
PATHS = (
    ROOT,
    "/memories/a.md",
    "/memories/b.md",
    "/memories/notes",
    "/memories/notes/c.md",
    "/memories/notes/deep",
    "/memories/notes/deep/d.md",
    "/memories/a.md/x.md",
    "/memories/x/y/z/e.md",
)
FILE_PATHS = ("/memories/a.md", "/memories/notes/c.md")  # more often than the others

# Words whose english lexemes are distinct (checked at start), and english stop
# words, which give no lexeme: full-text matching is then "shares a word".
WORDS = ("apple", "river", "mountain", "lisbon", "violin", "coffee", "tiger", "garden")
STOP_WORDS = ("where", "the", "is")

# Embeddings of 4 dimensions, exact in float4. Within the first group cosines are
# >= 0.99 (duplicates at the 0.92 threshold); across groups they are <= 0.79.
VECTORS = (
    (1.0, 0.0, 0.0, 0.0),
    (2.0, 0.0, 0.0, 0.0),
    (1.0, 0.125, 0.0, 0.0),
    (0.0, 1.0, 0.0, 0.0),
    (0.0, 0.0, 1.0, 0.0),
    (0.0, 0.0, 0.0, 1.0),
    (1.0, 1.0, 0.0, 0.0),
    (0.0, 0.0, 1.0, 1.0),
)
THRESHOLD = 0.92

# How often each principal acts (out of the sum), and the organization users belong to.
ACTOR_WEIGHTS = {
    "A1": 4,
    "A2": 3,
    "B1": 3,
    "ADMIN": 3,
    "SERVICE": 3,
    "SERVICE_CLAIM": 1,
    "NOREAD": 1,
    "NOBODY": 1,
    "FORGER": 1,
    "A1_APP": 1,  # A1's claims through the trusted service login: A1, nothing more
}
HOME = {"B1": ORG2}  # everyone else: ORG1
USER_IDS = {
    name: str(uuid.UUID(int=n + 1))
    for n, name in enumerate(("A1", "A2", "B1", "ADMIN", "NOREAD", "NOBODY"))
}


@dataclass(frozen=True)
class Actor:
    name: str
    login: str  # USER_LOGIN (an ordinary login) or SERVICE_LOGIN (a trusted one)
    claims: dict[str, str] | str = field(compare=False)  # request.jwt.claims (SERVICE: none)
    user_id: str | None = None  # None: the service, or a forger (never authenticated)
    service: bool = False

    def __repr__(self) -> str:
        return self.name


ACTORS = {
    actor.name: actor
    for actor in (
        *(Actor(name, USER_LOGIN, user_claims(uid), uid) for name, uid in USER_IDS.items()),
        Actor("A1_APP", SERVICE_LOGIN, user_claims(USER_IDS["A1"]), USER_IDS["A1"]),
        Actor("SERVICE", SERVICE_LOGIN, SERVICE, service=True),
        Actor("SERVICE_CLAIM", SERVICE_LOGIN, {"role": "service_role"}, service=True),
        Actor("FORGER", USER_LOGIN, {"role": "service_role", "sub": USER_IDS["A1"]}),
    )
}
USERS = [a for a in ACTORS.values() if a.user_id is not None]


def ns_dict(scope: str | None, scope_id: str | None, owner: str | None) -> dict[str, str]:
    """A namespace as JSON: the keys given (no scope: `{}`, the user's own)."""
    out = {} if scope is None else {"scope": scope}
    if scope_id is not None:
        out[f"{scope}_id"] = scope_id
    if owner is not None:
        out["owner_id"] = owner
    return out


@dataclass(frozen=True)
class Ns:
    """A namespace as a caller names it: scope None is `{}` (the user's own)."""

    scope: str | None = None
    scope_id: str | None = None
    owner_id: str | None = None

    def json(self) -> dict[str, str]:
        return ns_dict(self.scope, self.scope_id, self.owner_id)


Target = tuple[Actor, str, Ns]  # who calls, in which organization, on which namespace

# A namespace in the model: (org, scope, owner or None, scope_id or None).
NsKey = tuple[str, str, "str | None", "str | None"]


def ns_json(key: NsKey) -> dict[str, str]:
    """memory._ns_json: the namespace as a caller would pass it, owner included."""
    return ns_dict(key[1], key[3], key[2])


@dataclass
class File:
    content: str
    version: int = 1


@dataclass
class Fact:
    id: str
    key: NsKey
    content: str
    vector: tuple[float, ...] | None
    seq: int
    version: int = 1
    forgotten: bool = False
    superseded_by: str | None = None


@dataclass
class Message:
    owner: str
    role: str
    content: str
    vector: tuple[float, ...] | None


@dataclass
class Model:
    files: dict[NsKey, dict[str, File]] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    # (org, owner, chat_id, message_id): a message is its owner's
    messages: dict[tuple[str, str, str, str], Message] = field(default_factory=dict)
    permissions: set[tuple[str, str, str]] = field(default_factory=set)
    seq: int = 0


def as_list(vector: tuple[float, ...] | None) -> list[float] | None:
    """A vector as the SQL answers it (real[] or jsonb)."""
    return None if vector is None else list(vector)


# ----------------------------------------------------------------------------- text oracles


def lexemes(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]+", text)} & set(WORDS)


def normalized(text: str) -> str:
    """memory._normalized_key before md5: btrim (spaces), \\s+ to one space, lower."""
    return re.sub(r"[ \t\n\r\f\v]+", " ", text.strip(" ")).lower()


def cosine(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{first + i:>6}\t{line}" for i, line in enumerate(lines))


def is_dir(files: dict[str, File], path: str) -> bool:
    return path == ROOT or any(p.startswith(path + "/") for p in files)


def ancestors(path: str) -> list[str]:
    """Ancestor directories, nearest first, /memories excluded."""
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts) - 1, 2, -1)]


def file_ancestor(files: dict[str, File], path: str) -> str | None:
    return next((a for a in ancestors(path) if a in files), None)


def view_file(path: str, content: str, view_range: list[int] | None) -> str:
    lines = content.split("\n")
    first, last = 0, len(lines)
    if view_range is not None:
        start, end = view_range
        first = min(max(1, start) - 1, len(lines))
        last = (
            len(lines)
            if end == -1
            else max(0, len(lines) + end)
            if end < 0
            else min(end, len(lines))
        )
    return f"Here's the content of {path} with line numbers:\n" + numbered(
        lines[first:last], first + 1
    )


def view_dir(files: dict[str, File], directory: str) -> str:
    below = [
        (p[len(directory) + 1 :].split("/"), len(f.content.encode()))
        for p, f in files.items()
        if p.startswith(directory + "/")
    ]
    listed: dict[tuple[str, str | None, bool], int] = {}
    for segments, size in below:
        if segments[0].startswith("."):
            continue
        entry = (segments[0], None, len(segments) > 1)
        listed[entry] = listed.get(entry, 0) + size
        if len(segments) > 1 and not segments[1].startswith("."):
            entry = (segments[0], segments[1], len(segments) > 2)
            listed[entry] = listed.get(entry, 0) + size
    lines = [
        f"Here're the files and directories up to 2 levels deep in {directory}, excluding hidden items:",
        f"{_format_file_size(sum(size for _, size in below))}\t{directory}",
    ]
    for (name1, name2, dir_), size in sorted(
        listed.items(), key=lambda item: (item[0][0], item[0][1] is not None, item[0][1] or "")
    ):
        name = name1 + ("/" + name2 if name2 is not None else "") + ("/" if dir_ else "")
        lines.append(f"{_format_file_size(size)}\t{directory}/{name}")
    return "\n".join(lines)


def escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def render_block(path: str, scope: str, content: str) -> str:
    tail = "" if content == "" or content.endswith("\n") else "\n"
    return f'<memory_file path="{escape(path)}" scope="{scope}">\n{escape(content)}{tail}</memory_file>'


def render(blocks: list[str], budget: int = 8000) -> str:
    if len("\n".join(blocks)) <= budget:
        return "\n".join(blocks)

    def note(omitted: int) -> str:
        return (
            f"[core memory cut at {budget} characters: {omitted} of {len(blocks)} files not shown;"
            " view /memories with the memory tool to read them]"
        )

    kept, omitted = "", 0
    for block in blocks:
        if len(kept) + len(block) + 1 <= budget - len(note(len(blocks))) - 1:
            kept = kept + ("" if kept == "" else "\n") + block
        else:
            omitted += 1
    return (kept + ("" if kept == "" else "\n") + note(omitted))[:budget]

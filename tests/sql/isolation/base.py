"""Who acts where (the strategies), and the machine's base: the model, the principals,
memory._resolve and memory._fact step by step, the checks every area's rules use and
the invariant that the raw tables hold exactly the model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

import psycopg
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant
from psycopg.types.json import Jsonb

from tests.sql.isolation.model import (
    ACTOR_WEIGHTS,
    ACTORS,
    FILE_PATHS,
    FORBIDDEN,
    HOME,
    INVALID,
    MANAGE,
    NOT_FOUND,
    ORG1,
    ORG2,
    ORGS,
    PATHS,
    READ,
    SQLSTATE,
    STOP_WORDS,
    UNKNOWN_ORG,
    USER_IDS,
    USERS,
    VECTORS,
    WORDS,
    Actor,
    Fact,
    File,
    Model,
    Ns,
    NsKey,
    Target,
    as_list,
)
from tests.support import Failure, Principal

FILE_TEXT = st.lists(
    st.sampled_from(["alpha", "beta", "<b>", "&amp;", '"q"', "\n", " ", "é", "line\n"]), max_size=6
).map("".join)
FACT_TEXT = st.lists(
    st.tuples(
        st.sampled_from(WORDS).flatmap(lambda w: st.sampled_from([w, w.upper(), w.title()])),
        st.sampled_from([" ", "  ", "\t"]),
    ),
    min_size=1,
    max_size=3,
).map(lambda parts: "".join(w + sep for w, sep in parts).rstrip(" "))
QUERY_WORDS = st.lists(st.sampled_from(WORDS + STOP_WORDS), min_size=1, max_size=3).map(" ".join)
VECTOR = st.none() | st.sampled_from(VECTORS)

OWNERS = [a.user_id for a in USERS]
USER_HOME = {a.user_id: HOME.get(a.name, ORG1) for a in USERS}
# Mostly principals who may do something, so that state builds up; every one of
# them often enough that refusals are checked too.
actor_st = st.sampled_from(
    [ACTORS[name] for name, weight in ACTOR_WEIGHTS.items() for _ in range(weight)]
)
# Mostly the user's own namespace and the organization's, so that state builds up
# where the next calls look; every kind often enough.
scope_st = st.sampled_from(
    [None, None, "user", "organization", "organization", "agent", "chat", "project"]
)
scope_id_st = st.sampled_from(["x", "x", "y"])
path_st = st.sampled_from(PATHS + FILE_PATHS * 2)


def org_near(org: str) -> st.SearchStrategy[str]:
    """Mostly the given (home) organization, sometimes another or an unknown one."""
    other = ORG2 if org == ORG1 else ORG1
    return st.sampled_from([org] * 8 + [other, UNKNOWN_ORG])


@st.composite
def target(draw: Callable[..., Any]) -> tuple[Actor, str, Ns]:
    """(actor, organization, namespace as the actor names it) for one call."""
    actor = draw(actor_st)
    scope = draw(scope_st)
    scope_id = draw(scope_id_st) if scope in ("agent", "chat", "project") else None
    owner = None
    if actor.service:
        # The service names the owner; sometimes it forgets (refused as invalid)
        # or names one for the organization namespace (refused as invalid).
        named = draw(st.sampled_from(OWNERS))
        org = draw(org_near(USER_HOME[named]))
        if scope != "organization":
            owner = None if draw(st.integers(0, 19)) == 19 else named
        elif draw(st.integers(0, 19)) == 19:
            owner = named
    else:
        org = draw(org_near(USER_HOME.get(actor.user_id, ORG1)))
        # A user passing owner_id is trying to reach someone else's memory.
        if draw(st.integers(0, 9)) == 9:
            owner = draw(st.sampled_from(OWNERS))
    return actor, org, Ns(scope, scope_id, owner)


@st.composite
def acting(draw: Callable[..., Any]) -> tuple[Actor, str]:
    actor = draw(actor_st)
    if actor.service:
        return actor, draw(st.sampled_from(ORGS))
    return actor, draw(org_near(USER_HOME.get(actor.user_id, ORG1)))


@st.composite
def indexing(draw: Callable[..., Any]) -> tuple[Actor, str, str]:
    """(actor, organization, owner) of a message: mostly the service indexing."""
    actor = draw(st.sampled_from([ACTORS["SERVICE"]] * 3 + [ACTORS["SERVICE_CLAIM"]]) | actor_st)
    owner = draw(st.sampled_from(OWNERS))
    return actor, draw(org_near(USER_HOME[owner])), owner


class Steps:
    """Counts the steps taken and their outcomes, so the test shows what it covered."""

    total = 0
    outcomes: ClassVar[Counter[tuple[str, str | None]]] = Counter()


RAW_STATE = """
SELECT jsonb_build_object(
  'files', coalesce((
    SELECT jsonb_agg(jsonb_build_array(n.organization_id, n.scope, n.owner_id, n.scope_id,
                                       f.path, f.content, f.version))
    FROM memory.files f
    JOIN memory.namespaces n ON n.organization_id = f.organization_id AND n.id = f.namespace_id), '[]'),
  'facts', coalesce((
    SELECT jsonb_agg(jsonb_build_array(f.id, n.organization_id, n.scope, n.owner_id, n.scope_id,
                                       f.content, f.version, f.forgotten_at IS NOT NULL,
                                       f.superseded_by, f.embedding::real[]))
    FROM memory.facts f
    JOIN memory.namespaces n ON n.organization_id = f.organization_id AND n.id = f.namespace_id), '[]'),
  'messages', coalesce((
    SELECT jsonb_agg(jsonb_build_array(m.organization_id, n.owner_id, n.scope, m.chat_id,
                                       m.message_id, m.role, m.content, m.embedding::real[]))
    FROM memory.messages m
    JOIN memory.namespaces n ON n.organization_id = m.organization_id AND n.id = m.namespace_id), '[]'))
"""


class Machine(RuleBasedStateMachine):
    """The model, the principals, and what every area's rules use."""

    def __init__(self, principals: dict[str, Principal], su: psycopg.Connection) -> None:
        super().__init__()
        self.principals, self.su = principals, su
        self.model = Model()
        self.spots: list[tuple[Actor, str, Ns, str]] = []
        su.execute(
            "TRUNCATE memory.namespaces, memory.files, memory.facts, memory.messages, "
            "memory.permissions, memory.documents CASCADE"
        )
        grants = [
            (ORG1, USER_IDS["A1"], READ),
            (ORG1, USER_IDS["A2"], READ),
            (ORG2, USER_IDS["B1"], READ),
            (ORG1, USER_IDS["ADMIN"], READ),
            (ORG1, USER_IDS["ADMIN"], MANAGE),
            (ORG1, USER_IDS["NOREAD"], MANAGE),
        ]
        su.execute(
            "SELECT memory.grant((g ->> 0)::uuid, (g ->> 1)::uuid, g ->> 2) FROM jsonb_array_elements(%s) g",
            [Jsonb(grants)],
        )
        self.model.permissions = set(grants)

    def may(self, actor: Actor, org: str, permission: str) -> bool:
        return (org, actor.user_id, permission) in self.model.permissions

    def resolve(self, actor: Actor, org: str, ns: Ns, need: str) -> NsKey | Failure:
        """memory._resolve, step by step: the namespace, or the refusal."""
        if not actor.service and actor.user_id is None:
            return FORBIDDEN  # forged service claims
        scope = ns.scope or "user"
        if scope == "organization" and ns.owner_id is not None:
            return INVALID
        if ns.owner_id is not None and not actor.service:
            return FORBIDDEN
        owner = None if scope == "organization" else (ns.owner_id or actor.user_id)
        if owner is None and scope != "organization":
            return INVALID
        if not actor.service:
            if not self.may(actor, org, READ):
                return FORBIDDEN
            if scope == "organization" and need == "write" and not self.may(actor, org, MANAGE):
                return FORBIDDEN
        return (org, scope, owner, ns.scope_id)

    def authorize_fact(
        self, actor: Actor, org: str, fact: Fact | None, need: str
    ) -> Failure | None:
        """memory._fact: the organization first; another user's fact, or one of
        another organization, answers as if it did not exist."""
        if not actor.service and not self.may(actor, org, READ):
            return FORBIDDEN  # nobody (forged service claims) or no read: whatever the id
        if fact is None or fact.key[0] != org:
            return NOT_FOUND
        if actor.service:
            return None
        _, scope, owner, _ = fact.key
        if owner is not None and owner != actor.user_id:
            return NOT_FOUND
        if scope == "organization" and need == "write" and not self.may(actor, org, MANAGE):
            return FORBIDDEN
        return None

    def aim(self, data: st.DataObject, who: Target, path: str) -> tuple[Actor, str, Ns, str]:
        """Where a call goes: mostly where a file was written before, named by its
        writer or, to probe isolation, by someone else; else where `who` was drawn."""
        if self.spots and data.draw(st.integers(0, 3), label="aim") < 3:
            actor, org, ns, path = data.draw(st.sampled_from(self.spots), label="spot")
            if data.draw(st.integers(0, 2), label="swap") == 2:
                actor = who[0]
            return actor, org, ns, path
        return (*who, path)

    def wrote(self, actor: Actor, org: str, ns: Ns, path: str) -> None:
        if (actor, org, ns, path) not in self.spots:
            self.spots.append((actor, org, ns, path))

    def files(self, key: NsKey) -> dict[str, File]:
        return self.model.files.setdefault(key, {})

    def call(self, actor: Actor, query: str, *params: Any) -> list[tuple[Any, ...]] | Failure:
        """One call in its own transaction: its rows, or the error it raised."""
        return self.principals[actor.name].attempt(query, *params)

    def value(self, actor: Actor, query: str, *params: Any) -> Any:
        """The first column of the first row, or the error."""
        got = self.call(actor, query, *params)
        return got if isinstance(got, Failure) else got[0][0]

    def check(self, got: Any, expected: Any, what: str) -> None:
        """A step's answer against the model's: an error by its HINT and SQLSTATE."""
        failed = isinstance(got, Failure)
        Steps.total += 1
        Steps.outcomes[what, got.hint if failed else "ok"] += 1
        assert not failed or got.sqlstate == SQLSTATE.get(got.hint, "?"), (what, got)
        answer = replace(got, message="") if failed else got
        assert answer == expected, f"{what}: expected {expected!r}, got {got!r}"

    @invariant()
    def tables_hold_exactly_the_model(self) -> None:
        raw = self.su.execute(RAW_STATE).fetchone()[0]
        files = {tuple(row[:5]): tuple(row[5:]) for row in raw["files"]}
        assert files == {
            (*key, path): (f.content, f.version)
            for key, entries in self.model.files.items()
            for path, f in entries.items()
        }, "files differ from the model"
        facts = {row[0]: tuple(row[1:]) for row in raw["facts"]}
        assert facts == {
            f.id: (*f.key, f.content, f.version, f.forgotten, f.superseded_by, as_list(f.vector))
            for f in self.model.facts.values()
        }, "facts differ from the model"
        messages = {tuple(row[:2] + row[3:5]): tuple(row[2:3] + row[5:]) for row in raw["messages"]}
        assert messages == {
            k: ("user", m.role, m.content, as_list(m.vector))
            for k, m in self.model.messages.items()
        }, "messages differ from the model"

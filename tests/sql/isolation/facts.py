"""Facts: save (with dedupe), search, get, forget, edit."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.sql.isolation.base import FACT_TEXT, QUERY_WORDS, VECTOR, Machine, actor_st, target
from tests.sql.isolation.model import (
    INVALID,
    ORG1,
    ORGS,
    THRESHOLD,
    Actor,
    Fact,
    Ns,
    NsKey,
    Target,
    as_list,
    cosine,
    lexemes,
    normalized,
    ns_json,
)
from tests.support import Failure


class Facts(Machine):
    """save_fact, save_facts, search_facts, get_fact, forget, edit_fact."""

    def duplicates(self, key: NsKey, content: str, vector: tuple[float, ...] | None) -> set[str]:
        """The model's dedupe: the ids this fact may be a duplicate of (none: saved).

        By text, the earliest live fact with the same normalized text (several when
        they were saved in one transaction: their created_at is the same); else by
        cosine, the nearest embedded live fact at or above the threshold (live
        embedded facts are never that close to each other, so it is one).
        """
        live = [f for f in self.model.facts.values() if f.key == key and not f.forgotten]
        same_text = [f for f in live if normalized(f.content) == normalized(content)]
        if same_text:
            first = min(f.seq for f in same_text)
            return {f.id for f in same_text if f.seq == first}
        if vector is not None:
            near = [(cosine(vector, f.vector), f.id) for f in live if f.vector is not None]
            if near and max(near)[0] >= THRESHOLD:
                return {max(near)[1]}
        return set()

    def add_fact(self, fact_id: str, key: NsKey, content: str, vector: Any) -> None:
        self.model.facts[fact_id] = Fact(fact_id, key, content, vector, self.model.seq)

    @rule(who=target(), content=FACT_TEXT, vector=VECTOR)
    def save_fact(self, who: Target, content: str, vector: tuple[float, ...] | None) -> None:
        actor, org, ns = who
        got = self.value(
            actor,
            "SELECT memory.save_fact(%s, %s, %s::real[], %s)::text",
            org,
            content,
            as_list(vector),
            ns.json(),
        )
        key = self.resolve(actor, org, ns, "write")
        if isinstance(key, Failure):
            return self.check(got, key, "save_fact")
        self.model.seq += 1
        duplicates = self.duplicates(key, content, vector)
        if duplicates:
            assert got in duplicates, (got, duplicates)
            return self.check(got, got, "save_fact of a duplicate")
        assert isinstance(got, str) and got not in self.model.facts, got
        self.add_fact(got, key, content, vector)
        self.check(got, got, "save_fact")

    @rule(who=target(), batch=st.lists(st.tuples(FACT_TEXT, VECTOR), min_size=1, max_size=3))
    def save_facts(self, who: Target, batch: list[tuple[str, Any]]) -> None:
        actor, org, ns = who
        facts = [
            {"content": c, **({"embedding": list(v)} if v is not None else {})} for c, v in batch
        ]
        got = self.call(
            actor,
            "SELECT ord, id::text, duplicate_of::text FROM memory.save_facts(%s, %s, %s) ORDER BY ord",
            org,
            facts,
            ns.json(),
        )
        key = self.resolve(actor, org, ns, "write")
        if isinstance(key, Failure):
            return self.check(got, key, "save_facts")
        assert not isinstance(got, Failure), got
        assert [row[0] for row in got] == list(range(1, len(batch) + 1)), got
        self.model.seq += 1
        for (content, vector), (_, new_id, duplicate_of) in zip(batch, got, strict=True):
            duplicates = self.duplicates(key, content, vector)
            if duplicates:
                assert new_id is None and duplicate_of in duplicates, (got, duplicates)
            else:
                assert new_id is not None and duplicate_of is None, got
                self.add_fact(new_id, key, content, vector)
        self.check(len(got), len(batch), "save_facts")

    def visible_facts(self, key: NsKey) -> list[Fact]:
        return [f for f in self.model.facts.values() if f.key == key and not f.forgotten]

    @rule(
        data=st.data(),
        who=target(),
        also_org=st.booleans(),
        vector=VECTOR,
        k=st.sampled_from([100, 100, 2]),
    )
    def search_facts(
        self,
        data: st.DataObject,
        who: Target,
        also_org: bool,
        vector: tuple[float, ...] | None,
        k: int,
    ) -> None:
        actor, org, ns = who
        known = sorted(f.content for f in self.model.facts.values())
        query = data.draw(
            st.sampled_from(known) | QUERY_WORDS if known else QUERY_WORDS, label="query"
        )
        namespaces: Any = [ns.json(), {"scope": "organization"}] if also_org else ns.json()
        got = self.call(
            actor,
            "SELECT id::text, content, ns FROM memory.search_facts(%s, %s, %s::real[], %s, %s)",
            org,
            query,
            as_list(vector),
            namespaces,
            k,
        )
        keys = [self.resolve(actor, org, ns, "read")]
        if also_org:
            keys.append(self.resolve(actor, org, Ns("organization"), "read"))
        refusal = next((key for key in keys if isinstance(key, Failure)), None)
        if refusal is not None:
            return self.check(got, refusal, "search_facts")
        words = lexemes(query)
        expected = {
            (f.id, f.content, json.dumps(ns_json(f.key), sort_keys=True))
            for key in set(keys)
            for f in self.visible_facts(key)
            if (vector is not None and f.vector is not None) or lexemes(f.content) & words
        }
        assert not isinstance(got, Failure), got
        found = {(i, c, json.dumps(n, sort_keys=True)) for i, c, n in got}
        assert len(found) == len(got), got
        assert found <= expected, f"search_facts found what it may not: {found - expected}"
        self.check(len(found), min(k, len(expected)), "search_facts")

    def pick_fact(self, data: st.DataObject) -> str:
        # In the order saved, not sorted: ids are random uuids, and a draw whose
        # meaning changed between runs would make Hypothesis's generation flaky.
        ids = list(self.model.facts)
        unknown = st.uuids().map(str)
        known = st.sampled_from(ids)
        return data.draw(st.one_of(known, known, known, unknown) if ids else unknown, label="fact")

    def pick_org(self, data: st.DataObject, fact_id: str) -> str:
        """Mostly the fact's own organization; sometimes another, to probe."""
        fact = self.model.facts.get(fact_id)
        own = fact.key[0] if fact is not None else ORG1
        return data.draw(st.sampled_from((own, own, own, *ORGS)), label="org")

    @rule(data=st.data(), actor=actor_st)
    def get_fact(self, data: st.DataObject, actor: Actor) -> None:
        fact_id = self.pick_fact(data)
        org = self.pick_org(data, fact_id)
        got = self.value(actor, "SELECT memory.get_fact(%s, %s)", org, fact_id)
        if not isinstance(got, Failure):
            got = dict(got)
            del got["created_at"]
            got["forgotten"] = got.pop("forgotten_at") is not None
        fact = self.model.facts.get(fact_id)
        refusal = self.authorize_fact(actor, org, fact, "read")
        if refusal is not None:
            return self.check(got, refusal, "get_fact")
        assert fact is not None
        self.check(
            got,
            {
                "id": fact.id,
                "content": fact.content,
                "version": fact.version,
                "ns": ns_json(fact.key),
                "forgotten": fact.forgotten,
                "superseded_by": fact.superseded_by,
                "embedding_pending": fact.vector is None,
                "source": None,  # the machine saves facts without one
            },
            "get_fact",
        )

    @rule(data=st.data(), actor=actor_st, supersede=st.booleans())
    def forget(self, data: st.DataObject, actor: Actor, supersede: bool) -> None:
        fact_id = self.pick_fact(data)
        org = self.pick_org(data, fact_id)
        successor = self.pick_fact(data) if supersede else None
        got = self.value(actor, "SELECT memory.forget(%s, %s, %s)", org, fact_id, successor)
        fact = self.model.facts.get(fact_id)
        refusal = self.authorize_fact(actor, org, fact, "write")
        if refusal is not None:
            return self.check(got, refusal, "forget")
        assert fact is not None
        if successor is not None:
            after = self.model.facts.get(successor)
            if after is None or after.key != fact.key or after.forgotten or after.id == fact.id:
                return self.check(got, INVALID, "forget with a bad successor")
        fact.forgotten = True
        fact.superseded_by = successor
        self.check(got, "", "forget")  # void

    @rule(data=st.data(), actor=actor_st, content=FACT_TEXT)
    def edit_fact(self, data: st.DataObject, actor: Actor, content: str) -> None:
        fact_id = self.pick_fact(data)
        org = self.pick_org(data, fact_id)
        got = self.value(actor, "SELECT memory.edit_fact(%s, %s, %s)", org, fact_id, content)
        fact = self.model.facts.get(fact_id)
        refusal = self.authorize_fact(actor, org, fact, "write")
        if refusal is not None:
            return self.check(got, refusal, "edit_fact")
        assert fact is not None
        fact.content, fact.vector, fact.version = content, None, fact.version + 1
        self.check(got, fact.version, "edit_fact")

"""Messages: indexing (the service only), recall (a user's own), deleting a chat."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.sql.isolation.base import FACT_TEXT, QUERY_WORDS, VECTOR, Machine, acting, indexing
from tests.sql.isolation.model import FORBIDDEN, Actor, Message, Ns, as_list, lexemes
from tests.support import Failure


class Messages(Machine):
    """index_message, search_messages, delete_chat."""

    @rule(
        who=indexing(),
        chat=st.sampled_from(["c1", "c2"]),
        mid=st.sampled_from(["m1", "m2", "m3"]),
        role=st.sampled_from(["user", "assistant"]),
        content=FACT_TEXT,
        vector=VECTOR,
        temporary=st.sampled_from([False, False, False, True]),
    )
    def index_message(
        self,
        who: tuple[Actor, str, str],
        chat: str,
        mid: str,
        role: str,
        content: str,
        vector: tuple[float, ...] | None,
        temporary: bool,
    ) -> None:
        actor, org, owner = who
        message = {
            "id": mid,
            "chat_id": chat,
            "owner_id": owner,
            "role": role,
            "content": content,
            "temporary": temporary,
        }
        got = self.value(
            actor, "SELECT memory.index_message(%s, %s, %s::real[])", org, message, as_list(vector)
        )
        if not actor.service:
            return self.check(got, FORBIDDEN, "index_message")
        if temporary:
            return self.check(got, False, "index_message of a temporary chat")
        old = self.model.messages.get((org, owner, chat, mid))
        if vector is None and old is not None and old.content == content:
            vector = old.vector
        self.model.messages[(org, owner, chat, mid)] = Message(owner, role, content, vector)
        self.check(got, True, "index_message")

    @rule(
        who=acting(), query=QUERY_WORDS, vector=VECTOR, exclude=st.sampled_from([None, "c1", "c2"])
    )
    def search_messages(
        self,
        who: tuple[Actor, str],
        query: str,
        vector: tuple[float, ...] | None,
        exclude: str | None,
    ) -> None:
        actor, org = who
        got = self.call(
            actor,
            "SELECT id, chat_id, role, content FROM memory.search_messages(%s, %s, %s::real[], %s, 100)",
            org,
            query,
            as_list(vector),
            exclude,
        )
        key = self.resolve(actor, org, Ns(), "read")
        if isinstance(key, Failure):
            return self.check(got, key, "search_messages")
        words = lexemes(query)
        expected = {
            (mid, chat, m.role, m.content)
            for (o, _, chat, mid), m in self.model.messages.items()
            if o == org
            and m.owner == actor.user_id
            and chat != exclude
            and ((vector is not None and m.vector is not None) or lexemes(m.content) & words)
        }
        assert not isinstance(got, Failure), got
        assert len(set(got)) == len(got), got
        self.check(set(got), expected, "search_messages")

    @rule(who=acting(), chat=st.sampled_from(["c1", "c2"]))
    def delete_chat(self, who: tuple[Actor, str], chat: str) -> None:
        actor, org = who
        got = self.value(actor, "SELECT memory.delete_chat(%s, %s)", org, chat)
        if not actor.service:
            key = self.resolve(actor, org, Ns(), "read")
            if isinstance(key, Failure):
                return self.check(got, key, "delete_chat")
        doomed = [
            k
            for k, m in self.model.messages.items()
            if (k[0], k[2]) == (org, chat) and (actor.service or m.owner == actor.user_id)
        ]
        for k in doomed:
            del self.model.messages[k]
        self.check(got, len(doomed), "delete_chat")

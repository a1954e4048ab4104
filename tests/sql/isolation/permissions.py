"""Permissions: only the service grants and revokes."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.sql.isolation.base import Machine, actor_st
from tests.sql.isolation.model import FORBIDDEN, MANAGE, ORGS, READ, USERS, Actor


class Permissions(Machine):
    """memory.grant and memory.revoke."""

    @rule(
        actor=actor_st,
        org=st.sampled_from(ORGS[:2]),
        user=st.sampled_from(USERS),
        permission=st.sampled_from([READ, MANAGE]),
        give=st.booleans(),
    )
    def grant_or_revoke(
        self, actor: Actor, org: str, user: Actor, permission: str, give: bool
    ) -> None:
        fn = "grant" if give else "revoke"
        got = self.value(actor, f"SELECT memory.{fn}(%s, %s, %s)", org, user.user_id, permission)
        if not actor.service:
            return self.check(got, FORBIDDEN, fn)
        entry = (org, user.user_id or "", permission)
        if give:
            self.model.permissions.add(entry)
        else:
            self.model.permissions.discard(entry)
        self.check(got, "", fn)  # void

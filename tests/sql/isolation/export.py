"""Export: a namespace's files, facts and messages, exactly."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.sql.isolation.base import Machine, target
from tests.sql.isolation.model import ROOT, Target, as_list, ns_json
from tests.support import Failure


class Export(Machine):
    """memory.export of a namespace."""

    @rule(data=st.data(), who=target())
    def export(self, data: st.DataObject, who: Target) -> None:
        actor, org, ns, _ = self.aim(data, who, ROOT)
        got = self.value(actor, "SELECT memory.export(%s, %s)", org, ns.json())
        key = self.resolve(actor, org, ns, "read")
        if isinstance(key, Failure):
            return self.check(got, key, "export")
        assert isinstance(got, dict), got
        namespace = ns_json(key)
        namespace.pop("owner_id", None)
        files = self.model.files.get(key, {})
        facts = [f for f in self.model.facts.values() if f.key == key]
        messages = {
            (chat, mid): m
            for (o, _, chat, mid), m in self.model.messages.items()
            if key[1] == "user" and o == org and m.owner == key[2]
        }
        self.check(
            {
                "namespace": got["namespace"],
                "files": [(f["path"], f["content"], f["version"]) for f in got["files"]],
                "facts": {
                    f["id"]: (
                        f["content"],
                        f["version"],
                        f["forgotten_at"] is not None,
                        f["superseded_by"],
                        f["embedding"],
                    )
                    for f in got["facts"]
                },
                "messages": {
                    (m["chat_id"], m["id"]): (m["role"], m["content"], m["embedding"])
                    for m in got["messages"]
                },
            },
            {
                "namespace": namespace,
                "files": [(p, f.content, f.version) for p, f in sorted(files.items())],
                "facts": {
                    f.id: (f.content, f.version, f.forgotten, f.superseded_by, as_list(f.vector))
                    for f in facts
                },
                "messages": {
                    k: (m.role, m.content, as_list(m.vector)) for k, m in messages.items()
                },
            },
            "export",
        )

"""The load of bench/load.py, shortened for CI: 16 clients for about 20 seconds.

The same clients, mix and integrity check as the 10-minute run (`python -m
bench.load`, results in bench/results/load.json): zero unexpected errors, every operation ran,
and the database agrees with every client's ledger. The check itself is then
shown to catch damage: a lost token, a skipped version, a lost fact, a lost
increment and a near-duplicate fact slipped past dedupe are each reported.
Nothing here is timed.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg

from tests.load_harness import MIX, Config, Load

SECONDS = 20.0


def test_short_load_keeps_every_acknowledged_write(dsn: str) -> None:
    load = Load(dsn, Config(seconds=SECONDS, dimensions=32))
    world = load.prepare()
    load.run()

    errors = load.errors()
    assert errors.unexpected_count == 0, errors.unexpected
    assert errors.interruptions == 0
    ran = load.throughput()
    mixed = {name.split(".")[0] for name in MIX}
    assert mixed | {"embed"} <= {name.split(".")[0] for name, s in ran.items() if s["ops"]}
    for name in ("core.insert", "core.remove", "core.counter", "core.create", "facts.save"):
        assert ran[name]["ops"] > 0, name
    assert ran["embed.set"]["rows"] > 0

    integrity = load.check()
    assert integrity["problems"] == []
    checked = integrity["checked"]
    assert checked["facts"] > 0 and checked["duplicate_of"] > 0 and checked["messages"] > 0
    assert checked["document increments"] > 0 and checked["counter increments"] > 0

    # The check is not vacuous: damage of each kind is reported.
    with psycopg.connect(dsn, autocommit=True) as conn:

        def note(i: int) -> tuple[str, object, str, int]:
            user, path = world.notes[i]
            row = conn.execute(
                "SELECT f.namespace_id, f.content, f.version FROM memory.files f"
                " JOIN memory.namespaces n"
                " ON n.organization_id = f.organization_id AND n.id = f.namespace_id"
                " WHERE n.organization_id = %s AND n.scope = 'user' AND n.owner_id = %s"
                " AND f.path = %s",
                (world.org, world.users[user], path),
            ).fetchone()
            return (f"{path} of user {user}", *row)

        def change_note(namespace_id: object, path: str, sql: str, *params: object) -> None:
            conn.execute(
                f"UPDATE memory.files SET {sql} WHERE organization_id = %s"
                " AND namespace_id = %s AND path = %s",
                (*params, world.org, namespace_id, path),
            )

        # A token lost (the version left alone) ...
        lost_in, ns0, _, _ = note(0)
        live = set().union(*(c.ledger.tokens[0] for c in load.clients))
        kept = "".join(t + "\n" for t in sorted(live)[1:])
        change_note(ns0, world.notes[0][1], "content = %s", "# notes\n" + kept)
        # ... a version skipped ...
        skipped_in, ns1, _, version = note(1)
        change_note(ns1, world.notes[1][1], "version = version + 1")
        # ... an increment lost ...
        conn.execute(
            "UPDATE memory.documents SET content = %s WHERE path = %s",
            (json.dumps({"count": -1, "last": {}}), world.documents[0]),
        )
        # ... an acknowledged fact gone (forgotten) and a near-duplicate of another slipped in.
        facts = conn.execute(
            "SELECT id, namespace_id, embedding::text FROM memory.facts"
            " WHERE organization_id = %s AND embedding IS NOT NULL ORDER BY id LIMIT 2",
            (world.org,),
        ).fetchall()
        conn.execute("UPDATE memory.facts SET forgotten_at = now() WHERE id = %s", (facts[0][0],))
        near = np.asarray(json.loads(facts[1][2])) * 1.01 + 0.001
        conn.execute(
            "INSERT INTO memory.facts (organization_id, namespace_id, content, embedding)"
            " VALUES (%s, %s, 'slipped past dedupe', %s::vector)",
            (world.org, facts[1][1], json.dumps(near.tolist())),
        )
    problems = load.check()["problems"]
    text = "\n".join(problems)
    if live:
        assert f"{lost_in}: 1 acknowledged tokens missing, 0 unexpected" in problems
    assert f"{skipped_in}: version {version + 1}, expected 1 + {version - 1}" in problems
    assert f"document {world.documents[0]}: count -1" in text
    assert f"fact {facts[0][0]} (" in text
    assert "'slipped past dedupe'): an embedding nobody wrote" in text
    assert f"and {facts[1][0]}: cosine" in text or f"live facts {facts[1][0]} and" in text

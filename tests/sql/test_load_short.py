"""The load of bench/load.py, shortened for CI: 16 clients for about 20 seconds.

The same clients, mix and integrity check as the 10-minute run (`python -m
bench.load`, results in bench/results/load.json), capture workers included
(with a 2-second lease, so that some leases run out): zero unexpected errors,
every operation ran, and the database agrees with every client's ledger. The
check itself is then shown to catch damage: a lost token, a skipped version,
a lost fact, a lost increment, a near-duplicate fact slipped past dedupe, a
captured fact changed, a chat leased twice at once and a capture applied
twice are each reported. Nothing here is timed.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

import numpy as np
import psycopg

from tests.load_harness import MIX, Config, Load

SECONDS = 20.0


def test_short_load_keeps_every_acknowledged_write(dsn: str) -> None:
    load = Load(dsn, Config(seconds=SECONDS, dimensions=32, capture_lease_seconds=2))
    world = load.prepare()
    load.run()

    errors = load.errors()
    assert errors.unexpected_count == 0, errors.unexpected
    assert errors.interruptions == 0
    ran = load.throughput()
    mixed = {name.split(".")[0] for name in MIX}
    assert mixed | {"embed", "capture"} <= {
        name.split(".")[0] for name, s in ran.items() if s["ops"]
    }
    for name in ("core.insert", "core.remove", "core.counter", "core.create", "facts.save"):
        assert ran[name]["ops"] > 0, name
    assert ran["embed.set"]["rows"] > 0
    # Capture: chats leased, answers applied, given back, refused, sent twice, too late.
    assert ran["capture.lease"]["rows"] > 0 and ran["capture.apply"]["rows"] > 0
    for name in ("capture.fail", "capture.invalid", "capture.reapply", "capture.lost"):
        assert ran[name]["ops"] > 0, name
    captures = load.captures()
    assert captures["applied"] > 0 and captures["lost"] > 0
    assert {"saved", "secret", "unknown_fact"} <= set(captures["statuses"])

    integrity = load.check()
    assert integrity["problems"] == []
    checked = integrity["checked"]
    assert checked["facts"] > 0 and checked["duplicate_of"] > 0 and checked["messages"] > 0
    assert checked["document increments"] > 0 and checked["counter increments"] > 0
    assert checked["capture leases"] == captures["leases"]
    assert checked["captures applied"] == captures["applied"] and checked["captured facts"] > 0

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
        # ... an acknowledged fact gone (forgotten) and a near-duplicate of another slipped in
        # (live facts: forgetting one a capture already superseded would change nothing).
        facts = conn.execute(
            "SELECT id, namespace_id, embedding::text FROM memory.facts"
            " WHERE organization_id = %s AND embedding IS NOT NULL AND forgotten_at IS NULL"
            " ORDER BY id LIMIT 2",
            (world.org,),
        ).fetchall()
        conn.execute("UPDATE memory.facts SET forgotten_at = now() WHERE id = %s", (facts[0][0],))
        near = np.asarray(json.loads(facts[1][2])) * 1.01 + 0.001
        conn.execute(
            "INSERT INTO memory.facts (organization_id, namespace_id, content, embedding)"
            " VALUES (%s, %s, 'slipped past dedupe', %s::vector)",
            (world.org, facts[1][1], json.dumps(near.tolist())),
        )
        # A captured fact changed ...
        ended = {fact_id for c in load.clients for fact_id in c.ledger.ended}
        captured = next(
            (fact_id, content)
            for c in load.clients
            for fact_id, (_, _, _, content) in c.ledger.captured.items()
            if fact_id not in ended and fact_id not in {str(f[0]) for f in facts}
        )
        conn.execute("UPDATE memory.facts SET content = 'changed' WHERE id = %s", (captured[0],))
    # ... a chat leased to a second worker at once, and a capture applied twice (in the
    # ledgers: what the workers would have been told).
    workers = [c for c in load.clients if c.role == "capture"]
    lease = next(x for x in workers[0].ledger.leases if x.outcome == "applied" and x.messages)
    forged = dataclasses.replace(lease, worker=workers[1].index, capture_id=str(uuid.uuid4()))
    workers[1].ledger.leases.append(forged)
    workers[1].ledger.leases.append(dataclasses.replace(lease, worker=workers[1].index))
    problems = load.check()["problems"]
    text = "\n".join(problems)
    if live:
        assert f"{lost_in}: 1 acknowledged tokens missing, 0 unexpected" in problems
    assert f"{skipped_in}: version {version + 1}, expected 1 + {version - 1}" in problems
    assert f"document {world.documents[0]}: count -1" in text
    assert f"fact {facts[0][0]} (" in text
    assert "'slipped past dedupe'): an embedding nobody wrote" in text
    assert f"and {facts[1][0]}: cosine" in text or f"live facts {facts[1][0]} and" in text
    assert f"captured fact {captured[0]} ({captured[1]!r}): stored as" in text
    chat = f"chat {lease.chat} of {lease.owner}: leased to worker"
    assert f"{chat} {lease.worker} ({lease.capture_id}) and worker {forged.worker}" in text
    assert f"capture {lease.capture_id}: acknowledged as applied 2 times" in problems
    assert f"in applied captures [{lease.capture_id!r}, {forged.capture_id!r}" in text

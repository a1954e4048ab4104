"""The capture queue under attack: concurrent workers, replays, killed workers,
fact ids the model should not know, and secrets (with harmless look-alikes).

Concurrent workers are connections of their own, with transactions open at the
same time, as in test_concurrency.py.
"""

from __future__ import annotations

import base64
import json
import random
import string
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
from psycopg.types.json import Jsonb

from tests.sql.test_capture import APPLY, CAPTURES, _index, _lease, _status
from tests.support import SERVICE, Failure

BARRIER_TIMEOUT = 60  # seconds; only guards against a hang, never asserted on


def _conflict(capture_id) -> Failure:
    return Failure(
        "40001",
        "MEMORY_CONFLICT",
        f"capture {capture_id} holds no lease: it was lost or already applied",
    )


def _rows(service, table: str) -> list[tuple[str]]:
    """Every row of a table as its exact text, for 'changed nothing' checks."""
    return service.rows(f"SELECT t::text FROM memory.{table} t ORDER BY 1")


def _fact_row(service, fact_id) -> str:
    return service.value("SELECT (SELECT t::text FROM memory.facts t WHERE id = %s)", fact_id)


def _wait_until(service, query: str, *params) -> None:
    """Polls until `query` is true (e.g. a backend waits on a lock); never timed."""
    while not service.value(query, *params):
        service.value("SELECT pg_sleep(0.01)")


# ---------------------------------------------------------------- concurrent workers


def test_concurrent_workers_never_share_a_chat_and_every_chat_goes_once(service, org, dsn, as_):
    owners = [uuid.uuid4(), uuid.uuid4()]
    chats = [(owners[i % 2], f"c{i:02d}") for i in range(30)]
    for i, (owner, chat) in enumerate(chats):
        _index(service, org, owner, chat, "m1", f"message of {chat}", i)
    # Two transactions open at once: the first holds its chats locked while the
    # second leases; it must skip them, not wait (lock_timeout makes a wait an error).
    a, b = psycopg.connect(dsn), psycopg.connect(dsn)
    try:
        b.execute("SET lock_timeout = '20s'")
        first = a.execute(CAPTURES, (4, 50)).fetchall()
        second = b.execute(CAPTURES, (4, 50)).fetchall()
        a.commit()
        third = b.execute(CAPTURES, (4, 50)).fetchall()  # a's leases are committed now
        b.commit()
    finally:
        a.close()
        b.close()
    held = [(r[2], r[3]) for r in first + second + third]
    assert [len(first), len(second), len(third)] == [4, 4, 4]
    assert len(set(held)) == 12  # no chat twice
    assert held == chats[:12]  # oldest first, in turn

    # Two workers drain the rest, released together, applying each capture.
    workers = [as_(SERVICE), as_(SERVICE)]
    barrier = threading.Barrier(2, timeout=BARRIER_TIMEOUT)

    def drain(w: int) -> list[tuple[uuid.UUID, str]]:
        me, got = workers[w], []
        barrier.wait()
        while rows := me.rows(CAPTURES, 3, 50):
            for capture_id, _, owner, chat, messages, _ in rows:
                ops = [{"op": "add", "content": f"fact of {chat} by {owner}"}]
                assert [r[4] for r in me.rows(APPLY, capture_id, ops, f"w{w}")] == ["saved"]
                assert messages[0]["content"] == f"message of {chat}"
                got.append((owner, chat))
        return got

    with ThreadPoolExecutor(max_workers=2) as pool:
        drained = [f.result() for f in [pool.submit(drain, w) for w in range(2)]]
    counts = Counter(drained[0] + drained[1])
    assert counts == Counter(chats[12:])  # each of the other 18 exactly once
    facts = service.rows(
        "SELECT source->>'chat_id', count(*) FROM memory.facts GROUP BY 1 ORDER BY 1"
    )
    assert facts == sorted({chat: 1 for _, chat in chats[12:]}.items())
    statuses = Counter(r[4] for r in _status(service, org))
    assert statuses == Counter(leased=12, captured=18)
    # Captured chats leave the queue's scan until a new message: polls stay cheap.
    parked = "SELECT count(*) FROM memory.captures WHERE indexed_at = 'infinity'"
    assert service.value(parked) == 18


def test_a_message_indexed_while_a_capture_applies_waits_for_the_next(service, org, dsn):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "I moved to Lisbon", 1)
    [(capture_id, *_)] = _lease(service)
    ops = [{"op": "add", "content": "Lives in Lisbon"}]
    applying, indexing = psycopg.connect(dsn), psycopg.connect(dsn)
    try:
        assert applying.execute(APPLY, (capture_id, Jsonb(ops), None)).fetchall()[0][4] == "saved"
        message = {"id": "m2", "chat_id": "c1", "owner_id": str(owner), "role": "user"}
        message |= {"content": "and I got a dog", "created_at": "2025-03-01T09:02:00Z"}
        with ThreadPoolExecutor(max_workers=1) as pool:
            indexed = pool.submit(
                lambda: indexing.execute(
                    "SELECT memory.index_message(%s, %s)", (org, Jsonb(message))
                )
            )
            _wait_until(
                service,
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                indexing.info.backend_pid,
            )
            applying.commit()  # the capture's watermark is m1: m2 was not leased
            indexed.result()
        indexing.commit()
    finally:
        applying.close()
        indexing.close()
    assert _status(service, org)[0][2:5] == (1, 0, "pending")
    [(_, _, _, _, messages, context)] = _lease(service)
    assert [m["id"] for m in messages] == ["m2"] and [m["id"] for m in context] == ["m1"]


def test_a_capture_applied_twice_changes_nothing_the_second_time(service, org, dsn):
    owner = uuid.uuid4()
    ns = {"owner_id": str(owner)}
    porto = service.value("SELECT memory.save_fact(%s, 'Lives in Porto', NULL, %s)", org, ns)
    cat = service.value("SELECT memory.save_fact(%s, 'Has a cat', NULL, %s)", org, ns)
    _index(service, org, owner, "c1", "m1", "I moved to Lisbon; the cat died; Ana is my sister", 1)
    [(capture_id, *_)] = _lease(service)
    ops = [
        {"op": "add", "content": "Has a sister named Ana"},
        {"op": "supersede", "fact_id": str(porto), "content": "Lives in Lisbon"},
        {"op": "forget", "fact_id": str(cat)},
    ]
    # Two workers apply the same capture at once: the second waits on the
    # first's lock, then finds the lease gone.
    a, b = psycopg.connect(dsn), psycopg.connect(dsn)
    try:
        applied = a.execute(APPLY, (capture_id, Jsonb(ops), "m")).fetchall()
        with ThreadPoolExecutor(max_workers=1) as pool:
            racing = pool.submit(lambda: b.execute(APPLY, (capture_id, Jsonb(ops), "m")))
            _wait_until(
                service,
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                b.info.backend_pid,
            )
            a.commit()
            try:
                racing.result()
                raise AssertionError("the second apply succeeded")
            except psycopg.Error as err:
                assert Failure.of(err) == _conflict(capture_id)
            b.rollback()
    finally:
        a.close()
        b.close()
    assert [(r[1], r[4]) for r in applied] == [
        ("add", "saved"),
        ("supersede", "superseded"),
        ("forget", "forgotten"),
    ]
    facts, captures = _rows(service, "facts"), _rows(service, "captures")
    assert len(facts) == 4
    # And once more, later, on its own: the same error, every byte the same.
    assert service.fails(APPLY, capture_id, ops, "m") == _conflict(capture_id)
    assert service.fails(APPLY, capture_id, [], None) == _conflict(capture_id)
    assert service.value("SELECT memory.fail_capture(%s, 'late')", capture_id) is False
    assert (_rows(service, "facts"), _rows(service, "captures")) == (facts, captures)


def test_a_killed_worker_loses_nothing(service, org, dsn, as_):
    owner = uuid.uuid4()
    for i in range(1, 4):
        _index(service, org, owner, "c1", f"m{i}", f"message {i}", i)
    worker = as_(SERVICE)
    [(lost, *offered)] = worker.rows(CAPTURES, 10, 50)
    ops = [{"op": "add", "content": "Says three things"}]
    # The worker is killed in the middle of capture_facts: nothing commits.
    dying = psycopg.connect(dsn)
    assert dying.execute(APPLY, (lost, Jsonb(ops), None)).fetchall()[0][4] == "saved"
    assert service.value("SELECT pg_terminate_backend(%s, 60000)", dying.info.backend_pid)
    dying.close()
    worker.close()  # and the worker that leased it is gone, without fail_capture
    assert _rows(service, "facts") == []
    assert _lease(service) == []  # the lease still runs
    service.rows("UPDATE memory.captures SET lease_until = clock_timestamp() - interval '1 second'")
    [(again, *reoffered)] = _lease(service)
    assert again != lost and reoffered == offered  # the same chat, messages and context
    assert [m["id"] for m in reoffered[3]] == ["m1", "m2", "m3"]
    before = _rows(service, "captures")
    assert service.fails(APPLY, lost, ops, None) == _conflict(lost)
    assert service.value("SELECT memory.fail_capture(%s, 'stale')", lost) is False
    assert _rows(service, "captures") == before
    [(_, _, fact, _, status)] = service.rows(APPLY, again, ops, None)
    assert status == "saved"
    source = service.value("SELECT memory.get_fact(%s, %s)", org, fact)["source"]
    assert source["message_ids"] == ["m1", "m2", "m3"] and source["capture_id"] == str(again)
    assert _status(service, org)[0][2:5] == (0, 0, "captured")


# ---------------------------------------------------------------- fact ids from elsewhere


def test_fact_ids_from_outside_the_owners_namespace_are_unknown(service, org, member):
    owner, other_org = uuid.uuid4(), uuid.uuid4()
    mine = {"owner_id": str(owner)}

    def save(organization, content, ns):
        return service.value("SELECT memory.save_fact(%s, %s, NULL, %s)", organization, content, ns)

    _, admin = member("memory.read", "memory.manage")
    elsewhere = {
        "another user's": save(org, "Bob's fact", {"owner_id": str(uuid.uuid4())}),
        "the org admin's": admin.value("SELECT memory.save_fact(%s, 'The admin''s fact')", org),
        "the organization's": save(org, "Org fact", {"scope": "organization"}),
        "the owner's project's": save(
            org, "Project fact", {"scope": "project", "project_id": "p1", **mine}
        ),
        "the same owner's in another org": save(other_org, "Elsewhere", mine),
        "another org's": save(other_org, "Theirs", {"owner_id": str(uuid.uuid4())}),
        "a random id": uuid.uuid4(),
    }
    own = save(org, "Lives in Porto", mine)
    gone = save(org, "Had a dog", mine)
    service.value("SELECT memory.forget(%s, %s)", org, gone)
    elsewhere["a forgotten one"] = gone
    before = {name: _fact_row(service, i) for name, i in elsewhere.items()}
    _index(service, org, owner, "c1", "m1", "things", 1)
    [(capture_id, *_)] = _lease(service)
    ops = [{"op": "add", "content": "Has a sister"}]
    for target in elsewhere.values():
        ops.append({"op": "supersede", "fact_id": str(target), "content": "Hijacked"})
        ops.append({"op": "forget", "fact_id": str(target)})
    ops.append({"op": "forget", "fact_id": str(own)})
    rows = service.rows(APPLY, capture_id, ops, None)
    expected = [(1, "add", rows[0][2], None, "saved")]
    for n, target in enumerate(elsewhere.values()):
        expected.append((2 + 2 * n, "supersede", None, target, "unknown_fact"))
        expected.append((3 + 2 * n, "forget", None, target, "unknown_fact"))
    expected.append((len(ops), "forget", None, own, "forgotten"))
    # One answer for all: existing elsewhere reads exactly like not existing.
    assert rows == expected
    assert {name: _fact_row(service, i) for name, i in elsewhere.items()} == before
    assert before["a random id"] is None
    assert service.value("SELECT count(*) FROM memory.facts WHERE content = 'Hijacked'") == 0
    live = service.rows("SELECT content FROM memory.list_facts(%s, %s) ORDER BY content", org, mine)
    assert live == [("Has a sister",)]


# ---------------------------------------------------------------- secrets

# Fake values, made up when the tests run from a fixed seed, so that no
# secret scanner ever finds a key-shaped literal in this repository.
_RNG = random.Random(14)
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits


def fake(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def digits(n: int) -> str:
    return "".join(_RNG.choice(string.digits) for _ in range(n))


def luhn_digit(body: str) -> str:
    total = 0
    for i, d in enumerate(reversed(body)):
        x = int(d) * (2 if i % 2 == 0 else 1)
        total += x - 9 if x > 9 else x
    return str(-total % 10)


def card(prefix: str, length: int, groups: tuple[int, ...], sep: str = " ") -> str:
    """A made-up number that passes Luhn's check, grouped as printed on cards."""
    body = prefix + digits(length - len(prefix) - 1)
    number, out = body + luhn_digit(body), []
    for g in groups:
        out.append(number[:g])
        number = number[g:]
    return sep.join(out)


def b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def pem(kind: str, body: str) -> str:
    dashes = "-" * 5
    return f"{dashes}BEGIN {kind}{dashes}\n{body}{fake(64, B64)}\n{dashes}END {kind}{dashes}"


def aws_secret() -> str:
    """40 characters with both cases and a digit, as AWS makes them."""
    key = fake(40, B64)
    while not (any(c.islower() for c in key) and any(c.isupper() for c in key)) or not any(
        c.isdigit() for c in key
    ):
        key = fake(40, B64)
    return key


SECRETS = [
    f"My OpenAI key is sk-{fake(48)}",
    f"OPENAI_API_KEY=sk-proj-{fake(40, URLSAFE)}T3BlbkFJ{fake(40, URLSAFE)}",
    f"The Anthropic API key is sk-ant-api03-{fake(93, URLSAFE)}AA",
    f"Their AWS access key id is AKIA{fake(16, UPPER)}",
    f"aws_secret_access_key = {aws_secret()}",
    f"The AWS secret key: {aws_secret()}",
    f"GitHub token ghp_{fake(36)}",
    f"gho_{fake(36)} is the GitHub CLI's OAuth token",
    f"Fine-grained token github_pat_11{fake(20, UPPER)}_{fake(59)}",
    f"GitLab personal access token glpat-{fake(20, URLSAFE)}",
    f"Slack bot token xoxb-{digits(12)}-{digits(13)}-{fake(24)}",
    f"Slack user token xoxp-{digits(12)}-{digits(12)}-{digits(13)}-{fake(32, HEX)}",
    f"Stripe live secret key sk_live_{fake(24)}",
    f"restricted Stripe key rk_live_{fake(24)}",
    f"Google Maps API key AIza{fake(35, URLSAFE)}",
    f"Twilio API key SK{fake(32, HEX)}",
    f"Twilio account AC{fake(32, HEX)}, auth token: {fake(32, HEX)}",
    f"SendGrid key SG.{fake(22, URLSAFE)}.{fake(43, URLSAFE)}",
    f"npm publish token npm_{fake(36)}",
    f"PyPI upload token pypi-AgEIcHlwaS5vcmc{fake(60, URLSAFE)}",
    f"Hugging Face token hf_{fake(34, string.ascii_letters)}",
    f"DigitalOcean token dop_v1_{fake(64, HEX)}",
    "Session JWT "
    + ".".join(
        [
            b64url({"alg": "HS256", "typ": "JWT"}),
            b64url({"sub": str(uuid.UUID(int=_RNG.getrandbits(128))), "iat": 1735689600}),
            fake(43, URLSAFE),
        ]
    ),
    pem("RSA PRIVATE KEY", "MIIEowIBAAKCAQEA"),
    pem("EC PRIVATE KEY", "MHcCAQEEI"),
    pem("OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
    pem("PGP PRIVATE KEY BLOCK", "\nlQOYBGXkLd4BCAC"),
    pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    f"Visa card {card('4', 16, (4, 4, 4, 4))}",
    f"Mastercard {card('5', 16, (4, 4, 4, 4), '-')} exp 04/27",
    f"new Mastercard {card('22', 16, (16,))}, call 555 0100 if lost",
    f"Amex {card('37', 15, (4, 6, 5))}",
    f"Discover {card('6011', 16, (4, 4, 4, 4))}",
    f"JCB card {card('35', 16, (4, 4, 4, 4), '-')}",
    f"Diners Club {card('36', 14, (4, 6, 4))}",
    "My password is Tr0ub4dor&3",
    "The user's password is correcthorsebattery",
    "Wi-Fi password: blue-kite-42",
    "router admin pwd=s3cr3t!",
    f"Database URL postgres://app:{fake(16)}@db.internal:5432/app",
    f"Cache at redis://:{fake(20)}@cache.internal:6379/0",
    f"Authorization: Bearer {fake(48, URLSAFE + '.')}",
    f"The Mailgun api_key is key-{fake(32, HEX)}",
    "Their phone unlock PIN is 4821",
]

# Harmless texts that look a little like secrets; each is stored. The choices:
HARMLESS = [
    "My PIN code habit is to change it yearly",  # a PIN, but no number
    "I forgot my password yesterday",
    "The password manager I use is 1Password",
    "My password is stored in 1Password",  # where it is, not what it is
    "Their password must be at least 12 characters long",
    "Password hint: the name of the first cat",  # a hint is not the password
    "Changed the Wi-Fi password last week",
    "Order 112-4567890-1234567 arrived on Monday",
    "Order 4111 1111 1111 1112 arrived",  # 16 digits of a Visa shape, Luhn-invalid
    "The book's ISBN is 978-0-306-40615-7",
    "ISBN 9780306406157 is on the reading list",  # 13 digits, no card begins with 9
    "Phone number +1 415 555 0132",
    "Office phone +44 20 7946 0958",
    "UPS tracking number 1Z999AA10123456784",
    "USPS tracking 9400 1000 0000 0000 0000 00",  # grouped by 4, but 22 digits
    "The phone's IMEI is 490154203237518",  # passes Luhn, but 15 digits starting 4 is no card
    "Born on 1988-04-12, married on 12/06/2015",
    "Upgraded to PostgreSQL 18.4 and pgvector 0.8.1",
    "Deployed commit 3f2c9a1b7e4d5f60a8b9c0d1e2f3a4b5c6d7e8f9",  # hex: one case only
    "The fix is in commit a1b2c3d",
    "Their user id is 550e8400-e29b-41d4-a716-446655440000",
    "Favourite colours are #1e90ff and #fff",
    "Salary goes to IBAN DE89 3704 0044 0532 0130 00",  # an account to pay into, no credential
    "Pays with a Visa card ending in 4242",
    "Bank routing number 021000021",
    "The file checksum is d41d8cd98f00b204e9800998ecf8427e",  # md5: no Twilio prefix
    "Uses scikit-learn, imported as sklearn",
    "Their GitHub handle is ghost_rider",
    "The API key is kept in the team vault",
    "The secret to their sourdough is a long cold proof",
    "Ana was the bearer of good news",
    "Develops against postgres://localhost:5432/app",  # no password in it
    "Their email is ana.silva@example.com",
    "Prefers gpt-4o-mini and claude-sonnet-4-5 for drafts",
    "AWS region eu-west-1, account alias acme-prod",
    "Prefers TypeScriptOverJavaScriptForLargeCodebases as a motto",  # no digit, no key
    "Lucky numbers are 4 8 15 16 23 42",
    "Flight LH 1234 leaves at 07:45 on 2025-05-02",
    "The JWT library they use is PyJWT",
]


def test_the_secret_corpus_is_refused_and_its_look_alikes_stored(service, org):
    assert len(SECRETS) >= 30 and len(HARMLESS) >= 30
    assert len(set(SECRETS)) == len(SECRETS) and len(set(HARMLESS)) == len(HARMLESS)
    owner = uuid.uuid4()
    porto = service.value(
        "SELECT memory.save_fact(%s, 'Lives in Porto', NULL, %s)", org, {"owner_id": str(owner)}
    )
    _index(service, org, owner, "c1", "m1", "a lot", 1)
    [(capture_id, *_)] = _lease(service)
    ops = [{"op": "add", "content": s} for s in SECRETS + HARMLESS]
    ops.append({"op": "supersede", "fact_id": str(porto), "content": SECRETS[0]})
    rows = service.rows(APPLY, capture_id, ops, None)
    got = {text: status for text, (*_, status) in zip(SECRETS + HARMLESS, rows, strict=False)}
    assert [t for t in SECRETS if got[t] != "secret"] == []
    assert [t for t in HARMLESS if got[t] != "saved"] == []
    assert rows[-1][2:] == (None, porto, "secret")  # the fact it would replace stays
    stored = service.rows("SELECT content FROM memory.facts ORDER BY content")
    assert stored == sorted((t,) for t in [*HARMLESS, "Lives in Porto"])

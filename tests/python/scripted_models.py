"""Scripted model servers on 127.0.0.1 that speak the real wire formats.

`ScriptedServer` answers every POST with what its script says and records each
request (path, headers, JSON body). The script is a list of replies, used in
order, or a function of the request body, for answers that depend on which
chat is asked about. Replies are built with the helpers below:

- Anthropic's Messages API (`POST /v1/messages`): `anthropic_tool_use`,
  `anthropic_text`, `anthropic_error`; the SDK's `base_url` is `server.url`.
- OpenAI's chat completions (`POST /v1/chat/completions`): `openai_completion`,
  `openai_error`; the SDK's `base_url` is `server.url + "/v1"`.

The real SDKs talk to them, so what is tested is what the SDKs send and read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pgmemory.extractors import TOOL_NAME

Reply = tuple[int, dict[str, Any]]  # HTTP status, JSON body
Script = list[Reply] | Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]
    raw: str  # the body as sent, for "never appears anywhere" checks

    def prompt(self) -> str:
        """Every text the model was given: system prompt and messages, joined."""
        system = self.body.get("system") or ""
        parts = [system] if isinstance(system, str) else [b["text"] for b in system]
        for message in self.body["messages"]:
            content = message["content"]
            parts.append(content if isinstance(content, str) else json.dumps(content))
        return "\n".join(parts)


class ScriptedServer:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"])).decode()
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = Request(self.path, headers, json.loads(raw), raw)
                status, body = server._reply(request)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def _reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if callable(self.script):
                return self.script(request.body)
            assert self.script, f"no scripted reply left for {request.path}"
            return self.script.pop(0)

    @contextmanager
    def running(self) -> Iterator[ScriptedServer]:
        thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02})
        thread.start()
        try:
            yield self
        finally:
            self._httpd.shutdown()
            self._httpd.server_close()
            thread.join()


@contextmanager
def scripted(script: Script) -> Iterator[ScriptedServer]:
    with ScriptedServer(script).running() as server:
        yield server


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a request (either API)."""
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


# ------------------------------------------------------------------ Anthropic


def anthropic_tool_use(
    tool_input: Any, *, stop_reason: str = "tool_use", name: str = TOOL_NAME
) -> Reply:
    return 200, {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": tool_input}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 30},
    }


def anthropic_text(text: str, *, stop_reason: str = "end_turn") -> Reply:
    return 200, {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 30},
    }


def anthropic_error(status: int, kind: str, message: str) -> Reply:
    return status, {"type": "error", "error": {"type": kind, "message": message}}


# ------------------------------------------------------------------ OpenAI


def openai_completion(content: str | None, *, finish_reason: str = "stop") -> Reply:
    return 200, {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }


def openai_error(status: int, message: str) -> Reply:
    return status, {"error": {"message": message, "type": "server_error", "code": None}}

"""Real components for the adapter tests: tinyproxy processes, each leaving
from its own loopback address, a target site that answers by the address a
request came from, and a provider that speaks the OpenAI, Anthropic and
Gemini formats and answers by the key a request carries. All on 127.x, each
server on its own thread, each proxy killed by its pid."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int) -> None:
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


@dataclass
class Proxy:
    url: str
    exit: str
    pid: int


class Proxies:
    """tinyproxy processes listening on 127.0.0.1, the i-th leaving from 127.0.2.(i+1)."""

    def __init__(self, count: int) -> None:
        tinyproxy = shutil.which("tinyproxy")
        if tinyproxy is None:
            raise RuntimeError("tinyproxy is not on PATH (Debian: apt-get install tinyproxy)")
        self._dir = tempfile.mkdtemp(prefix="repute-adapters-tinyproxy-")
        self.proxies: list[Proxy] = []
        for i in range(count):
            port, exit = free_port(), f"127.0.2.{i + 1}"
            conf = os.path.join(self._dir, f"proxy-{i}.conf")
            with open(conf, "w") as f:
                f.write(
                    f"Port {port}\nListen 127.0.0.1\nBind {exit}\nTimeout 15\nAllow 127.0.0.1\n"
                    "DisableViaHeader Yes\nLogLevel Critical\nMaxClients 32\n"
                )
            proc = subprocess.Popen(
                [tinyproxy, "-d", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            self.proxies.append(Proxy(f"http://127.0.0.1:{port}", exit, proc.pid))
            self._procs = getattr(self, "_procs", []) + [proc]
        for p in self.proxies:
            wait_for_port(int(p.url.rsplit(":", 1)[1]))

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)


class _Server:
    """A threaded HTTP server on 127.0.0.1 with `handler` bound to `self`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        owner = self

        class Bound(handler):  # type: ignore[misc,valid-type]
            world = owner

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Bound)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class Target(_Server):
    """A site that answers by the address a request comes from (a proxy's
    exit): `answers[exit]` if set, else 200 with that address as the body.
    `/bad` is a request the site refuses from anywhere (400). `hits` lists
    (path, exit) in arrival order."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.hits: list[tuple[str, str]] = []
        super().__init__(_TargetHandler)


class _TargetHandler(BaseHTTPRequestHandler):
    world: Target
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        source = self.client_address[0]
        with self.world.lock:
            self.world.hits.append((self.path, source))
        if self.path == "/bad":
            answer = Answer(400, {"content-type": "application/json"}, b'{"error":"bad request"}')
        else:
            answer = self.world.answers.get(source, Answer(200, {}, source.encode()))
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(answer.body)))
        # tinyproxy closes its client's connection after each answer without
        # saying so; said here (it passes it on), a client does not reuse the
        # closed connection and fail the next request on the proxy that carried it.
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(answer.body)


def _openai_error(status: int, message: str, type_: str, code: str | None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _anthropic_error(status: int, type_: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"type": "error", "error": {"type": type_, "message": message}}


def _google_error(status: int, state: str, message: str, *details: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"code": status, "message": message, "status": state, "details": list(details)}}


def _quota_failure(model: str, quota_id: str) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": quota_id, "quotaDimensions": {"location": "global", "model": model}, "quotaValue": "10",
        }],
    }  # fmt: skip


class Provider(_Server):
    """An LLM API in the OpenAI (`/v1/chat/completions`), Anthropic
    (`/v1/messages`) and Gemini (`/v1beta/models/M:generateContent`)
    formats, answering by the key a request carries: `sk-dead` is refused
    (401; Gemini: 400 `API_KEY_INVALID`), `sk-broke` is out of quota
    (Gemini: its per-day quota), `sk-busy` is rate limited for 30 s (429 +
    retry-after; Gemini: the body's `RetryInfo`), any other key answers, the
    model `bad` is a request the API refuses whatever the key (400; Gemini:
    404), and `"stream": true` (Gemini: `:streamGenerateContent?alt=sse`)
    streams the answer as server-sent events. `keys` lists the key of every
    request in arrival order."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        super().__init__(_ProviderHandler)


class _ProviderHandler(BaseHTTPRequestHandler):
    world: Provider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        payload = json.loads(self.rfile.read(length) or b"{}")
        if "/models/" in self.path:
            return self._gemini()
        anthropic = self.path.endswith("/messages")
        key = self.headers.get("x-api-key") if anthropic else self.headers.get("authorization", "")[len("Bearer ") :]
        key = key or ""
        with self.world.lock:
            self.world.keys.append(key)
        error = self._error(key, anthropic)
        if error is None and payload.get("model") == "bad":
            error = (
                _anthropic_error(400, "invalid_request_error", "model: bad is not a model")
                if anthropic
                else _openai_error(400, "The model `bad` does not exist.", "invalid_request_error", None)
            )
        if error is not None:
            status, body = error
            headers = {"retry-after": "30"} if key == "sk-busy" else {}
            return self._json(status, body, headers)
        model = payload.get("model", "m")
        if payload.get("stream"):
            return self._stream(model, anthropic)
        if anthropic:
            body = {
                "id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": f"hello from {key}"}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": 4},
            }  # fmt: skip
        else:
            body = {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"hello from {key}"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }  # fmt: skip
        self._json(200, body, {})

    def _error(self, key: str, anthropic: bool) -> tuple[int, dict[str, Any]] | None:
        if key == "sk-dead":
            if anthropic:
                return _anthropic_error(401, "authentication_error", "invalid x-api-key")
            return _openai_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        if key == "sk-broke":
            if anthropic:
                return _anthropic_error(400, "invalid_request_error", "Your credit balance is too low.")
            return _openai_error(429, "You exceeded your current quota.", "insufficient_quota", "insufficient_quota")
        if key == "sk-busy":
            if anthropic:
                return _anthropic_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit.")
            return _openai_error(429, "Rate limit reached.", "requests", "rate_limit_exceeded")
        return None

    def _gemini(self) -> None:
        """Google's Gemini API: the key in `x-goog-api-key` (or `?key=`),
        the model in the path."""
        url = urlsplit(self.path)
        model, method = url.path.rsplit("/models/", 1)[1].split(":", 1)
        key = self.headers.get("x-goog-api-key") or parse_qs(url.query).get("key", [""])[0]
        with self.world.lock:
            self.world.keys.append(key)
        error = None
        if key == "sk-dead":
            reason = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                      "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}  # fmt: skip
            error = _google_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", reason)
        elif key in ("sk-broke", "sk-busy"):
            per = "Day" if key == "sk-broke" else "Minute"
            details = [_quota_failure(model, f"GenerateRequestsPer{per}PerProjectPerModel-FreeTier")]
            if key == "sk-busy":
                details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"})
            message = "You exceeded your current quota, please check your plan and billing details."
            error = _google_error(429, "RESOURCE_EXHAUSTED", message, *details)
        elif model == "bad":
            message = "models/bad is not found for API version v1beta, or is not supported for generateContent."
            error = _google_error(404, "NOT_FOUND", message)
        if error is not None:
            return self._json(*error, {})
        chunks = ["hel", "lo"] if method.startswith("stream") else [f"hello from {key}"]
        bodies = [
            {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP",
                             "index": 0}],
             "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7},
             "modelVersion": model, "responseId": "r1"}
            for text in chunks
        ]  # fmt: skip
        if not method.startswith("stream"):
            return self._json(200, bodies[0], {})
        data = "".join(f"data: {json.dumps(b)}\r\n\r\n" for b in bodies).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, model: str, anthropic: bool) -> None:
        if anthropic:
            events = [
                ("message_start", {"type": "message_start", "message": {
                    "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 0}}}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": "hel"}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": "lo"}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                   "stop_sequence": None}, "usage": {"output_tokens": 2}}),
                ("message_stop", {"type": "message_stop"}),
            ]  # fmt: skip
            lines = [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events]
        else:
            chunks = [{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
                       "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
                      for part in ("hel", "lo")]  # fmt: skip
            lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
        data = "".join(lines).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

"""An OpenAI-compatible chat server on 127.0.0.1 for tests: real HTTP, scripted answers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackLLM:
    """Serves /v1/chat/completions; answers with `answer(messages)`, records every request."""

    def __init__(self, answer, prompt_tokens: int = 1000, completion_tokens: int = 500, rate_limited: int = 0):
        """rate_limited: how many requests are answered 429 before the server starts answering."""
        self.answer, self.requests, self.rate_limited = answer, [], rate_limited
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if len(owner.requests) <= owner.rate_limited:
                    error = json.dumps({"error": {"message": "rate limited", "type": "rate_limit_error"}}).encode()
                    self.send_response(429)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error)
                    return
                payload = json.dumps(
                    {
                        "id": f"chatcmpl-{len(owner.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": owner.answer(body["messages"])},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def model(self, **settings):
        """A LiteLLMModel pointed at this server, its key read from LOOPBACK_KEY."""
        from harness.llm.client import LiteLLMModel

        defaults = {"name": "openai/loopback-coder", "api_base": self.api_base, "api_key_env": "LOOPBACK_KEY"}
        return LiteLLMModel(**{**defaults, **settings})

    def __enter__(self) -> LoopbackLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

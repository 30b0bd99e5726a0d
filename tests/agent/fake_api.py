"""A local HTTP server (127.0.0.1 only) that answers in the OpenAI and Anthropic wire formats.

The real `openai` and `anthropic` SDKs are pointed at it with `base_url`, so their own code paths run:
request building, response parsing into SDK objects, tool-call and usage fields, and the mapping of HTTP
errors to their exception classes.

RECORDED-SHAPE RESPONSES: the bodies below follow the shape of real responses of the two APIs (field
names, nesting, error envelopes and messages as the services return them); ids, texts and token figures
are made up for the tests. Nothing here is a model: a `responder` decides each answer from the request.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# ------------------------------------------------------------------ recorded-shape bodies: OpenAI


def openai_completion(content=None, tool_calls=(), *, model="gpt-4o-mini-2024-07-18", prompt_tokens=812,
                      completion_tokens=24, finish_reason=None) -> dict:
    """A chat.completion object as POST /v1/chat/completions returns it."""
    message = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}Xk2f9QeLw8", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args) if not isinstance(args, str) else args}}
            for i, (name, args) in enumerate(tool_calls)]
    return {
        "id": "chatcmpl-AzT3rRkq7yBv0pLw", "object": "chat.completion", "created": 1764547200, "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens,
                  "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                "accepted_prediction_tokens": 0,
                                                "rejected_prediction_tokens": 0}},
        "service_tier": "default", "system_fingerprint": "fp_0ba0d124f1",
    }


OPENAI_401 = {"error": {"message": "Incorrect API key provided: sk-bad. You can find your API key at "
                                   "https://platform.openai.com/account/api-keys.",
                        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
OPENAI_404_MODEL = {"error": {"message": "The model `gpt-nope` does not exist or you do not have access to it.",
                              "type": "invalid_request_error", "param": None, "code": "model_not_found"}}
OPENAI_429 = {"error": {"message": "Rate limit reached for gpt-4o-mini in organization org-test on requests "
                                   "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
                        "type": "requests", "param": None, "code": "rate_limit_exceeded"}}

# ------------------------------------------------------------------ recorded-shape bodies: Anthropic


def anthropic_message(text=None, tool_uses=(), *, model="claude-sonnet-4-5-20250929", input_tokens=1024,
                      output_tokens=57, stop_reason=None) -> dict:
    """A Message object as POST /v1/messages returns it."""
    content = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": f"toolu_01{i}A9bXq7LmT", "name": name, "input": args}
                for i, (name, args) in enumerate(tool_uses)]
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "service_tier": "standard"},
    }


ANTHROPIC_401 = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                 "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}
ANTHROPIC_404_MODEL = {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"},
                       "request_id": "req_011CSHoEeqs5C35K2UUqR7Fz"}
ANTHROPIC_429 = {"type": "error",
                 "error": {"type": "rate_limit_error",
                           "message": "This request would exceed the rate limit for your organization of 50 "
                                      "input tokens per minute."},
                 "request_id": "req_011CSHoEeqs5C35K2UUqR7G0"}


# ------------------------------------------------------------------ recorded bodies: llama-cpp-python's server

# Recorded on 2026-12-02 from llama-cpp-python 0.3.36's server (`--chat_format chatml-function-calling`):
# the answer to an assistant tool-call message sent with "content": None (a 500 although the request was at
# fault), to the same message without "content" (its chat template fails), and to tool_choice "required"
# (an assertion in the server, with no message). The traceback path at the end is shortened.
LLAMA_CPP_500_CONTENT_NONE = {"error": {"message": (
    "7 validation errors:\n"
    "  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role'), "
    "'msg': \"Input should be 'system'\", 'input': 'assistant', 'ctx': {'expected': \"'system'\"}}\n"
    "  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestUserMessage', 'role'), "
    "'msg': \"Input should be 'user'\", 'input': 'assistant', 'ctx': {'expected': \"'user'\"}}\n"
    "  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', "
    "'content'), 'msg': 'Input should be a valid string', 'input': None}\n"
    "  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'role'), "
    "'msg': \"Input should be 'tool'\", 'input': 'assistant', 'ctx': {'expected': \"'tool'\"}}\n"
    "  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'tool_call_id'), "
    "'msg': 'Field required', 'input': {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'call_1', "
    "'type': 'function', 'function': {'name': 'read_skill', 'arguments': '{\"skill_name\": \"d\"}'}}]}}\n"
    "  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestFunctionMessage', "
    "'role'), 'msg': \"Input should be 'function'\", 'input': 'assistant', 'ctx': {'expected': \"'function'\"}}\n"
    "  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestFunctionMessage', 'name'), "
    "'msg': 'Field required', 'input': {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'call_1', "
    "'type': 'function', 'function': {'name': 'read_skill', 'arguments': '{\"skill_name\": \"d\"}'}}]}}\n"
    "\n  File \".../llama_cpp/server/app.py\", line 376, in create_chat_completion\n"
    "    POST /v1/chat/completions"), "type": "internal_server_error", "param": None, "code": None}}
LLAMA_CPP_500_CONTENT_MISSING = {"error": {"message": "'dict object' has no attribute 'content'",
                                           "type": "internal_server_error", "param": None, "code": None}}
LLAMA_CPP_500_NO_MESSAGE = {"error": {"message": "", "type": "internal_server_error", "param": None, "code": None}}


# ------------------------------------------------------------------ the server


class FakeAPI:
    """`with FakeAPI(responder) as api:` serves on 127.0.0.1:<free port>; `api.requests` holds every call.

    `responder(path, body)` returns `(status, json_body)`. Threads: one per connection, daemon; the server
    stops at the end of the block. At most `max_requests` are answered (then 500), so a runaway loop ends.
    """

    def __init__(self, responder, max_requests: int = 500):
        self.responder = responder
        self.requests: list[dict] = []
        self.max_requests = max_requests
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw or b"{}")
                with api._lock:
                    api.requests.append({"path": self.path, "body": body, "headers": {k.lower(): v for k, v in self.headers.items()}})
                    over = len(api.requests) > api.max_requests
                status, payload = (500, {"error": {"message": "too many requests in a test"}}) if over else \
                    api.responder(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("retry-after", "0")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.timeout = 5
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def openai_client(api: FakeAPI, key: str = "sk-test"):
    from openai import OpenAI

    return OpenAI(api_key=key, base_url=api.url + "/v1", max_retries=0, timeout=10)


def anthropic_client(api: FakeAPI, key: str = "sk-ant-test"):
    from anthropic import Anthropic

    return Anthropic(api_key=key, base_url=api.url, max_retries=0, timeout=10)


def last_user_text(body: dict) -> str:
    """The text of the last user message in a request body of either API (tool results skipped)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def has_tool_results(body: dict) -> bool:
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            return True
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                             for b in content):
            return True
    return False

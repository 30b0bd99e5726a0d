"""A chat client's failure as one line that says what to do (`ClientError`, built by `client_error` from
whatever the SDK raised), and `AgentInterrupted`, the Ctrl-C that keeps the transcript so far."""

from __future__ import annotations

import ast
import json
import re

from ..errors import SkillError
from .transcript import Transcript


class ClientError(SkillError):
    """The chat client failed: bad API key, rate limit, unknown model, no connection, ...

    The message is one line that says what happened and what to do. `kind` is one of auth, permission,
    not_found, rate_limit, bad_request, server, timeout, connection, client; `status` is the HTTP status
    when there was one. `transcript` is the conversation up to the failure (set by `run_agent`).
    """

    FATAL = ("auth", "permission", "not_found", "bad_request")  # retrying the same call cannot help

    def __init__(self, message: str, kind: str = "client", status: int | None = None):
        super().__init__(message)
        self.kind, self.status = kind, status
        self.transcript = None


class AgentInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_agent`: a KeyboardInterrupt (code that does not look for it still stops) that
    carries the transcript so far (`stop_reason` INTERRUPTED) and says where the loop was."""

    def __init__(self, transcript: Transcript, doing: str = ""):
        super().__init__(f"interrupted after {transcript.seconds:.1f} s")
        self.transcript = transcript
        self.doing = doing

    def line(self) -> str:
        """One line for the user: 'interrupted after 4.0 s, during the model call of turn 2; ...'."""
        t = self.transcript
        where = f", {self.doing}" if self.doing else ""
        return (f"interrupted after {t.seconds:.1f} s{where}; kept {t.turns} turn(s) and "
                f"{len(t.tool_calls)} tool call(s)")


_HINTS = {
    "auth": ("authentication failed", ("check the API key the client was created with (api_key=, or "
             "OPENAI_API_KEY / ANTHROPIC_API_KEY)")),
    "permission": ("permission denied", "this key may not use that model or endpoint"),
    "not_found": ("not found", "check the model name (--model / model=) and the client's base_url"),
    "rate_limit": ("rate limit or quota exceeded", ("wait and try again, lower parallel=, or check the "
                   "account's quota")),
    "bad_request": ("request refused", "the provider did not accept the request; the detail says why"),
    "server": ("server error", "the provider failed; try again later"),
    "timeout": ("timed out", "the API did not answer in time; try again, or raise the client's timeout"),
    "connection": ("cannot connect", "check the network and the client's base_url"),
    "client": ("the client failed", "see the detail"),
}


def client_error(exc: BaseException, model: str = "", style: str = "", options: dict | None = None) -> ClientError:
    """A `ClientError` for an exception raised by a chat client (no SDK imported: duck-typed).

    `options` are the request options that were sent, named in the hint when the server's answer suggests
    the request itself was the problem. A server error whose detail says which field of the request it
    could not take (a validation error, a template that met a field it did not expect) is our bad request,
    not a server fault: kind "bad_request", with the field named first so the one-line cap never cuts it.
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(getattr(exc, "response", None), "status_code", None)
    status = status if isinstance(status, int) else None
    cls = type(exc).__name__
    if status == 401 or cls == "AuthenticationError":
        kind = "auth"
    elif status == 403 or cls == "PermissionDeniedError":
        kind = "permission"
    elif status == 404 or cls == "NotFoundError":
        kind = "not_found"
    elif status == 429 or cls == "RateLimitError":
        kind = "rate_limit"
    elif status in (400, 413, 422) or cls in ("BadRequestError", "UnprocessableEntityError"):
        kind = "bad_request"
    elif (status or 0) >= 500 or cls in ("InternalServerError", "OverloadedError"):
        kind = "server"
    elif "Timeout" in cls:
        kind = "timeout"
    elif "Connection" in cls:
        kind = "connection"
    else:
        kind = "client"
    raw = _error_detail(exc)
    fields = request_fields(exc, raw) if kind in ("bad_request", "server") else ""
    detail = fields or raw.strip().rstrip(".")
    sent = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in (options or {}).items())
    what, hint = _HINTS[kind]
    if kind == "server" and fields:  # a 500 that names a field of our request: ours, not the server's fault
        kind = "bad_request"
        what = "request refused"
        hint = "a 500, but caused by the request, not a server fault"
    if kind == "bad_request":
        hint += (f"; check the request options ({sent}), or report it to ipyskills if they are the defaults"
                 if sent else "")
    elif kind == "server" and not detail and sent:
        hint = (f"the server failed without saying why; if it fails the same way again, it may not handle "
                f"one of the request options ({sent})")
    provider = style or "chat"
    code = f" ({status})" if status else ""
    subject = f"model {model!r} " if kind == "not_found" and model else ""
    line = f"{provider} API: {subject}{what}{code}: {detail}; {hint}" if detail else \
        f"{provider} API: {subject}{what}{code} ({cls}); {hint}"
    return ClientError(_one_line(line, 600), kind, status)


def request_fields(exc: BaseException, detail: str) -> str:
    """The fields of our request that a server's error names, as 'messages[2].content: Input should be a
    valid string'; "" when it names none. Reads FastAPI's 422 body (`detail`: a list of `loc`/`msg`), the
    same errors as text (llama-cpp-python's 500 "7 validation errors: {'type': ..., 'loc': (...), ...}"),
    and a chat template's "'dict object' has no attribute 'content'"."""
    body = getattr(exc, "body", None)
    errors = body.get("detail") if isinstance(body, dict) and isinstance(body.get("detail"), list) else []
    if not errors:
        for line in detail.splitlines():
            line = line.strip()
            if line.startswith("{") and "'loc'" in line:
                try:
                    errors.append(ast.literal_eval(line))
                except (ValueError, SyntaxError):
                    found = re.search(r"'loc': \(([^)]*)\).*?'msg': (['\"])(.*?)\2", line)
                    if found:
                        errors.append({"loc": [w.strip(" '") for w in found.group(1).split(",")],
                                       "msg": found.group(3)})
    errors = [e for e in errors if isinstance(e, dict) and isinstance(e.get("loc"), (list, tuple))]
    # A union of message types: each type that failed on its role literal was not the one meant.
    wrong = {_member(e["loc"]) for e in errors if e.get("type") == "literal_error" and e["loc"][-1] == "role"}
    meant = [e for e in errors if _member(e["loc"]) not in wrong - {None}] or errors
    named = [f"{_path(e['loc'])}: {e.get('msg', '')}".rstrip(": ") for e in meant]
    if named:
        more = len(errors) - 1
        return named[0] + (f" (and {more} more validation error(s))" if more else "")
    found = re.search(r"has no attribute '(\w+)'", detail)
    if found:
        return f"{found.group(1)}: the server's template found no {found.group(1)!r} where it needed one"
    return ""


def _member(loc) -> str | None:
    """The union member a validation error is about (a CamelCase segment), if any."""
    return next((str(part) for part in loc if isinstance(part, str) and part[:1].isupper()), None)


def _path(loc) -> str:
    """('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content') -> messages[2].content"""
    out = ""
    for part in loc:
        if part == "body" and not out:
            continue
        if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            out += f"[{part}]"
        elif isinstance(part, str) and not part[:1].isupper():
            out += f".{part}" if out else part
    return out or "the request"


def _error_detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if isinstance(body.get("detail"), str):
            return body["detail"]
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def _one_line(text: str, cap: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= cap else text[:cap - 1] + "…"

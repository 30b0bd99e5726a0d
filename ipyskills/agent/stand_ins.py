"""Deterministic stand-ins for a chat model, for demos and tests (they are not models): `ScriptedClient`
replays fixed steps; `MatchingClient` picks the skill whose description shares the most words with the
request."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

from ..errors import ConfigError, SkillError
from .transports import STYLES


class ScriptedClient:
    """A deterministic stand-in for a chat model, for demos and tests. It is NOT a model.

    It ignores the conversation and returns the scripted steps in order, one per create() call. A step is
    a string (a final text answer) or a list of tool calls, each `(tool_name, arguments)` where
    `arguments` is a dict or raw JSON text (to show how malformed arguments are handled). `style` picks
    the client shape it imitates ("openai": `client.chat.completions.create`; "anthropic":
    `client.messages.create`); `as_dicts=True` returns plain dicts instead of attribute objects.
    Every create() call's keyword arguments are kept in `requests`.
    """

    def __init__(self, steps: list, style: str = "openai", as_dicts: bool = False):
        if style not in STYLES:
            raise ConfigError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
        self.steps = list(steps)
        self.style = style
        self.as_dicts = as_dicts
        self.requests: list[dict] = []
        create = SimpleNamespace(create=self._create)
        if style == "openai":
            self.chat = SimpleNamespace(completions=create)
        else:
            self.messages = create

    def _create(self, **kwargs):
        self.requests.append(_snapshot(kwargs))
        n = len(self.requests)
        if n > len(self.steps):
            raise SkillError(f"ScriptedClient ran out of steps: it was called {n} times but has "
                             f"{len(self.steps)} scripted step(s); add steps or lower max_turns")
        step = self.steps[n - 1]
        response = self._openai(step, n) if self.style == "openai" else self._anthropic(step, n)
        return response if self.as_dicts else _objects(response)

    @staticmethod
    def _calls(step) -> list[tuple[str, Any]]:
        return [] if isinstance(step, str) else [(name, args) for name, args in step]

    def _openai(self, step, n: int) -> dict:
        calls = self._calls(step)
        message = {"role": "assistant", "content": step if isinstance(step, str) else None}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": name,
                              "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for i, (name, args) in enumerate(calls)
            ]
        return {"id": f"scripted-{n}", "object": "chat.completion",
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}]}

    def _anthropic(self, step, n: int) -> dict:
        calls = self._calls(step)
        content = [{"type": "text", "text": step}] if isinstance(step, str) else []
        content += [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                    for i, (name, args) in enumerate(calls)]
        return {"id": f"scripted-{n}", "type": "message", "role": "assistant", "content": content,
                "stop_reason": "tool_use" if calls else "end_turn"}


def _objects(value):
    """Plain dicts as attribute objects, the way SDK responses look (a tool_use `input` stays a dict)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: v if k == "input" else _objects(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_objects(v) for v in value]
    return value


def _snapshot(kwargs: dict) -> dict:
    # The loop keeps appending to its message list; keep what was sent at the time.
    return json.loads(json.dumps(kwargs, default=str))


# ----------------------------------------------------------------------------------- matching client

_WORD = re.compile(r"[a-z][a-z0-9]+")
_STOP = frozenset([
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "has",
    "have", "how", "i", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please",
    "that", "the", "their", "them", "then", "these", "this", "those", "to", "use", "used", "user",
    "uses", "using", "was", "what", "when", "where", "which", "who", "why", "will", "with", "would",
    "you", "your", "wants", "want", "asks", "ask",
])


def _words(text: str) -> set[str]:
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP or len(word) < 3:
            continue
        for suffix in ("ing", "es", "ed", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 4:
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out


_CATALOG_ENTRY = re.compile(r"<name>(.*?)</name>\s*<description>(.*?)</description>", re.DOTALL)


class MatchingClient(ScriptedClient):
    """A deterministic stand-in for a chat model that picks skills by shared words. It is NOT a model.

    On the first turn it reads the `<available_skills>` catalog in the system prompt and the user's last
    message, and calls read_skill for the skill whose description shares the most content words with the
    message (at least `min_shared`); otherwise it answers in text. After a tool result it answers
    "Done." Like a model, it reacts to the description text, so description variants give different
    trigger rates in an eval; unlike a model, it understands nothing. For demos and tests without an API
    key. `requests` keeps every call's keyword arguments.
    """

    def __init__(self, style: str = "openai", min_shared: int = 2, as_dicts: bool = False):
        super().__init__([], style=style, as_dicts=as_dicts)
        self.min_shared = min_shared

    def choose(self, system: str, message: str) -> str | None:
        """The skill this stand-in would load for `message` under the catalog in `system` (None = none)."""
        asked = _words(message)
        best, best_score = None, 0
        for name, description in _CATALOG_ENTRY.findall(system or ""):
            score = len(asked & _words(description))
            if score > best_score:
                best, best_score = name.strip(), score
        return best if best_score >= self.min_shared else None

    def _create(self, **kwargs):
        self.requests.append(_snapshot(kwargs))
        n = len(self.requests)
        messages = kwargs.get("messages") or []
        system = kwargs.get("system") or next(
            (m.get("content") for m in messages if m.get("role") == "system"), "")
        last = messages[-1] if messages else {}
        content = last.get("content")
        if last.get("role") == "user" and isinstance(content, str):
            skill = self.choose(system if isinstance(system, str) else "", content) if kwargs.get("tools") else None
            step = [("read_skill", {"skill_name": skill})] if skill else "No skill needed for this."
        else:
            step = "Done."
        response = self._openai(step, n) if self.style == "openai" else self._anthropic(step, n)
        return response if self.as_dicts else _objects(response)

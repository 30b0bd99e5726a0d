"""The agent loop, the trigger eval and the budget with the REAL openai and anthropic SDKs.

The SDKs talk HTTP to a local server on 127.0.0.1 (tests/agent/fake_api.py) that answers with
recorded-shape responses of each API, so the SDKs' own request building, response parsing (tool calls,
usage) and error classes run. No model is involved and no traffic leaves the machine. Streaming is not
used by ipyskills, so it is not exercised here.
"""

from __future__ import annotations

import json

import pytest

from ipyskills.agent.loop import ERROR, ClientError, run_agent
from ipyskills.agent.prompt_lab.budget import skill_budget
from ipyskills.agent.prompt_lab.trigger_eval import eval_trigger

from .fake_api import (
    ANTHROPIC_401,
    ANTHROPIC_404_MODEL,
    ANTHROPIC_429,
    OPENAI_401,
    OPENAI_404_MODEL,
    OPENAI_429,
    FakeAPI,
    anthropic_client,
    anthropic_message,
    has_tool_results,
    last_user_text,
    openai_client,
    openai_completion,
)

pytest.importorskip("openai")
pytest.importorskip("anthropic")

READ = ("read_skill", {"skill_name": "data-tool"})
RESOURCE = ("read_skill", {"skill_name": "data-tool", "file_path": "references/guide.md"})


def test_openai_sdk_tool_calls_usage_and_final_answer(reg):
    replies = iter([
        openai_completion(tool_calls=[READ], prompt_tokens=900, completion_tokens=20),
        openai_completion(tool_calls=[RESOURCE], prompt_tokens=1300, completion_tokens=31),
        openai_completion("Use --to csv.", prompt_tokens=1500, completion_tokens=8),
    ])
    with FakeAPI(lambda path, body: (200, next(replies))) as api:
        events = []
        transcript = run_agent(openai_client(api), reg.for_agent(), "How do I get CSV?", model="gpt-4o-mini",
                               on_event=lambda kind, t: events.append(kind))
    assert [r["path"] for r in api.requests] == ["/v1/chat/completions"] * 3
    first = api.requests[0]["body"]
    assert first["model"] == "gpt-4o-mini" and first["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in first["tools"]} == {"read_skill", "execute_skill_script"}
    assert api.requests[0]["headers"]["authorization"] == "Bearer sk-test"
    # The SDK parsed the tool calls; the loop sent the results back as tool messages.
    second = api.requests[1]["body"]["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["content"].startswith('<skill_content name="data-tool"')
    assert transcript.final == "Use --to csv." and transcript.stop_reason == "answered"
    assert [(s.usage.input_tokens, s.usage.output_tokens) for s in transcript.steps] == [(900, 20), (1300, 31),
                                                                                          (1500, 8)]
    assert transcript.usage.input_tokens == 3700 and transcript.steps[0].usage.raw["total_tokens"] == 920
    assert transcript.activated == [("data-tool", 3)]
    assert [c.level for c in transcript.tool_calls] == [2, 3]
    assert events[0] == "start" and events[-1] == "done" and events.count("model") == 3
    assert all(s.seconds >= 0 for s in transcript.steps) and transcript.seconds > 0


def test_anthropic_sdk_tool_use_blocks_and_usage(reg):
    def respond(path, body):
        if has_tool_results(body):
            return 200, anthropic_message("The guide says: use --to csv.", input_tokens=2048, output_tokens=12)
        return 200, anthropic_message("Let me load the skill.", [READ], input_tokens=1024, output_tokens=57)

    with FakeAPI(respond) as api:
        transcript = run_agent(anthropic_client(api), reg.for_agent(), "CSV?", model="claude-test-model",
                               max_tokens=512)
    body = api.requests[0]["body"]
    assert api.requests[0]["path"] == "/v1/messages" and body["max_tokens"] == 512
    assert body["system"].startswith(transcript.system[:40]) and body["tools"][0]["name"] == "read_skill"
    headers = api.requests[0]["headers"]
    assert "sk-ant-test" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    results = api.requests[1]["body"]["messages"][-1]["content"]
    assert results[0]["type"] == "tool_result" and results[0]["is_error"] is False
    assert transcript.steps[0].text == "Let me load the skill." and transcript.steps[0].finish_reason == "tool_use"
    assert [(s.usage.input_tokens, s.usage.output_tokens) for s in transcript.steps] == [(1024, 57), (2048, 12)]
    assert transcript.final == "The guide says: use --to csv."


@pytest.mark.parametrize("style, status, body, kind, words", [
    ("openai", 401, OPENAI_401, "auth", "Incorrect API key provided"),
    ("openai", 404, OPENAI_404_MODEL, "not_found", "does not exist"),
    ("openai", 429, OPENAI_429, "rate_limit", "Rate limit reached"),
    ("anthropic", 401, ANTHROPIC_401, "auth", "invalid x-api-key"),
    ("anthropic", 404, ANTHROPIC_404_MODEL, "not_found", "model: claude-nope"),
    ("anthropic", 429, ANTHROPIC_429, "rate_limit", "exceed the rate limit"),
])
def test_sdk_errors_become_one_line_client_errors(reg, style, status, body, kind, words):
    with FakeAPI(lambda path, b: (status, body)) as api:
        client = openai_client(api) if style == "openai" else anthropic_client(api)
        with pytest.raises(ClientError) as info:
            run_agent(client, reg, "hi", model="gpt-nope" if style == "openai" else "claude-nope")
    exc = info.value
    assert exc.kind == kind and exc.status == status
    message = str(exc)
    assert "\n" not in message and words in message and f"({status})" in message
    assert message.startswith(f"{style} API: ")
    if kind == "not_found":
        assert "check the model name" in message
    if kind == "auth":
        assert "API key" in message
    assert exc.transcript.stop_reason == ERROR and exc.transcript.error == message
    assert exc.transcript.turns == 0 and not exc.transcript.running


def test_a_server_that_is_not_there_is_a_connection_error(reg):
    from openai import OpenAI

    with FakeAPI(lambda p, b: (200, {})) as api:
        url = api.url
    client = OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0, timeout=2)
    with pytest.raises(ClientError) as info:
        run_agent(client, reg, "hi", model="m")
    assert info.value.kind == "connection" and "base_url" in str(info.value)


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_trigger_eval_with_the_real_sdks_in_parallel(reg, style):
    """The responder loads data-tool for queries that mention CSV; usage sums over the runs."""
    def respond(path, body):
        wants = "csv" in last_user_text(body).lower() and "data-tool" in (
            body.get("system") or body["messages"][0]["content"])
        if style == "openai":
            return 200, openai_completion(None if wants else "No.", [READ] if wants else [],
                                          prompt_tokens=700, completion_tokens=10)
        return 200, anthropic_message(None if wants else "No.", [READ] if wants else [], input_tokens=700,
                                      output_tokens=10)

    queries = [("Turn this JSON into CSV", True), ("Make a CSV of my data", True), ("Tell me a joke", False)]
    with FakeAPI(respond) as api:
        client = openai_client(api) if style == "openai" else anthropic_client(api)
        report = eval_trigger(reg, "data-tool", queries, client=client, model="m", runs=3, parallel=4,
                              descriptions=["Handles data."])
    assert len(api.requests) == 18 and report.done == 18
    for variant in report.variants:
        assert (variant.precision, variant.recall, variant.accuracy) == (1.0, 1.0, 1.0)
        assert variant.input_tokens == 700 * 9 and variant.output_tokens == 10 * 9
    # The variant's text went to the model in place of the description; SKILL.md was not touched.
    systems = {r["body"].get("system") or r["body"]["messages"][0]["content"] for r in api.requests}
    assert any("<description>Handles data.</description>" in s for s in systems)
    assert "Handles data." not in (reg.get("data-tool").skill_md.read_text())


def test_trigger_eval_stops_on_a_bad_key_and_says_so(reg):
    with FakeAPI(lambda p, b: (401, OPENAI_401)) as api:
        report = eval_trigger(reg, "data-tool", [("csv", True)] * 5, client=openai_client(api, "sk-bad"),
                              model="m", runs=4, parallel=2)
    assert report.interrupted and "Incorrect API key" in report.error
    assert len(api.requests) < 20  # the remaining runs were not sent


def test_trigger_eval_counts_rate_limited_runs_as_errors(reg):
    count = {"n": 0}

    def respond(path, body):
        count["n"] += 1
        return (429, OPENAI_429) if count["n"] % 2 else (200, openai_completion(tool_calls=[READ]))

    with FakeAPI(respond) as api:
        report = eval_trigger(reg, "data-tool", [("csv please", True)], client=openai_client(api), model="m",
                              runs=4, parallel=1)
    q = report.variants[0].queries[0]
    assert (q.errors, q.runs, q.triggered) == (2, 2, 2) and not report.interrupted


def test_budget_uses_anthropics_token_counter(reg):
    def respond(path, body):
        assert path == "/v1/messages/count_tokens"
        text = body["messages"][0]["content"]
        return 200, {"input_tokens": 7 + len(text.split())}  # recorded shape: {"input_tokens": N}

    with FakeAPI(respond) as api:
        report = skill_budget(reg, "data-tool", client=anthropic_client(api), model="claude-test-model")
    assert "count_tokens" in report.method and api.requests
    skill = report.skills[0]
    assert skill.level2_tokens == 7 + len(str(reg.load("data-tool")).split())
    assert json.loads(json.dumps(report.table()))[0]["skill"] == "data-tool"


def test_budget_without_a_counter_says_it_estimates(reg):
    from openai import OpenAI

    report = skill_budget(reg, client=OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1"), model="m")
    assert report.method.startswith("estimate: characters / 4")
    skill = next(s for s in report.skills if s.name == "data-tool")
    assert skill.level2_tokens == (skill.level2_chars + 3) // 4

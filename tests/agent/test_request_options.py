"""What the loop and the eval send to OpenAI-compatible servers, and how they report what came back.

The server is tests/agent/fake_api.py driven through the REAL openai SDK, with a responder that behaves
the way llama-cpp-python's server (0.3, `--chat_format chatml-function-calling`) was seen to behave: a 500
for an assistant message whose content is None or missing, tools ignored without `tool_choice`. The real
server itself runs in tests/notebook/test_nb_local_model.py. Nothing here is a model.
"""

from __future__ import annotations

import pytest

from ipyskills.agent.loop import (
    ANSWERED,
    EMPTY_REPLY,
    MAX_TURNS,
    STREAM_REFUSED,
    ClientError,
    ScriptedClient,
    request_options,
    run_agent,
)
from ipyskills.agent.prompt_lab.trigger_eval import eval_trigger
from ipyskills.errors import ConfigError

from .fake_api import (
    LLAMA_CPP_500_CONTENT_MISSING,
    LLAMA_CPP_500_CONTENT_NONE,
    LLAMA_CPP_500_NO_MESSAGE,
    FakeAPI,
    openai_client,
    openai_completion,
)

READ = ("read_skill", {"skill_name": "data-tool"})
QUERIES = [("Convert this JSON data to CSV", True), ("What time is it?", False)]


def llama_cpp_like(path, body):
    """Refuses what llama-cpp-python's server refuses; calls read_skill only when tool_choice is sent."""
    for message in body["messages"]:
        if message["role"] == "assistant" and "content" not in message:
            return 500, LLAMA_CPP_500_CONTENT_MISSING
        if message["role"] == "assistant" and message["content"] is None:
            return 500, LLAMA_CPP_500_CONTENT_NONE
    if body.get("tool_choice") == "required":
        return 500, LLAMA_CPP_500_NO_MESSAGE
    if any(m["role"] == "tool" for m in body["messages"]):
        return 200, openai_completion("The guide says CSV.", prompt_tokens=1500, completion_tokens=9)
    if body.get("tools") and body.get("tool_choice"):
        return 200, openai_completion(None, [READ], prompt_tokens=900, completion_tokens=20)
    return 200, openai_completion("I cannot use tools.", prompt_tokens=900, completion_tokens=7)


def test_a_tool_call_turn_goes_back_with_empty_content_and_the_second_turn_is_accepted(reg):
    with FakeAPI(llama_cpp_like) as api:  # tool_choice given: this test is about the message shapes alone
        transcript = run_agent(openai_client(api), reg.for_agent(), "CSV?", model="local", tool_choice="auto")
    assert transcript.stop_reason == ANSWERED and transcript.final == "The guide says CSV."
    assert transcript.turns == 2 and [c.name for c in transcript.tool_calls] == ["read_skill"]
    second = api.requests[1]["body"]["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "read_skill"
    tool = second[-1]
    assert tool == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"],
                    "content": transcript.tool_calls[0].result.text}


def test_an_output_cap_and_tool_choice_auto_go_with_every_openai_call(reg):
    with FakeAPI(llama_cpp_like) as api:
        run_agent(openai_client(api), reg, "CSV?", model="local")
        report = eval_trigger(reg, "data-tool", QUERIES, client=openai_client(api), model="local", runs=1)
    bodies = [r["body"] for r in api.requests]
    assert [(b["max_tokens"], b["tool_choice"]) for b in bodies[:2]] == [(4096, "auto")] * 2
    assert [(b["max_tokens"], b["tool_choice"]) for b in bodies[2:]] == [(1024, "auto")] * 2
    # With tool_choice sent, this server passes the tools on: the eval sees the calls.
    assert report.variants[0].recall == 1.0 and report.options == {"max_tokens": 1024, "tool_choice": "auto"}
    assert "request options: max_tokens=1024, tool_choice=auto" in str(report)


def test_request_options_of_both_styles(reg):
    tools = reg.for_agent().tool_schemas("openai")
    assert request_options("openai", tools) == {"max_tokens": 4096, "tool_choice": "auto"}
    assert request_options("openai", []) == {"max_tokens": 4096}  # no tools: nothing to choose
    assert request_options("openai", tools, max_completion_tokens=300, temperature=0) == {
        "max_completion_tokens": 300, "temperature": 0, "tool_choice": "auto"}
    assert request_options("openai", tools, tool_choice="read_skill")["tool_choice"] == {
        "type": "function", "function": {"name": "read_skill"}}
    assert request_options("openai", tools, tool_choice="any")["tool_choice"] == "required"
    anthropic = reg.for_agent().tool_schemas("anthropic")
    assert request_options("anthropic", anthropic, max_tokens=512) == {"max_tokens": 512}  # as before
    assert request_options("anthropic", anthropic, tool_choice="required")["tool_choice"] == {"type": "any"}
    assert request_options("anthropic", anthropic, tool_choice="read_skill")["tool_choice"] == {
        "type": "tool", "name": "read_skill"}
    assert request_options("anthropic", anthropic, max_completion_tokens=99)["max_tokens"] == 99
    for bad, words in [({"tool_choice": "sometimes"}, "tool_choice must be"), ({"max_tokens": 0}, "max_tokens"),
                       ({"max_tokens": "lots"}, "max_tokens"), ({"messages": []}, "'messages' cannot be"),
                       ({"model": "x"}, "'model' cannot be"), ({"stream": True}, "streaming is not supported")]:
        with pytest.raises(ConfigError, match=words):
            request_options("openai", tools, **bad)


def test_run_agent_and_eval_pass_every_option_to_each_call(reg):
    client = ScriptedClient([[READ], "done"])
    run_agent(client, reg, "hi", model="m", max_tokens=256, temperature=0.2, seed=7, tool_choice="read_skill")
    assert [{k: r[k] for k in ("max_tokens", "temperature", "seed", "tool_choice")} for r in client.requests] == [
        {"max_tokens": 256, "temperature": 0.2, "seed": 7,
         "tool_choice": {"type": "function", "function": {"name": "read_skill"}}}] * 2
    anthropic = ScriptedClient([[READ], "done"], style="anthropic")
    transcript = run_agent(anthropic, reg, "hi", model="m")
    assert [("tool_choice" in r, r["max_tokens"]) for r in anthropic.requests] == [(False, 4096)] * 2
    assert transcript.options == {"max_tokens": 4096}
    evaluated = ScriptedClient(["no"] * 2)
    eval_trigger(reg, "data-tool", QUERIES, client=evaluated, model="m", runs=1, parallel=1,
                 max_completion_tokens=64, temperature=0)
    assert all(r["max_completion_tokens"] == 64 and r["temperature"] == 0 and "max_tokens" not in r
               for r in evaluated.requests)


def test_stream_and_own_fields_are_refused_before_anything_is_sent(reg):
    client = ScriptedClient(["never sent"])
    with pytest.raises(ConfigError, match="streaming is not supported"):
        run_agent(client, reg, "hi", model="m", stream=True)
    with pytest.raises(ConfigError, match="streaming is not supported"):
        eval_trigger(reg, "data-tool", QUERIES, client=client, model="m", stream=True)
    with pytest.raises(ConfigError, match="'tools' cannot be a request option"):
        run_agent(client, reg, "hi", model="m", tools=[])
    assert client.requests == []


class Streaming:
    """An OpenAI-shaped client whose create() returns chunks, as a client set up to stream does."""

    def __init__(self):
        from types import SimpleNamespace

        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))
        self.calls = 0

    def create(self, **kwargs):
        self.calls += 1
        return iter([{"choices": [{"delta": {"content": "Hel"}}]}, {"choices": [{"delta": {"content": "lo"}}]}])


def test_a_streamed_reply_fails_its_run_and_the_eval_goes_on(reg):
    client = Streaming()
    report = eval_trigger(reg, "data-tool", QUERIES, client=client, model="m", runs=2, parallel=2)
    assert client.calls == 4 and report.done == 4 and report.failed == 4 and not report.interrupted
    assert STREAM_REFUSED in report.variants[0].first_error
    with pytest.raises(ClientError, match="the client returned a stream; streaming is not supported") as info:
        run_agent(client, reg, "hi", model="m")
    assert info.value.kind == "stream"


def test_the_eval_shows_errors_per_variant_with_the_first_message(reg):
    from openai import OpenAI

    with FakeAPI(lambda p, b: (200, {})) as api:
        url = api.url  # the server is gone after this block: nothing listens there
    client = OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0, timeout=2)
    report = eval_trigger(reg, "data-tool", QUERIES, client=client, model="m", runs=1,
                          descriptions=["Handles data."])
    assert report.done == 4 and report.failed == 4 and report.answered == 0
    text = str(report)
    assert "4/4 runs, 4 failed" in text
    for label in ("current", "variant 1"):
        assert f"errors: {label}: 2 of 2 run(s) failed; first: openai API: cannot connect" in text
    from ipyskills.notebook.lab_display import TriggerReportView

    html = TriggerReportView(report).mimebundle()["text/html"]
    assert "4 failed" in html and "errors: current: 2 of 2 run(s) failed; first: openai API: cannot connect" in html
    assert "never called a tool" not in text  # no run was answered: nothing to conclude about tools


def test_the_eval_warns_when_no_run_called_a_tool(reg):
    with FakeAPI(lambda p, b: (200, openai_completion("I cannot use tools."))) as api:
        report = eval_trigger(reg, "data-tool", QUERIES, client=openai_client(api), model="local", runs=2)
    assert report.with_tool_calls == 0 and report.answered == 4
    warning = "the model never called a tool in 4 answered run(s): does the server pass tools?"
    assert warning in str(report) and "tool_choice was auto" in str(report)
    from ipyskills.notebook.lab_display import TriggerReportView

    assert warning in TriggerReportView(report).mimebundle()["text/html"]
    quiet = eval_trigger(reg, "data-tool", QUERIES, client=ScriptedClient(["no"]), model="m", runs=1,
                         tool_choice="none")
    assert "try tool_choice=auto" in str(quiet)
    with FakeAPI(llama_cpp_like) as api:
        calls = eval_trigger(reg, "data-tool", QUERIES, client=openai_client(api), model="local", runs=1)
    assert calls.with_tool_calls == 2 and not calls.warnings and "warning" not in str(calls)


def test_an_empty_reply_is_shown_as_such(reg):
    from ipyskills.notebook.lab_display import TranscriptView

    transcript = run_agent(ScriptedClient([[READ], ""]), reg, "hi", model="m")
    assert transcript.stop_reason == ANSWERED and transcript.empty_reply
    assert f"final: {EMPTY_REPLY}" in str(transcript)
    view = TranscriptView(transcript)
    assert f"final answer: {EMPTY_REPLY}" in view.text() and EMPTY_REPLY in view.mimebundle()["text/html"]
    not_empty = run_agent(ScriptedClient([[READ]] * 2), reg, "hi", model="m", max_turns=2)
    assert not_empty.stop_reason == MAX_TURNS and not not_empty.empty_reply
    report = eval_trigger(reg, "data-tool", QUERIES, client=ScriptedClient(["", "  "]), model="m", runs=1,
                          parallel=1)
    assert report.empty_replies == 2 and "2 of 2 answered run(s) were empty replies" in str(report)


@pytest.mark.parametrize("body, field", [
    (LLAMA_CPP_500_CONTENT_NONE, "messages[2].content: Input should be a valid string (and 6 more"),
    (LLAMA_CPP_500_CONTENT_MISSING, "content: the server's template found no 'content'"),
    ({"detail": [{"loc": ["body", "max_tokens"], "msg": "Input should be a valid integer", "type": "int_type"}]},
     "max_tokens: Input should be a valid integer"),
])
def test_our_bad_request_is_told_apart_from_a_server_fault_and_names_the_field(reg, body, field):
    status = 422 if "detail" in body else 500
    with FakeAPI(lambda p, b: (status, body)) as api, pytest.raises(ClientError) as info:
        run_agent(openai_client(api), reg, "hi", model="local", temperature=0)
    message = str(info.value)
    assert info.value.kind == "bad_request" and info.value.status == status
    assert f"request refused ({status}): {field}" in message
    assert "try again later" not in message and "\n" not in message
    assert "check the request options (temperature=0, max_tokens=4096, tool_choice=auto)" in message


def test_a_server_fault_without_a_message_names_the_options_sent(reg):
    with FakeAPI(llama_cpp_like) as api, pytest.raises(ClientError) as info:
        run_agent(openai_client(api), reg, "hi", model="local", tool_choice="required")
    message = str(info.value)
    assert info.value.kind == "server" and "server error (500)" in message
    assert "it may not handle one of the request options (max_tokens=4096, tool_choice=required)" in message


def test_a_server_that_leaves_tool_results_out_of_the_prompt_is_noticed(reg):
    """llama-cpp-python's chatml-function-calling template renders no "tool" message: the next prompt grows
    by the assistant's call alone (seen: 240 -> 293 prompt tokens with 1,140 characters of results)."""
    def respond(path, body):
        sent = sum(len(m.get("content") or "") for m in body["messages"] if m["role"] != "tool")
        if any(m["role"] == "tool" for m in body["messages"]):
            return 200, openai_completion("Done.", prompt_tokens=sent // 4 + 12)
        return 200, openai_completion(None, [READ], prompt_tokens=sent // 4)

    from ipyskills.notebook.lab_display import TranscriptView

    with FakeAPI(respond) as api:
        dropped = run_agent(openai_client(api), reg, "CSV?", model="local")
    assert dropped.warnings and "the server seems to leave tool results out of the prompt" in dropped.warnings[0]
    assert "warning: turn 2's prompt grew by" in str(dropped) and "warning: turn 2" in TranscriptView(dropped).text()
    with FakeAPI(llama_cpp_like) as api:  # 900 -> 1500 prompt tokens: the results were read
        kept = run_agent(openai_client(api), reg, "CSV?", model="local")
    assert kept.turns == 2 and kept.warnings == []

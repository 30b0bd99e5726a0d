"""The tool-calling loop, driven by ScriptedClient.

ScriptedClient is a deterministic stand-in, NOT a model: it replays a fixed list of tool calls and
answers whatever the conversation says. These tests check the loop's plumbing (what is sent to the client,
what comes back from dispatch, how it stops), not any model behaviour.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ipyskills.agent import loop as agent_loop
from ipyskills.agent.loop import ANSWERED, MAX_TURNS, TRUNCATED, ScriptedClient, detect_style, run_agent
from ipyskills.agent.tools import AgentView
from ipyskills.core.registry import SkillRegistry
from ipyskills.errors import ConfigError, SkillError

READ = ("read_skill", {"skill_name": "data-tool"})
RESOURCE = ("read_skill", {"skill_name": "data-tool", "file_path": "references/guide.md"})
RUN = ("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/echo.py",
                                "args": ["--to", "csv"], "input": "[1, 2]"})
SCRIPT = [[READ], [RESOURCE, RUN], "Done: the data is converted."]


@pytest.mark.parametrize("style", ["openai", "anthropic"])
@pytest.mark.parametrize("as_dicts", [False, True], ids=["attributes", "dicts"])
def test_loop_dispatches_each_call_and_returns_the_final_answer(reg, style, as_dicts):
    client = ScriptedClient(SCRIPT, style=style, as_dicts=as_dicts)
    transcript = run_agent(client, reg, "Convert [1, 2] to CSV", model="scripted")

    assert transcript.stop_reason == ANSWERED
    assert transcript.final == "Done: the data is converted."
    assert transcript.turns == 3 and len(client.requests) == 3
    assert [c.name for c in transcript.tool_calls] == ["read_skill", "read_skill", "execute_skill_script"]
    assert [c.turn for c in transcript.tool_calls] == [1, 2, 2]
    # The loop returns the very text the dispatcher gives (a fresh view: no dedupe involved here).
    fresh = AgentView(reg)
    for call in transcript.tool_calls:
        expected = fresh.dispatch(call.name, call.arguments).text
        if call.name == "execute_skill_script":
            assert call.result.text.split("\n", 1)[0] == expected.split("\n", 1)[0]
            assert "stdin: [1, 2]" in call.result.text
        else:
            assert call.result.text == expected
    assert transcript.tool_calls[0].result.text == str(reg.load("data-tool"))
    assert "Done" in str(transcript) and "execute_skill_script" in str(transcript)


def test_openai_requests_carry_system_prompt_tools_and_tool_messages(reg):
    client = ScriptedClient(SCRIPT, style="openai")
    transcript = run_agent(client, reg, "Convert", model="m1", system="You are helpful.", temperature=0)
    first, last = client.requests[0], client.requests[-1]
    assert first["model"] == "m1" and first["temperature"] == 0
    assert first["tools"] == AgentView(reg).tool_schemas("openai")
    system = first["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == "You are helpful.\n\n" + AgentView(reg).system_prompt("xml")
    assert first["messages"][1] == {"role": "user", "content": "Convert"}
    # The second turn's answers: one tool message per call id, in order, holding the dispatch text.
    assistant = last["messages"][4]
    ids = [c["id"] for c in assistant["tool_calls"]]
    tool_msgs = last["messages"][5:7]
    assert [m["role"] for m in tool_msgs] == ["tool", "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ids
    assert tool_msgs[0]["content"] == transcript.tool_calls[1].result.text
    # An output cap always goes out, and tool_choice "auto" with the tools (llama-cpp-python's server
    # ignores tools without it); a tool-call turn goes back with content "" (None makes that server fail).
    assert first["max_tokens"] == 4096 and first["tool_choice"] == "auto"
    assert assistant["content"] == "" and last["messages"][2]["content"] == ""
    assert transcript.messages[-1] == {"role": "assistant", "content": "Done: the data is converted."}


def test_anthropic_requests_use_system_tool_result_blocks_and_is_error(reg):
    bad = ("read_skill", {"skill_name": "no-such-skill"})
    client = ScriptedClient([[bad, READ], "ok"], style="anthropic")
    transcript = run_agent(client, reg, "Hi", model="m2", max_tokens=512)
    first, second = client.requests
    assert first["system"] == AgentView(reg).system_prompt("xml")
    assert first["max_tokens"] == 512
    assert first["tools"] == AgentView(reg).tool_schemas("anthropic")
    results = second["messages"][-1]
    assert results["role"] == "user"
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results["content"]] == ["toolu_1_0", "toolu_1_1"]
    assert [b["is_error"] for b in results["content"]] == [True, False]
    assert results["content"][0]["content"].startswith("Error: unknown skill 'no-such-skill'")
    assert transcript.final == "ok"


def test_max_turns_stops_a_model_that_keeps_calling_tools(reg):
    client = ScriptedClient([[RESOURCE]] * 10, style="openai")
    transcript = run_agent(client, reg, "loop", model="m", max_turns=3)
    assert transcript.stop_reason == MAX_TURNS
    assert transcript.turns == 3 and len(client.requests) == 3
    assert len(transcript.tool_calls) == 3 and transcript.final == ""
    assert transcript.messages[-1]["role"] == "tool"  # the last calls were answered before stopping


def test_default_turn_limit_is_eight(reg):
    client = ScriptedClient([[RESOURCE]] * 20, style="anthropic", as_dicts=True)
    assert run_agent(client, reg, "loop", model="m").turns == 8


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_max_turns_must_be_a_positive_whole_number(reg, bad):
    with pytest.raises(ConfigError, match="max_turns"):
        run_agent(ScriptedClient(["x"]), reg, "hi", model="m", max_turns=bad)


def test_bad_json_arguments_come_back_as_an_error_and_the_loop_goes_on(reg):
    client = ScriptedClient([[("read_skill", '{"skill_name": "data-tool"')], [READ], "recovered"])
    transcript = run_agent(client, reg, "hi", model="m")
    first = transcript.tool_calls[0]
    assert first.arguments == '{"skill_name": "data-tool"'
    assert first.result.is_error and "not valid JSON" in first.result.text
    assert client.requests[1]["messages"][-1]["content"] == first.result.text
    assert transcript.tool_calls[1].result.text.startswith("<skill_content")
    assert transcript.stop_reason == ANSWERED and transcript.final == "recovered"


def test_repeated_activation_in_one_conversation_is_deduplicated(reg):
    view = AgentView(reg)
    run_agent(ScriptedClient([[READ], "a"]), view, "one", model="m")
    again = run_agent(ScriptedClient([[READ], "b"]), view, "two", model="m")
    assert "already active" in again.tool_calls[0].result.text
    view.reset()
    fresh = run_agent(ScriptedClient([[READ], "c"]), view, "three", model="m")
    assert fresh.tool_calls[0].result.text.startswith("<skill_content")


def test_a_filtered_view_limits_what_the_model_is_offered_and_can_reach(reg):
    view = AgentView(reg, allow=["pdf-processing"])
    client = ScriptedClient([[READ], "no"], style="anthropic")
    transcript = run_agent(client, view, "hi", model="m")
    enum = client.requests[0]["tools"][0]["input_schema"]["properties"]["skill_name"]["enum"]
    assert enum == ["pdf-processing"]
    assert "data-tool" not in client.requests[0]["system"]
    assert transcript.tool_calls[0].result.error == "unknown_skill"


def test_no_skills_sends_no_tools_and_no_skills_prompt(empty_reg):
    for style in ("openai", "anthropic"):
        client = ScriptedClient(["plain answer"], style=style)
        transcript = run_agent(client, empty_reg, "hi", model="m")
        assert "tools" not in client.requests[0]
        assert "system" not in client.requests[0]
        assert all(m["role"] != "system" for m in client.requests[0]["messages"])
        assert transcript.final == "plain answer"


def test_starting_from_a_message_list(reg):
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "sure"},
               {"role": "user", "content": "now"}]
    client = ScriptedClient(["fine"], style="anthropic")
    run_agent(client, reg, history, model="m")
    assert client.requests[0]["messages"] == history
    assert history[-1] == {"role": "user", "content": "now"}  # the caller's list is not modified
    assert len(history) == 3


# -------------------------------------------------------------------------------------------- styles


def test_style_detection():
    assert detect_style(ScriptedClient([], style="openai")) == "openai"
    assert detect_style(ScriptedClient([], style="anthropic")) == "anthropic"
    with pytest.raises(ConfigError, match="pass style="):
        detect_style(object())


def test_explicit_style_wins_and_a_mismatched_response_is_explained(reg):
    # An Anthropic-shaped client driven as if it were OpenAI-shaped: the error says what to change.
    client = ScriptedClient(["x"], style="anthropic")
    client.chat = type("Chat", (), {"completions": client.messages})()
    with pytest.raises(ConfigError):
        detect_style(client)
    with pytest.raises(SkillError, match="style='anthropic'"):
        run_agent(client, reg, "hi", model="m", style="openai")
    assert run_agent(ScriptedClient(["x"], style="anthropic"), reg, "hi", model="m",
                     style="anthropic").final == "x"
    with pytest.raises(ConfigError, match="style must be"):
        run_agent(client, reg, "hi", model="m", style="gemini")


class _LengthLimitedClient:
    """A hand-made OpenAI-shaped client whose only reply was cut by its token limit."""

    def __init__(self):
        self.chat = self
        self.completions = self

    def create(self, **kwargs):
        return {"choices": [{"message": {"role": "assistant", "content": "The answer is"},
                             "finish_reason": "length"}]}


def test_reply_cut_by_the_token_limit_is_reported(reg):
    transcript = run_agent(_LengthLimitedClient(), reg, "hi", model="m")
    assert transcript.stop_reason == TRUNCATED and transcript.finish_reason == "length"
    assert transcript.final == "The answer is"


# ----------------------------------------------------------------------------------- scripted client


def test_scripted_client_says_when_it_runs_out(reg):
    client = ScriptedClient([[READ]], style="openai")
    with pytest.raises(SkillError, match="ran out of steps"):
        run_agent(client, reg, "hi", model="m", max_turns=5)


def test_scripted_client_response_shapes():
    openai = ScriptedClient([[READ]], style="openai").chat.completions.create(model="m", messages=[])
    call = openai.choices[0].message.tool_calls[0]
    assert call.function.name == "read_skill" and call.function.arguments == '{"skill_name": "data-tool"}'
    assert openai.choices[0].finish_reason == "tool_calls"
    anthropic = ScriptedClient([[READ]], style="anthropic").messages.create(model="m", messages=[])
    block = anthropic.content[0]
    assert block.type == "tool_use" and block.input == {"skill_name": "data-tool"}  # input stays a dict
    assert anthropic.stop_reason == "tool_use"
    as_dict = ScriptedClient(["hi"], style="anthropic", as_dicts=True).messages.create(model="m", messages=[])
    assert as_dict["content"] == [{"type": "text", "text": "hi"}] and as_dict["stop_reason"] == "end_turn"
    with pytest.raises(ConfigError):
        ScriptedClient([], style="gemini")


def test_the_module_docstring_example_runs_on_the_bundled_skills(settings):
    """The ScriptedClient example in ipyskills.agent.loop's docstring, executed as written."""
    bundled = Path(__file__).resolve().parents[2] / "skills"
    if not (bundled / "data-processor" / "SKILL.md").is_file():
        pytest.skip("the bundled data-processor skill is not in this checkout")
    example = agent_loop.__doc__.split("Without a model")[1].split("::\n", 1)[1]
    namespace = {"reg": SkillRegistry([bundled], settings=settings)}
    # Runs our own documentation text, nothing from outside the repository.
    exec(compile(textwrap.dedent(example), "agent_loop docstring", "exec"), namespace)  # noqa: S102
    transcript = namespace["transcript"]
    assert transcript.stop_reason == ANSWERED and transcript.final == "The mean is 2."
    run = transcript.tool_calls[1].result
    assert not run.is_error, run.text
    assert '"mean": 2.0' in run.text

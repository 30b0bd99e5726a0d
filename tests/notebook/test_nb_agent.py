"""Agent prototyping magics through a real shell: %skills tools, %skills prompt --format, %skills agent and
%%skill_call, and that all of them (and an agent loop given the session's view) agree on what is visible."""

from __future__ import annotations

import json

import pytest
from IPython.core.error import UsageError

from ipyskills.agent.loop import ScriptedClient, run_agent
from ipyskills.agent.tools import ToolResult
from ipyskills.notebook.display import AgentSettings, AgentText, SystemPrompt, ToolCallView, ToolSchemas
from ipyskills.notebook.magics import IPySkills, MagicError

from .conftest import write

QUIET_MD = """---
name: quiet
description: Only for people. Use when a person asks for the quiet runbook.
disable-model-invocation: true
---
# Quiet

QUIET-BODY
"""


@pytest.fixture
def quiet(workdir):
    """A third skill whose author keeps it away from the model."""
    write(workdir / "skills" / "quiet" / "SKILL.md", QUIET_MD)


@pytest.fixture
def local(ip):
    ip.run_line_magic("config", "IPySkills.sandbox_backend = 'local'")


def call(ip, tool: str, cell: str, line: str = "") -> ToolCallView:
    return ip.run_cell_magic("skill_call", f"{line} {tool}".strip(), cell)


def enum_of(tools: list[dict]) -> list[str]:
    """The skill_name enum, which both tools must share."""
    enums = [t["function"]["parameters"]["properties"]["skill_name"]["enum"] for t in tools]
    assert len(enums) == 2 and enums[0] == enums[1]
    return enums[0]


# ------------------------------------------------------------------------------------------ %skills tools


def test_tools_default_openai_equal_the_registry_schemas(ip, magics):
    tools = ip.run_line_magic("skills", "tools")
    assert isinstance(tools, ToolSchemas) and tools.format == "openai"
    assert list(tools) == magics.registry.tool_schemas("openai")
    assert [t["function"]["name"] for t in tools] == ["read_skill", "execute_skill_script"]
    assert sorted(enum_of(tools)) == ["Bad_Skill", "hello"]


def test_tools_anthropic_format(ip, magics):
    tools = ip.run_line_magic("skills", "tools --format anthropic")
    assert list(tools) == magics.registry.tool_schemas("anthropic")
    assert all(set(t) == {"name", "description", "input_schema"} for t in tools)
    assert "<summary>read_skill: Load a skill." in tools.mimebundle()["text/html"]


def test_tools_display_is_pretty_json_with_a_raw_copy(ip):
    tools = ip.run_line_magic("skills", "tools")
    bundle = ip.display_formatter.format(tools)[0]
    assert json.loads(bundle["text/plain"]) == list(tools)  # the plain text is the JSON itself, copyable
    assert bundle["text/plain"] == tools.json and "\n  {" in tools.json
    html = bundle["text/html"]
    assert "<summary>read_skill: Load a skill." in html and "<summary>execute_skill_script: Run a" in html
    assert "raw JSON" in html and "&quot;input_schema&quot;" not in html  # openai shape, escaped JSON
    assert "&quot;parameters&quot;" in html
    assert "2 skill(s) visible to the agent" in html


def test_tools_allow_narrows_one_call_only(ip):
    narrowed = ip.run_line_magic("skills", "tools --allow hello")
    assert enum_of(narrowed) == ["hello"]
    assert "allow-list: hello" in narrowed.mimebundle()["text/html"]
    assert sorted(enum_of(ip.run_line_magic("skills", "tools"))) == ["Bad_Skill", "hello"]


def test_tools_with_nothing_visible_is_an_empty_list_that_says_so(ip, magics):
    ip.run_line_magic("skills", "agent --disable hello,Bad_Skill")
    tools = ip.run_line_magic("skills", "tools")
    assert tools == [] and "no skill tools at all" in tools.mimebundle()["text/plain"]


@pytest.mark.parametrize("line, message", [
    ("tools --format xml", "openai or anthropic"),
    ("prompt --format openai", "xml or markdown"),
    ("prompt --allow hello", "needs --format"),
    ("list --format xml", "not to %skills list"),
    ("validate --allow hello", "not to %skills validate"),
    ("tools --disable hello", "applies to %skills agent"),
    ("tools --reset", "applies to %skills agent"),
    ("tools --allow ,", "skill names separated by commas"),
    ("agent --allow '*,hello'", "cannot be mixed"),
    ("tools extra", "takes no argument"),
])
def test_agent_option_misuse_is_usage_error(ip, cell, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("skills", line)
    result, out = cell(f"%skills {line}")
    assert not result.success and "UsageError" in out and "Traceback" not in out


def test_unknown_skill_in_allow_is_one_line(ip, cell):
    with pytest.raises(MagicError, match="no skill named 'helo'; did you mean 'hello'"):
        ip.run_line_magic("skills", "tools --allow helo")
    result, out = cell("%skills tools --allow helo")
    assert not result.success and "SkillNotFound" in out and "Traceback" not in out


# ----------------------------------------------------------------------------------------- %skills prompt


def test_bare_prompt_stays_the_unfiltered_catalog(ip, magics):
    ip.run_line_magic("skills", "agent --allow hello")
    text = ip.run_line_magic("skills", "prompt")
    assert type(text) is AgentText and text == magics.registry.catalog()
    assert "Bad_Skill" in text  # the session's agent filter does not apply to the catalog


@pytest.mark.parametrize("fmt", ["xml", "markdown"])
def test_prompt_format_is_the_agents_system_prompt(ip, magics, fmt):
    text = ip.run_line_magic("skills", f"prompt --format {fmt}")
    assert isinstance(text, SystemPrompt) and text.format == fmt
    assert text == magics.registry.system_prompt(fmt)
    assert "read_skill" in text and "execute_skill_script" in text  # the behavioural instructions
    bundle = ip.display_formatter.format(text)[0]
    assert bundle["text/plain"] == str(text)  # copyable, word for word
    assert f"system prompt ({fmt}, {len(text)} characters)" in bundle["text/html"]


def test_prompt_xml_ends_with_the_catalog_of_visible_skills(ip, magics):
    full = ip.run_line_magic("skills", "prompt --format xml")
    assert full.endswith(magics.registry.catalog())
    narrowed = ip.run_line_magic("skills", "prompt --format xml --allow hello")
    assert "<name>hello</name>" in narrowed and "Bad_Skill" not in narrowed


def test_prompt_with_nothing_visible_is_empty_and_says_so(ip):
    ip.run_line_magic("skills", "agent --disable hello,Bad_Skill")
    text = ip.run_line_magic("skills", "prompt --format markdown")
    assert text == ""
    assert "told nothing about skills" in ip.display_formatter.format(text)[0]["text/plain"]


def test_help_names_the_formats_and_the_bare_prompt_decision():
    doc = IPySkills.skills.__doc__
    assert "%skills prompt --format xml" in doc and "%skills prompt --format markdown" in doc
    assert "--format openai|anthropic" in doc and "no instructions, no filter" in doc
    assert "%%skill_call" in doc and "agent_allow" in doc


# ------------------------------------------------------------------------------------------ %skills agent


def test_agent_shows_visible_and_hidden_with_reasons(ip, quiet):
    settings = ip.run_line_magic("skills", "agent")
    assert isinstance(settings, AgentSettings)
    assert sorted(settings.visible) == ["Bad_Skill", "hello"]
    assert "disable-model-invocation" in settings.hidden["quiet"]
    text = ip.display_formatter.format(settings)[0]["text/plain"]
    assert "allow-list: all skills" in text and "quiet: its SKILL.md sets disable-model-invocation" in text


def test_session_filter_applies_to_tools_prompt_call_and_loop_alike(ip, quiet):
    settings = ip.run_line_magic("skills", "agent --allow hello,quiet --enable quiet")
    assert settings.visible == ["hello", "quiet"] and settings.hidden == {"Bad_Skill": "not in the allow-list"}
    assert enum_of(ip.run_line_magic("skills", "tools")) == ["hello", "quiet"]
    prompt = ip.run_line_magic("skills", "prompt --format xml")
    assert "<name>quiet</name>" in prompt and "Bad_Skill" not in prompt
    assert "QUIET-BODY" in str(call(ip, "read_skill", '{"skill_name": "quiet"}'))
    hidden = call(ip, "read_skill", '{"skill_name": "Bad_Skill"}')
    assert hidden.result.error == "unknown_skill" and "Available skills: hello, quiet." in str(hidden)

    # An agent loop given the session's view gets the same tools and the same text for the same call.
    client = ScriptedClient([[("read_skill", {"skill_name": "Bad_Skill"})], "done"])
    transcript = run_agent(client, settings.view, "hi", model="scripted")
    assert client.requests[0]["tools"] == list(ip.run_line_magic("skills", "tools"))
    assert transcript.tool_calls[0].result == hidden.result


def test_disable_enable_reset_and_allow_all(ip, quiet):
    assert ip.run_line_magic("skills", "agent --disable hello").visible == ["Bad_Skill"]
    assert "hello: disabled for this session" in str(ip.run_line_magic("skills", "agent").lines())
    assert ip.run_line_magic("skills", "agent --enable hello").visible == ["Bad_Skill", "hello"]
    assert ip.run_line_magic("skills", "agent --allow hello").visible == ["hello"]
    assert ip.run_line_magic("skills", "agent --allow '*'").visible == ["Bad_Skill", "hello"]
    ip.run_line_magic("skills", "agent --enable quiet --disable Bad_Skill")
    assert ip.run_line_magic("skills", "agent").visible == ["hello", "quiet"]
    reset = ip.run_line_magic("skills", "agent --reset")
    assert reset.visible == ["Bad_Skill", "hello"] and (reset.allow, reset.disabled, reset.enabled) == (None, [], [])


def test_a_typo_leaves_the_filter_unchanged(ip, magics):
    ip.run_line_magic("skills", "agent --allow hello")
    with pytest.raises(MagicError, match="no skill named 'nope'"):
        ip.run_line_magic("skills", "agent --allow Bad_Skill --disable nope")
    assert (magics.agent_allow, magics.agent_disabled) == (["hello"], [])


def test_enable_outside_the_allow_list_is_usage_error(ip, magics, quiet):
    ip.run_line_magic("skills", "agent --allow hello")
    with pytest.raises(UsageError, match="--allow hello,quiet"):
        ip.run_line_magic("skills", "agent --enable quiet")
    assert magics.agent_enabled == []


def test_folder_names_are_accepted_and_stored_as_skill_names(ip, magics):
    ip.run_line_magic("skills", "agent --allow bad-skill")  # the folder of the skill named Bad_Skill
    assert magics.agent_allow == ["Bad_Skill"]
    assert enum_of(ip.run_line_magic("skills", "tools")) == ["Bad_Skill"]


def test_config_traits_set_the_same_filter(ip, quiet):
    ip.run_line_magic("config", "IPySkills.agent_allow = ['hello', 'quiet']")
    ip.run_line_magic("config", "IPySkills.agent_enabled = ['quiet']")
    assert enum_of(ip.run_line_magic("skills", "tools")) == ["hello", "quiet"]
    ip.run_line_magic("config", "IPySkills.agent_disabled = ['hello']")
    assert ip.run_line_magic("skills", "agent").visible == ["quiet"]
    assert call(ip, "read_skill", '{"skill_name": "hello"}').result.error == "unknown_skill"
    ip.run_line_magic("config", "IPySkills.agent_allow = None")
    assert ip.run_line_magic("skills", "agent").visible == ["Bad_Skill", "quiet"]


# ------------------------------------------------------------------------------------------- %%skill_call


def test_skill_call_read_skill_gives_the_exact_level_2_and_3_text(ip, magics):
    view = call(ip, "read_skill", '{"skill_name": "hello"}')
    assert isinstance(view, ToolCallView) and not view.result.is_error
    assert str(view) == str(magics.registry.load("hello"))
    again = call(ip, "read_skill", '{"skill_name": "hello"}')  # a replay stands alone: no "already active"
    assert str(again) == str(view)
    resource = call(ip, "read_skill", '{"skill_name": "hello", "file_path": "references/guide.md"}')
    assert str(resource) == str(magics.registry.load("hello/references/guide.md"))
    locator = call(ip, "read_skill", '{"skill_name": "hello/references/guide.md"}')
    assert str(locator) == str(resource)


def test_skill_call_display(ip):
    view = call(ip, "read_skill", '{"skill_name": "hello"}')
    bundle = ip.display_formatter.format(view)[0]
    head, _, rest = bundle["text/plain"].partition("\n")
    assert head == f"[read_skill -> ok, {len(str(view))} characters]" and rest == str(view)
    assert "&lt;skill_content name=&quot;hello&quot;&gt;" in bundle["text/html"]
    assert "exactly what the model receives" in bundle["text/html"]


def test_skill_call_output_variable_keeps_the_tool_result(ip):
    view = call(ip, "read_skill", '{"skill_name": "nope"}', "-o res")
    assert isinstance(ip.user_ns["res"], ToolResult) and ip.user_ns["res"] is view.result
    with pytest.raises(UsageError, match="variable name"):
        call(ip, "read_skill", "{}", "-o 1x")


@pytest.mark.parametrize("tool, cell_text, kind, words", [
    ("read_skill", '{"skill_name": "helo"}', "unknown_skill", "Did you mean 'hello'?"),
    ("read_skill", '{"skill_name": "hello", "file_path": "../bad-skill/SKILL.md"}', "resource", "leaves the skill"),
    ("read_skill", '{"skill_name": "hello", "file_path": "/etc/passwd"}', "resource", "cannot read"),
    ("read_skill", '{"skill_name": "hello", ', "bad_arguments", "not valid JSON"),
    ("read_skill", '["hello"]', "bad_arguments", "must be a JSON object, got an array"),
    ("read_skill", "{}", "bad_arguments", "skill_name is required"),
    ("read_skill", '{"skill_name": "hello", "path": "x"}', "bad_arguments", "unexpected argument(s) path"),
    ("execute_skill_script", '{"skill_name": "hello", "script_path": "../../etc/passwd"}', "bad_arguments",
     "script path refused"),
    ("execute_skill_script", '{"skill_name": "hello", "script_path": "scripts/hi.py", "args": [1]}',
     "bad_arguments", "args[0] must be a string"),
    ("delete_skill", '{"skill_name": "hello"}', "unknown_tool", "no tool named 'delete_skill'"),
])
def test_skill_call_errors_are_the_models_text_not_a_traceback(ip, cell, tool, cell_text, kind, words):
    view = call(ip, tool, cell_text)
    assert view.result.is_error and view.result.error == kind
    assert str(view).startswith("Error: ") and words in str(view)
    assert view.result == ip.run_line_magic("skills", "agent").view.dispatch(tool, cell_text)  # a true replay
    result, out = cell(f"%%skill_call {tool}\n{cell_text}")
    assert result.success and "Traceback" not in out  # the error is the output, "Run all" goes on
    assert f"[{tool} -> error ({kind})" in out


def test_skill_call_runs_a_script_with_input(ip, local):
    view = call(ip, "execute_skill_script",
                '{"skill_name": "hello", "script_path": "scripts/hi.py", "args": ["Ada"], "input": "x y"}')
    assert not view.result.is_error, str(view)
    text = str(view)
    assert text.startswith('<script_result skill="hello" script="scripts/hi.py" exit_code="0">')
    assert "hi ['Ada'] 'x y'" in text and "Backend: local" in text


def test_skill_call_failed_script_is_flagged(ip, local):
    view = call(ip, "execute_skill_script", '{"skill_name": "hello", "script_path": "scripts/fail.py"}')
    assert view.result.is_error and view.result.error == "exit_code"
    assert 'exit_code="3"' in str(view) and "bad input" in str(view)
    assert "[execute_skill_script -> error (exit_code)" in view.mimebundle()["text/plain"]


def test_skill_call_allow_option(ip, cell):
    view = call(ip, "read_skill", '{"skill_name": "hello"}', "--allow Bad_Skill")
    assert view.result.error == "unknown_skill" and "Available skills: Bad_Skill." in str(view)
    with pytest.raises(UsageError, match="names separated by commas"):
        call(ip, "read_skill", "{}", "--allow ,")
    result, out = cell('%%skill_call --allow nope read_skill\n{"skill_name": "hello"}')
    assert not result.success and "SkillNotFound" in out and "Traceback" not in out


def test_skill_call_is_a_cell_magic_only(ip, cell):
    result, out = cell("%skill_call read_skill")
    assert not result.success and "skill_call" in out


def test_agent_view_is_one_conversation_while_replays_stand_alone(ip):
    view = ip.run_line_magic("skills", "agent").view
    first = view.dispatch("read_skill", {"skill_name": "hello"})
    again = view.dispatch("read_skill", {"skill_name": "hello"})
    assert first.text.startswith("<skill_content") and "already active" in again.text
    assert str(call(ip, "read_skill", '{"skill_name": "hello"}')) == first.text
    fresh = ip.run_line_magic("skills", "agent").view  # each %skills agent starts a new conversation
    assert fresh.dispatch("read_skill", {"skill_name": "hello"}).text == first.text


def test_config_names_may_be_folder_names_and_typos_are_reported(ip):
    ip.run_line_magic("config", "IPySkills.agent_allow = ['bad-skill', 'helo']")
    settings = ip.run_line_magic("skills", "agent")
    assert settings.visible == ["Bad_Skill"] and settings.missing == ["helo"]
    assert "no skill named (no effect): helo" in ip.display_formatter.format(settings)[0]["text/plain"]
    ip.run_line_magic("config", "IPySkills.agent_allow = None")
    ip.run_line_magic("config", "IPySkills.agent_disabled = ['bad-skill']")
    assert ip.run_line_magic("skills", "agent").hidden["Bad_Skill"].startswith("disabled for this session")


def test_skill_call_completes_tool_names(ip):
    from IPython.core.completer import provisionalcompleter

    def complete(text):
        with provisionalcompleter():
            return sorted({c.text for c in ip.Completer.completions(text, len(text))})

    assert complete("%%skill_call re") == ["read_skill"]
    assert complete("%%skill_call --allow hello -o r ex") == ["execute_skill_script"]
    assert "hello" not in complete("%%skill_call read_skill he")  # the cell holds the arguments


def test_agent_inputs_folder_from_config(ip, workdir, local, cell):
    """%config IPySkills.agent_inputs names the folder; tools offer `inputs`; replays stay inside it."""
    write(workdir / "skills" / "hello" / "scripts" / "cat.py", "import sys\nprint(open(sys.argv[1]).read())\n")
    write(workdir / "for-agent" / "notes.txt", "INPUT-NOTES")
    write(workdir / "private.txt", "PRIVATE")
    no_inputs = ip.run_line_magic("skills", "tools")
    assert '"inputs"' not in json.dumps(list(no_inputs))
    ip.run_line_magic("config", "IPySkills.agent_inputs = 'for-agent'")
    assert "inputs" in ip.run_line_magic("skills", "tools")[1]["function"]["parameters"]["properties"]
    ok = call(ip, "execute_skill_script", json.dumps({"skill_name": "hello", "script_path": "scripts/cat.py",
                                                      "args": ["notes.txt"], "inputs": ["notes.txt"]}))
    assert not ok.result.is_error and "INPUT-NOTES" in ok.result.text, ok.result.text
    out = call(ip, "execute_skill_script", json.dumps({"skill_name": "hello", "script_path": "scripts/cat.py",
                                                       "args": ["private.txt"], "inputs": ["../private.txt"]}))
    assert out.result.is_error and "contains '..'" in out.result.text and "PRIVATE" not in out.result.text
    ip.run_line_magic("config", "IPySkills.agent_inputs = 'nowhere'")
    _, printed = cell("%skills tools")
    assert "inputs_dir 'nowhere' is not an existing folder" in printed and "Traceback" not in printed

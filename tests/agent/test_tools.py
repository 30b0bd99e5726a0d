"""Tool schemas, the system prompt, the agent view's filtering, the activation tracker and the output cap."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipyskills.agent import tools
from ipyskills.agent.tools import CUT_MARK, ActivationTracker, AgentView, cap_text
from ipyskills.errors import ConfigError, SkillNotFound

VISIBLE = ["data-tool", "pdf-processing", "secret-ops"]  # "quiet" opts out of model invocation


def _catalog_names(text: str) -> list[str]:
    return re.findall(r"<name>(.*?)</name>", text)


def _check_parameters(params: dict, tool: str, names: list[str]) -> None:
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["skill_name"] == {**props["skill_name"], "type": "string", "enum": names}
    assert all(p["description"] for p in props.values())
    if tool == "read_skill":
        assert set(props) == {"skill_name", "file_path"}
        assert params["required"] == ["skill_name"]
        assert props["file_path"]["type"] == "string"
    else:
        assert set(props) == {"skill_name", "script_path", "args", "input"}
        assert params["required"] == ["skill_name", "script_path"]
        assert props["args"] == {**props["args"], "type": "array", "items": {"type": "string"}}
        assert props["input"]["type"] == "string"


# ----------------------------------------------------------------------------------------- schemas


def test_openai_schemas_are_function_tools_with_the_visible_skills_as_enum(reg):
    schemas = AgentView(reg).tool_schemas("openai")
    assert [s["type"] for s in schemas] == ["function", "function"]
    assert [s["function"]["name"] for s in schemas] == ["read_skill", "execute_skill_script"]
    for s in schemas:
        assert set(s["function"]) == {"name", "description", "parameters"}
        assert len(s["function"]["description"]) > 100  # written for a model: what and when
        _check_parameters(s["function"]["parameters"], s["function"]["name"], VISIBLE)
    json.dumps(schemas)  # plain JSON, ready to send


def test_anthropic_schemas_use_input_schema(reg):
    schemas = AgentView(reg).tool_schemas("anthropic")
    assert [s["name"] for s in schemas] == ["read_skill", "execute_skill_script"]
    for s in schemas:
        assert set(s) == {"name", "description", "input_schema"}
        _check_parameters(s["input_schema"], s["name"], VISIBLE)
    openai = AgentView(reg).tool_schemas("openai")
    assert [s["input_schema"] for s in schemas] == [s["function"]["parameters"] for s in openai]


def test_unknown_schema_format_is_a_config_error(reg):
    with pytest.raises(ConfigError, match="openai, anthropic"):
        AgentView(reg).tool_schemas("gemini")


def test_no_skills_means_no_tools_no_prompt_no_catalog(empty_reg):
    view = AgentView(empty_reg)
    assert view.tool_schemas("openai") == []
    assert view.tool_schemas("anthropic") == []
    assert view.system_prompt("xml") == ""
    assert view.system_prompt("markdown") == ""
    assert view.catalog() == ""


def test_everything_hidden_also_means_no_tools(reg):
    view = AgentView(reg, allow=["pdf-processing"])
    view.disable("pdf-processing")
    assert view.tool_schemas() == [] and view.system_prompt() == "" and view.catalog() == ""


def test_module_level_one_liners_match_the_view(reg):
    assert tools.tool_schemas(reg, "anthropic") == AgentView(reg).tool_schemas("anthropic")
    assert tools.system_prompt(reg, "markdown", allow=["data-tool"]) == \
        AgentView(reg, allow=["data-tool"]).system_prompt("markdown")


# --------------------------------------------------------------------------------------- filtering


def test_allow_list_filters_catalog_enum_and_prompt_alike(reg):
    view = AgentView(reg, allow=["data-tool", "pdf-processing", "no-such-skill"])
    expected = ["data-tool", "pdf-processing"]
    assert view.names() == expected
    assert _catalog_names(view.catalog()) == expected
    assert _catalog_names(view.system_prompt("xml")) == expected
    for s in view.tool_schemas("openai"):
        assert s["function"]["parameters"]["properties"]["skill_name"]["enum"] == expected
    assert "secret-ops" not in view.system_prompt("markdown")
    assert "Internal operations" not in view.catalog()


def test_disable_and_enable_change_every_surface_together(reg):
    view = AgentView(reg, disabled=["pdf-processing"])
    assert view.names() == ["data-tool", "secret-ops"]
    view.disable("secret-ops")
    assert _catalog_names(view.catalog()) == ["data-tool"]
    assert view.tool_schemas("anthropic")[1]["input_schema"]["properties"]["skill_name"]["enum"] == ["data-tool"]
    view.enable("pdf-processing")
    assert _catalog_names(view.system_prompt()) == ["data-tool", "pdf-processing"]


def test_disable_model_invocation_hides_a_skill_until_enabled(reg):
    view = AgentView(reg)
    assert "quiet" not in view.names()
    view.enable("quiet")
    assert "quiet" in view.names()
    assert "quiet" in _catalog_names(view.catalog())


def test_enable_outside_the_allow_list_and_unknown_names_are_refused(reg):
    view = AgentView(reg, allow=["data-tool"])
    with pytest.raises(ConfigError, match="allow-list"):
        view.enable("pdf-processing")
    with pytest.raises(SkillNotFound):
        view.disable("no-such-skill")
    with pytest.raises(ConfigError, match="list of skill names"):
        AgentView(reg, allow="data-tool")


def test_unfiltered_view_catalog_is_byte_identical_to_the_registry_catalog(reg):
    view = AgentView(reg)
    view.enable("quiet")
    assert view.catalog() == reg.catalog()


def test_skills_added_later_show_up_everywhere(reg, tmp_path, new_skill):
    view = AgentView(reg)
    new_skill(tmp_path / "more", "late-skill", "Added after the view was made.", "# Late\n")
    reg.add(tmp_path / "more")
    assert "late-skill" in view.names()
    assert "late-skill" in view.tool_schemas()[0]["function"]["parameters"]["properties"]["skill_name"]["enum"]
    assert not view.dispatch("read_skill", {"skill_name": "late-skill"}).is_error


# ----------------------------------------------------------------------------------- system prompt


def test_xml_system_prompt_is_instructions_then_the_catalog(reg):
    view = AgentView(reg)
    prompt = view.system_prompt("xml")
    instructions, catalog = prompt.split("\n\n<available_skills>")
    assert "read_skill" in instructions and "execute_skill_script" in instructions
    assert "activate_skill" not in prompt  # adapted to our tool names
    assert "<available_skills>" + catalog == view.catalog()


def test_markdown_system_prompt_lists_skills_without_xml(reg):
    prompt = AgentView(reg, allow=["pdf-processing"]).system_prompt("markdown")
    assert "<" not in prompt
    assert "- **pdf-processing**: Extract text and tables from PDF files. Use when handling PDFs." in prompt
    assert "`read_skill`" in prompt
    with pytest.raises(ConfigError):
        AgentView(reg).system_prompt("html")


# ------------------------------------------------------------------------------------------ tracker


def test_tracker_remembers_activations_in_order_until_reset():
    tracker = ActivationTracker()
    tracker.activate("b")
    tracker.activate("a")
    tracker.activate("b")
    assert tracker.active == ["b", "a"]
    assert tracker.is_active("a")
    tracker.forget("a")
    assert not tracker.is_active("a") and tracker.active == ["b"]
    tracker.reset()
    assert tracker.active == []


# -------------------------------------------------------------------------------------------- cap


def test_cap_text_keeps_short_text_unchanged():
    assert cap_text("hello", 1000) == "hello"
    assert cap_text("x" * 1000, 1000) == "x" * 1000


def test_cap_text_default_is_30000_and_marks_the_cut():
    text = "HEAD" + "m" * 50_000 + "TAIL"
    out = cap_text(text)
    assert len(out) <= 30_000
    assert out.startswith("HEAD") and out.endswith("TAIL")
    cut = int(re.search(r"\[ipyskills: (\d+) characters cut here; a tool result is capped at 30000", out).group(1))
    assert len(out) - len(CUT_MARK.format(cut=cut, cap=30_000)) == len(text) - cut


@given(st.text(min_size=0, max_size=3000), st.integers(min_value=200, max_value=2500))
def test_cap_text_never_exceeds_the_cap_and_keeps_head_and_tail(text, cap):
    out = cap_text(text, cap)
    assert len(out) <= cap
    if len(text) <= cap:
        assert out == text
        return
    mark_at = out.index("\n[ipyskills: ")
    cut = int(re.match(r"\n\[ipyskills: (\d+) ", out[mark_at:]).group(1))
    mark = CUT_MARK.format(cut=cut, cap=cap)
    head, tail = out[:mark_at], out[mark_at + len(mark):]
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + len(tail) + cut == len(text)


def test_output_cap_must_be_sane(reg):
    with pytest.raises(ConfigError, match="output_cap"):
        AgentView(reg, output_cap=10)


def test_disable_by_folder_name_hides_a_skill_whose_name_differs(reg, skills_root, new_skill):
    folder = new_skill(skills_root, "folder-name", "Name differs from folder.", "# X\n")
    skill_md = folder / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("name: folder-name", "name: other-name"))
    reg.refresh()
    view = AgentView(reg)
    assert "other-name" in view.names()
    view.disable("folder-name")
    assert "other-name" not in view.names()

"""execute_skill_script's `inputs`: the application names an inputs folder, the model names files in it.

Runs are real (local backend, real skill folders). The model can only reach what is inside the folder the
application gave: `..`, absolute paths, `~`, backslashes and links leading out are refused with an error
the model can act on, and nothing of the refused file reaches the script."""

from __future__ import annotations

import json
import os

import pytest

from ipyskills.agent.loop import ScriptedClient, run_agent
from ipyskills.agent.tools import AgentView
from ipyskills.errors import ConfigError

READ_INPUTS = """\
import os, sys
for name in sys.argv[1:]:
    if os.path.isdir(name):
        for root, _dirs, files in sorted(os.walk(name)):
            for f in sorted(files):
                path = os.path.join(root, f)
                print(path, "=", open(path).read().strip())
    else:
        print(name, "=", open(name).read().strip())
print("cwd holds:", sorted(os.listdir(".")))
"""
SECRET = "HOST-SECRET-7f3a"


@pytest.fixture
def inputs(tmp_path, skills_root):
    """An inputs folder the application chose, and a secret next to it that the model must not reach."""
    (skills_root / "data-tool" / "scripts" / "read_inputs.py").write_text(READ_INPUTS)
    folder = tmp_path / "agent-inputs"
    (folder / "reports").mkdir(parents=True)
    (folder / "sales.csv").write_text("region,total\nnorth,10\n")
    (folder / "reports" / "q3.txt").write_text("Q3 up 4%")
    (folder / "latest.csv").symlink_to("sales.csv")  # a link that stays inside: fine
    (tmp_path / "secret.txt").write_text(SECRET)
    (folder / "escape.txt").symlink_to(tmp_path / "secret.txt")  # a link out of the folder
    (folder / "escape-dir").symlink_to(tmp_path)  # a folder link out
    (folder / "reports" / "up.txt").symlink_to("../../secret.txt")  # out, from a subfolder
    return folder


def call(view, *names, args=None):
    arguments = {"skill_name": "data-tool", "script_path": "scripts/read_inputs.py",
                 "args": list(args if args is not None else [os.path.basename(n.rstrip("/")) for n in names]),
                 "inputs": list(names)}
    return view.dispatch("execute_skill_script", json.dumps(arguments))


def test_the_inputs_argument_is_offered_only_with_an_inputs_folder(reg, inputs):
    plain = AgentView(reg).tool_schemas("openai")[1]["function"]["parameters"]["properties"]
    assert "inputs" not in plain
    view = AgentView(reg, inputs_dir=inputs)
    for fmt, key in (("openai", None), ("anthropic", "input_schema")):
        tool = view.tool_schemas(fmt)[1]
        params = tool[key] if key else tool["function"]["parameters"]
        assert params["properties"]["inputs"]["type"] == "array"
        assert "relative to that folder" in params["properties"]["inputs"]["description"]
    # The folder's path is the application's business: it is not shown to the model.
    assert str(inputs) not in json.dumps(view.tool_schemas("openai")) + view.system_prompt()


def test_files_and_folders_are_copied_into_the_working_folder(reg, inputs):
    view = AgentView(reg, inputs_dir=inputs)
    result = call(view, "sales.csv", "reports")
    assert not result.is_error, result.text
    assert "sales.csv = region,total\nnorth,10" in result.text
    assert "reports/q3.txt = Q3 up 4%" in result.text
    assert 'Inputs in the working folder: ["sales.csv", "reports"]' in result.text
    assert SECRET not in result.text  # the link out of reports/ was left out of the copy
    # A link that stays inside the folder is taken, under the name the model gave.
    linked = call(view, "latest.csv")
    assert "latest.csv = region,total" in linked.text, linked.text
    # The same through the registry's one-liners and reg.for_agent.
    assert "Q3 up 4%" in reg.for_agent(inputs_dir=inputs).dispatch(
        "execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/read_inputs.py",
                                 "args": ["q3.txt"], "inputs": ["reports/q3.txt"]}).text


@pytest.mark.parametrize("name, why", [
    ("../secret.txt", "contains '..'"),
    ("reports/../../secret.txt", "contains '..'"),
    ("SECRET_ABS", "absolute path"),
    ("/etc/passwd", "absolute path"),
    ("C:/Windows/win.ini", "absolute path"),
    ("~/secret.txt", "'~' is not expanded"),
    ("reports\\q3.txt", "backslash"),
    ("escape.txt", "leads out of the inputs folder"),
    ("escape-dir/secret.txt", "leads out of the inputs folder"),
    ("escape-dir", "leads out of the inputs folder"),
    ("reports/up.txt", "leads out of the inputs folder"),
    ("nope.csv", "no such file or folder"),
    (".", "names the inputs folder itself"),
    ("  ", "it is empty"),
])
def test_escape_attempts_are_refused_with_an_error_the_model_can_act_on(reg, inputs, name, why):
    if name == "SECRET_ABS":
        name = str(inputs.parent / "secret.txt")
    view = AgentView(reg, inputs_dir=inputs)
    result = call(view, name, args=["secret.txt"])
    assert result.is_error and result.error == "bad_arguments", result.text
    assert result.text.startswith("Error: inputs: ") and why in result.text, result.text
    assert SECRET not in result.text
    assert str(inputs) not in result.text  # the host path is never told
    if "no such" in why or "leads out" in why:  # what can be asked for instead
        assert "it holds: latest.csv, reports/, sales.csv." in result.text


def test_a_link_swapped_in_later_is_refused_too(reg, inputs, tmp_path):
    view = AgentView(reg, inputs_dir=inputs)
    assert not call(view, "sales.csv").is_error
    (inputs / "sales.csv").unlink()
    (inputs / "sales.csv").symlink_to(tmp_path / "secret.txt")  # checked on every call, not once
    result = call(view, "sales.csv")
    assert result.is_error and "leads out" in result.text and SECRET not in result.text


def test_without_an_inputs_folder_inputs_is_an_error_not_a_host_read(reg, inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # even a name that exists relative to the process is not read
    result = call(AgentView(reg), "secret.txt")
    assert result.is_error and result.error == "bad_arguments"
    assert "no inputs folder" in result.text and "input (the script's standard input)" in result.text
    assert SECRET not in result.text


def test_bad_shapes_and_clashes(reg, inputs):
    view = AgentView(reg, inputs_dir=inputs)
    wrong = view.dispatch("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/read_inputs.py",
                                                   "inputs": "sales.csv"})
    assert wrong.is_error and "inputs must be an array of strings" in wrong.text
    wrong = view.dispatch("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/read_inputs.py",
                                                   "inputs": [3]})
    assert wrong.is_error and "inputs[0] must be a string" in wrong.text and '["sales.csv"]' in wrong.text
    (inputs / "other").mkdir()
    (inputs / "other" / "sales.csv").write_text("x")
    clash = call(view, "sales.csv", "other/sales.csv")
    assert clash.is_error and "would both be copied in as 'sales.csv'" in clash.text
    many = call(view, *(["sales.csv"] * 101))
    assert many.is_error and "at most 100" in many.text


def test_the_input_cap_applies(reg, inputs):
    (inputs / "big.bin").write_bytes(b"x" * 5000)
    view = AgentView(reg, inputs_dir=inputs, input_cap=4096)
    result = call(view, "big.bin")
    assert result.is_error and result.error == "bad_arguments" and "4,096 byte cap" in result.text


def test_the_application_must_name_a_real_folder(reg, tmp_path):
    with pytest.raises(ConfigError, match="not an existing folder"):
        AgentView(reg, inputs_dir=tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not an existing folder"):
        reg.for_agent(inputs_dir=tmp_path / "file")
    for too_wide in ("/", "~"):  # everything in it would be the model's to read
        with pytest.raises(ConfigError, match="would give the agent every file"):
            AgentView(reg, inputs_dir=too_wide)


def test_run_agent_passes_an_inputs_folder(reg, inputs):
    client = ScriptedClient([
        [("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/read_inputs.py",
                                   "args": ["sales.csv"], "inputs": ["sales.csv"]})],
        [("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/read_inputs.py",
                                   "args": ["secret.txt"], "inputs": ["../secret.txt"]})],
        "Done.",
    ])
    transcript = run_agent(client, reg, "Summarise sales.csv", model="scripted", inputs_dir=inputs)
    first, second = transcript.tool_calls
    assert "sales.csv = region,total" in first.result.text
    assert second.result.is_error and "contains '..'" in second.result.text
    assert SECRET not in json.dumps([m for m in transcript.messages], default=str)
    with pytest.raises(ConfigError, match="inputs_dir"):
        run_agent(client, AgentView(reg), "x", model="scripted", inputs_dir=inputs)

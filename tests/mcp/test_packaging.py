"""The MCP layer stays optional: `import ipyskills` (and the CLI's parser) loads no part of the SDK, and
without the SDK `ipyskills mcp` says how to get it."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO, server_env


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=str(REPO), env=server_env(), capture_output=True,
                          text=True, timeout=60, check=False)


def test_import_ipyskills_loads_no_mcp():
    proc = _python("import sys, ipyskills, ipyskills.cli\nipyskills.cli.build_parser()\n"
                   "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_without_the_sdk_the_command_says_what_to_install(tmp_path):
    (tmp_path / "s" / "one").mkdir(parents=True)
    (tmp_path / "s" / "one" / "SKILL.md").write_text("---\nname: one\ndescription: A skill. Use in tests.\n---\n")
    proc = _python("import sys\nsys.modules['mcp'] = None  # as if it were not installed\n"
                   "from ipyskills.cli import main\n"
                   f"sys.exit(main(['mcp', '--dir', {str(tmp_path / 's')!r}]))")
    assert proc.returncode == 1
    assert "ipyskills: error: the MCP server needs the MCP Python SDK" in proc.stderr
    assert "pip install 'ipyskills[mcp]'" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_filters_are_usage_errors_before_anything_starts(skills_root):
    proc = subprocess.run([sys.executable, "-m", "ipyskills", "mcp", "--dir", str(skills_root), "--allow", ","],
                          cwd=str(REPO), env=server_env(), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "skill names separated by commas" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ipyskills", "mcp", "--dir", str(skills_root), "--inputs",
                           str(skills_root / "missing")], cwd=str(REPO), env=server_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "is not an existing folder" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ipyskills", "mcp", "--dir", str(skills_root), "--http",
                           "--port", "70000"], cwd=str(REPO), env=server_env(), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 1 and "port must be a number from 0 to 65535" in proc.stderr


def test_config_repeats_every_option_given(skills_root, inputs_dir):
    proc = subprocess.run([sys.executable, "-m", "ipyskills", "mcp", "--config", "--dir", str(skills_root),
                           "--allow", "pdf-processing,data-tool", "--disable", "secret-ops", "--inputs",
                           str(inputs_dir), "--backend", "docker", "--timeout", "12.5", "--memory", "1g",
                           "--runtime", "runc", "--deps", "declared"],
                          cwd=str(REPO), env=server_env(), capture_output=True, text=True, timeout=60, check=True)
    import json

    config = json.loads(proc.stdout[:proc.stdout.rindex("}") + 1])
    entry = config["mcpServers"]["ipyskills"]
    assert entry["command"] == sys.executable
    assert entry["args"] == ["-m", "ipyskills", "mcp", "--dir", str(skills_root), "--allow",
                             "data-tool,pdf-processing", "--disable", "secret-ops", "--inputs", str(inputs_dir),
                             "--backend", "docker", "--timeout", "12.5", "--memory", "1g", "--runtime", "runc",
                             "--deps", "declared"]

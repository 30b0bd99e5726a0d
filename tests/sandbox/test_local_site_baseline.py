"""Local provisioning counts as already installed only what the run's interpreter really imports.

Found with benchmarks/real_tasks.py on the local backend: a package this process imported through its
PYTHONPATH (a run's environment has none), or one of this venv's packages while the run, as root under a
fresh uid, starts the system python3 (the venv's interpreter lived under /root), was taken as present, not
installed, and the script died on `No module named ...`."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from ipyskills import SkillRegistry
from ipyskills.sandbox.provision import local_site
from ipyskills.settings import Settings


@pytest.fixture
def cache_dir(monkeypatch):
    """A cache every run uid can read (root's runs switch to other uids)."""
    path = tempfile.mkdtemp(prefix="ipyskills-cache-")
    os.chmod(path, 0o755)
    monkeypatch.setenv("IPYSKILLS_CACHE_DIR", path)
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


def registry(folder: Path) -> SkillRegistry:
    return SkillRegistry([str(folder)], settings=Settings(default_roots=False, bundled_skills=False, pool_size=0))


def fake_distribution(folder: Path, name: str, version: str, module_text: str) -> Path:
    """A folder holding an installed-looking distribution (dist-info + module)."""
    folder.mkdir(parents=True, exist_ok=True)
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (folder / f"{name}.py").write_text(module_text)
    return folder


def test_a_distribution_only_on_this_processs_pythonpath_is_not_present_for_a_run(tmp_path, monkeypatch):
    extra = fake_distribution(tmp_path / "extra", "ipyskills_probe_dist", "1.0", "")
    monkeypatch.syspath_prepend(str(extra))  # what PYTHONPATH does for this process
    from importlib import metadata

    assert metadata.version("ipyskills_probe_dist") == "1.0"  # this process sees it
    assert "ipyskills-probe-dist" not in local_site.present_distributions(sys.executable)
    assert "pytest" in local_site.present_distributions(sys.executable)  # the venv's own packages count


def test_others_can_run_follows_folder_and_file_modes(tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    exe = private / "python3"
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, 0o755)
    os.chmod(tmp_path, 0o755)
    os.chmod(private, 0o700)
    assert not local_site._others_can_run(str(exe))
    link = tmp_path / "python-link"
    link.symlink_to(exe)
    assert not local_site._others_can_run(str(link))  # the link's target is still out of reach
    os.chmod(private, 0o755)
    parents_open = all(os.stat(p).st_mode & stat.S_IXOTH for p in tmp_path.parents)
    assert local_site._others_can_run(str(exe)) == parents_open
    os.chmod(exe, 0o750)
    assert not local_site._others_can_run(str(exe))


def test_as_root_with_an_unreachable_interpreter_runs_and_provisioning_use_the_system_python(monkeypatch):
    system = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if not system or os.path.realpath(system) == os.path.realpath(sys.executable):
        pytest.skip("no system python3 other than this interpreter")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(local_site, "_others_can_run", lambda path: False)
    assert local_site.run_interpreter() == system
    monkeypatch.setattr(local_site, "_others_can_run", lambda path: True)
    assert local_site.run_interpreter() == sys.executable
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # runs as this user: always this interpreter
    monkeypatch.setattr(local_site, "_others_can_run", lambda path: False)
    assert local_site.run_interpreter() == sys.executable


@pytest.mark.slow
def test_a_package_this_process_has_only_through_pythonpath_is_installed_for_a_local_run(
        tmp_path, monkeypatch, make_skill, cache_dir):
    import importlib.util

    if importlib.util.find_spec("tabulate") is not None:
        pytest.skip("tabulate is installed here: the fake one below would not be the only one")
    extra = fake_distribution(tmp_path / "extra", "tabulate", "0.9.0", "raise ImportError('the host fake')\n")
    monkeypatch.syspath_prepend(str(extra))
    monkeypatch.setenv("PYTHONPATH", str(extra))
    skill = make_skill({"requirements.txt": "tabulate==0.9.0\n",
                        "scripts/t.py": "import tabulate\nprint(tabulate.tabulate([[1, 2]]))\n"}, name="tab-baseline")
    result = registry(skill).run("tab-baseline", "scripts/t.py", backend="local")
    assert result.exit_code == 0, result.stderr
    assert "installed tabulate==0.9.0" in result.notice
    assert "1  2" in result.stdout


@pytest.mark.slow
def test_a_root_run_on_the_system_python_gets_what_only_this_venv_had(make_skill, cache_dir):
    """Where this machine's runs fall back to the system python3 (root, and this interpreter under a folder
    other users cannot enter, as with a pyenv under /root): a package the venv has and the system python
    lacks is installed for the run, not assumed."""
    python = local_site.run_interpreter()
    if python == sys.executable:
        pytest.skip("local runs here start this interpreter (not root, or it is reachable by other uids)")
    mine, theirs = local_site.present_distributions(sys.executable), local_site.present_distributions(python)
    candidates = ["defusedxml", "six", "pyyaml", "packaging", "traitlets", "mistune", "tabulate"]
    name = next((c for c in candidates if c in mine and c not in theirs), None)
    if name is None:
        pytest.skip(f"none of {candidates} is in this venv and missing from {python}")
    module = {"pyyaml": "yaml"}.get(name, name)
    skill = make_skill({"requirements.txt": f"{name}=={mine[name]}\n",
                        "scripts/x.py": f"import {module}\nprint('imported', {module}.__name__)\n"},
                       name="venv-only")
    result = registry(skill).run("venv-only", "scripts/x.py", backend="local")
    assert result.exit_code == 0, result.stderr
    assert f"imported {module}" in result.stdout
    assert f"installed {name}=={mine[name]}" in result.notice.lower()

"""c.IPySkills.* and %config: defaults match Settings, environment < config < %config, registry follows."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from ipyskills.notebook.config import TRAIT_FIELDS, IPySkillsConfig
from ipyskills.settings import Settings


def test_defaults_match_settings(workdir):
    cfg = IPySkillsConfig()
    assert cfg.settings() == Settings()
    for trait, field in TRAIT_FIELDS.items():
        value = getattr(cfg, trait)
        assert (tuple(value) if isinstance(value, list) else value) == getattr(Settings(), field)


def test_environment_fills_unset_traits_and_config_wins(workdir):
    from traitlets.config import Config

    config = Config()
    config.IPySkills.memory = "1g"
    from ipyskills.notebook.magics import IPySkills

    magics = IPySkills(config=config)
    magics.apply_environment({"IPYSKILLS_TIMEOUT": "7", "IPYSKILLS_MEMORY": "512m", "IPYSKILLS_NETWORK": "yes"})
    assert magics.timeout == 7.0 and magics.network is True
    assert magics.memory == "1g"


def test_ipython_config_reaches_the_magics(workdir):
    from IPython.core.interactiveshell import InteractiveShell

    from ipyskills.core import registry as core_registry
    from ipyskills.notebook.extension import _loaded

    core_registry._shared = None
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    try:
        shell.config.IPySkills.timeout = 12.5
        shell.config.IPySkills.bundled_skills = False
        shell.run_line_magic("load_ext", "ipyskills")
        magics = _loaded[id(shell)]
        assert magics.timeout == 12.5
        shell.run_line_magic("skills", "")
        assert magics.registry.settings.timeout == 12.5
    finally:
        shell.run_line_magic("unload_ext", "ipyskills")
        InteractiveShell.clear_instance()
        core_registry._shared = None


def test_percent_config_changes_the_registry(ip, magics, tmp_path):
    assert ip.run_line_magic("skills", "").names == ["Bad_Skill", "hello"]
    other = tmp_path / "team-skills" / "shared"
    other.mkdir(parents=True)
    (other / "SKILL.md").write_text("---\nname: shared\ndescription: Team skill.\n---\nBody\n")
    (other / "notes.md").write_text("more than five bytes\n")
    ip.run_line_magic("config", f"IPySkills.skill_dirs = [{str(other.parent)!r}]")
    assert "shared" in ip.run_line_magic("skills", "").names
    ip.run_line_magic("config", "IPySkills.default_roots = False")
    assert ip.run_line_magic("skills", "").names == ["shared"]
    ip.run_line_magic("config", "IPySkills.read_cap = 5")
    assert magics.registry.settings.read_cap == 5
    from ipyskills.notebook.magics import MagicError

    with pytest.raises(MagicError, match="5"):
        ip.run_line_magic("skill_load", "shared/notes.md")


def test_bundled_skills_switch(ip, magics):
    from ipyskills.core.discover import bundled_skills_dir

    if bundled_skills_dir() is None:
        pytest.skip("no bundled skills in this checkout")
    before = set(ip.run_line_magic("skills", "").names)
    ip.run_line_magic("config", "IPySkills.bundled_skills = True")
    after = set(ip.run_line_magic("skills", "").names)
    assert after > before


def test_percent_config_lists_traits(ip, cell):
    _, out = cell("%config IPySkills")
    for name in ("skill_dirs", "sandbox_backend", "timeout", "memory", "read_cap", "bundled_skills"):
        assert f"IPySkills.{name}" in out


@pytest.mark.parametrize("assignment", ["memory = 'lots'", "timeout = -1", "sandbox_backend = 'vm'",
                                        "read_cap = 0"])
def test_bad_values_are_refused(ip, magics, assignment, caplog):
    # %config reports a TraitError as one logged line and keeps the old value.
    trait = assignment.split()[0]
    before = getattr(magics, trait)
    ip.run_line_magic("config", f"IPySkills.{assignment}")
    assert getattr(magics, trait) == before
    assert trait in caplog.text
    with pytest.raises(TraitError):
        setattr(magics, trait, eval(assignment.split("=", 1)[1]))


# ---------------------------------------------------------------------------- input_cap, workspace_size


def test_size_settings_take_sizes_from_the_environment_and_refuse_nonsense(workdir):
    from ipyskills.errors import ConfigError
    from ipyskills.sandbox.policy import Limits

    env = Settings.from_env({"IPYSKILLS_INPUT_CAP": "256m", "IPYSKILLS_WORKSPACE_SIZE": "1073741824"})
    assert (env.input_cap, env.workspace_size) == (256 * 2**20, 2**30)
    limits = Limits.from_settings(env)  # what every run gets
    assert (limits.input_cap, limits.workspace_size) == (256 * 2**20, 2**30)
    for name, raw in (("INPUT_CAP", "lots"), ("WORKSPACE_SIZE", "0"), ("INPUT_CAP", "-5m")):
        with pytest.raises(ConfigError, match=f"IPYSKILLS_{name}") as err:
            Settings.from_env({f"IPYSKILLS_{name}": raw})
        assert "256m" in str(err.value) or "greater than zero" in str(err.value)
    with pytest.raises(ConfigError, match="workspace_size"):
        Settings(workspace_size="2 lots")
    # A workspace smaller than the inputs it must hold grows to leave them room.
    assert Limits.from_settings(Settings(input_cap="200m")).workspace_size == 264 * 2**20


def test_size_traits_reach_the_run(ip, magics, workdir, cell, caplog):
    from ipyskills.errors import SandboxError

    (workdir / "big.bin").write_bytes(b"x" * 3000)
    ip.run_line_magic("config", "IPySkills.input_cap = '2k'")
    assert magics.registry.settings.input_cap == 2048
    with pytest.raises(SandboxError, match="2,048 byte cap"):
        magics.registry.run_request("hello", "scripts/hi.py", inputs=["big.bin"])
    _, out = cell("%skill_run --backend local --input big.bin hello scripts/hi.py")
    assert "2,048 byte cap" in out and "input_cap" in out and "Traceback" not in out
    ip.run_line_magic("config", "IPySkills.input_cap = 4096")
    assert magics.registry.run_request("hello", "scripts/hi.py", inputs=["big.bin"]).inputs.total == 3000

    ip.run_line_magic("config", "IPySkills.workspace_size = '96m'")
    assert magics.registry.run_request("hello", "scripts/hi.py").limits.workspace_size == 96 * 2**20
    ip.run_line_magic("config", "IPySkills.workspace_size = 'huge'")  # refused, the old value kept
    assert magics.workspace_size == "96m" and "workspace_size" in caplog.text


@pytest.mark.docker
def test_workspace_size_sizes_the_docker_workspace(ip, magics, workdir):
    from ipyskills.sandbox.docker.backend import DockerBackend

    ready, reason = DockerBackend().readiness()
    if not ready:
        import os

        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker is required here but not ready: {reason}")
        pytest.skip(reason)
    script = workdir / "skills" / "hello" / "scripts" / "df.py"
    script.write_text("import os\ns = os.statvfs('.')\nprint(s.f_blocks * s.f_frsize // 2**20)\n")
    ip.run_line_magic("config", "IPySkills.pool_size = 0")
    ip.run_line_magic("config", "IPySkills.workspace_size = '40m'")
    ip.run_line_magic("config", "IPySkills.input_cap = '16m'")
    result = ip.run_line_magic("skill_run", "--backend docker hello scripts/df.py")
    assert result.ok, result.stderr
    assert result.stdout.strip() == "40"  # the working directory's file system, as the script sees it
    assert "workspace /work 40 MiB" in result.isolation
    # Smaller than input_cap (64m by default), it grows to leave the inputs room, and says so.
    ip.run_line_magic("config", "IPySkills.input_cap = '64m'")
    result = ip.run_line_magic("skill_run", "--backend docker hello scripts/df.py")
    assert result.stdout.strip() == "128" and "workspace /work 128 MiB" in result.isolation

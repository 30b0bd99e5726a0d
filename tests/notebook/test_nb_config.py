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

    import ipyskills
    from ipyskills.notebook.extension import _loaded

    ipyskills._default_registry = None
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
        ipyskills._default_registry = None


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

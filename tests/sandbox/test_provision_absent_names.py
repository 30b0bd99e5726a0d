"""A name the package index does not have: skipped with a notice when it comes from SKILL.md's prose (or an
inferred import), so the rest of the skill still works; an error when a requirements file declares it."""

from __future__ import annotations

import pytest

from ipyskills import SkillError, SkillRegistry
from ipyskills.settings import Settings

ABSENT = "ipyskills-no-such-distribution-4711"
SKILL_MD = f"""---
name: {{name}}
description: Prints a table. Use when a table is wanted.
---
# Tables

```bash
pip install tabulate {ABSENT}
```

Run `scripts/table.py`.
"""
SCRIPT = "import tabulate\nprint(tabulate.tabulate([[1, 2]], headers=['a', 'b']))\n"


def registry(folder, **settings):
    base = Settings(default_roots=False, bundled_skills=False, pool_size=0)
    return SkillRegistry([str(folder)], settings=base.with_overrides(**settings))


@pytest.fixture(autouse=True)
def _fresh_memory():
    from ipyskills.sandbox import runner

    runner._not_on_index.discard(ABSENT)
    yield
    runner._not_on_index.discard(ABSENT)


@pytest.mark.docker
@pytest.mark.slow
def test_a_stale_install_line_in_skill_md_is_skipped_and_the_rest_installed(docker_backend, make_skill):
    skill = make_skill({"SKILL.md": SKILL_MD.format(name="stale-line"), "scripts/table.py": SCRIPT},
                       name="stale-line")
    lines: list[str] = []
    result = registry(skill).run("stale-line", "scripts/table.py", backend="docker", progress=lines.append)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split()[:2] == ["a", "b"]  # tabulate was installed all the same
    assert f"dependencies: skipped {ABSENT} (SKILL.md:8): not on the package index" in result.notice
    assert any(f"skipping {ABSENT} (SKILL.md:8): no distribution of that name" in line for line in lines), lines
    again: list[str] = []
    result = registry(skill).run("stale-line", "scripts/table.py", backend="docker", progress=again.append)
    assert result.exit_code == 0 and f"skipped {ABSENT}" in result.notice  # said on every run
    assert not any("skipping" in line for line in again)  # remembered: the index is not asked again


@pytest.mark.docker
@pytest.mark.slow
def test_a_declared_name_the_index_lacks_is_still_an_error(docker_backend, make_skill):
    skill = make_skill({"requirements.txt": f"tabulate\n{ABSENT}\n", "scripts/table.py": SCRIPT},
                       name="declared-absent")
    with pytest.raises(SkillError) as caught:
        registry(skill).run("declared-absent", "scripts/table.py", backend="docker")
    message = str(caught.value)
    assert f"there is no distribution named '{ABSENT}' on the package index" in message
    assert "requirements.txt:2" in message

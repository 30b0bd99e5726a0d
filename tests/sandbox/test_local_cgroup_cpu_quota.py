"""Under Landlock a local run may read the CPU quota files joblib/loky opens to count CPUs (and only those
of the cgroup tree). Found with benchmarks/real_tasks.py: pydeseq2 and medchem (through joblib) died with
`PermissionError: ... '/sys/fs/cgroup/cpu/cpu.cfs_quota_us'` on the local backend only."""

from __future__ import annotations

import os

import pytest

from ipyskills import SkillRegistry
from ipyskills.settings import Settings

# What joblib/loky's _cpu_count_cgroup opens (cgroup v2, then v1).
QUOTA_FILES = ["/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"]
READ = """\
import os, sys
for path in sys.argv[1:]:
    try:
        with open(path) as fh:
            print("read", path, fh.read().strip()[:20])
    except OSError as exc:
        print("refused", path, type(exc).__name__)
"""


def test_a_local_run_reads_the_cpu_quota_as_joblib_does_and_not_the_rest_of_the_cgroup_tree(make_skill):
    from ipyskills.sandbox.local.isolation import landlock_abi

    present = [p for p in QUOTA_FILES if os.path.exists(p)]
    if not present:
        pytest.skip("no cgroup CPU quota file on this machine")
    if landlock_abi() < 1:
        pytest.skip("no Landlock here: reads are not confined at all")
    other = next((p for p in ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max",
                              "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max") if os.path.exists(p)), None)
    skill = make_skill({"scripts/read.py": READ}, name="quota")
    reg = SkillRegistry([str(skill)], settings=Settings(default_roots=False, bundled_skills=False, pool_size=0))
    result = reg.run("quota", "scripts/read.py", args=present + ([other] if other else []), backend="local")
    assert result.exit_code == 0, result.stderr
    assert "Landlock" in result.isolation
    for path in present:
        assert f"read {path}" in result.stdout, result.stdout
    if other:
        assert f"refused {other} PermissionError" in result.stdout, result.stdout

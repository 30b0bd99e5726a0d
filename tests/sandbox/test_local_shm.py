"""/dev/shm on the local backend: Python's multiprocessing (a Pool and a Lock: POSIX semaphores, made in
/dev/shm) works in a confined run, and nothing the run puts there is left in the host's /dev/shm.

Where a mount namespace can be made, the run gets a tmpfs of its own on /dev/shm (capped at tmp_size) that
vanishes with it; that is demanded as root and as an ordinary user (uid 1000) wherever this kernel allows
the namespace. Without one, a run with a uid of its own may use the host's /dev/shm (what that uid leaves is
removed afterwards) and the line says it is shared; a run as the current user cannot reach it (Landlock),
and Python's multiprocessing gets its semaphores and shared memory in the run folder instead.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from local_helpers import (
    AS_ROOT,
    CLONE_NEWNS,
    USER_UID,
    SkillFactory,
    as_user,
    landlock_abi,
    namespace_refusal,
    run_elsewhere,
    user_venv,
    without_namespaces,
)

# argv: a marker (the names it leaves in /dev/shm carry it), the name of a host file in /dev/shm
MULTI = textwrap.dedent("""
    import json, multiprocessing, os, sys
    marker, host_file = sys.argv[1], sys.argv[2]

    def square(x):
        return x * x

    if __name__ == "__main__":
        out = {}
        try:
            lock = multiprocessing.Lock()
            with lock:
                with multiprocessing.Pool(2) as pool:
                    out["pool"] = sum(pool.map(square, range(10)))
        except OSError as exc:
            out["pool"] = f"{type(exc).__name__}: {exc}"
        try:
            with open(f"/dev/shm/{marker}-left", "w") as fh:  # left behind on purpose
                fh.write("x" * 4096)
            out["left"] = "ok"
        except OSError as exc:
            out["left"] = f"{type(exc).__name__}: {exc}"
        try:
            with open(f"/dev/shm/{host_file}") as fh:
                out["sees_host_file"] = fh.read() == "host"
        except OSError:
            out["sees_host_file"] = False
        print(json.dumps(out))
""")


@pytest.fixture
def shm_skill(request):
    factory = SkillFactory()
    request.addfinalizer(factory.cleanup)
    return factory({"scripts/multi.py": MULTI}, name="multi")


@pytest.fixture
def host_shm():
    """A marker for names the run leaves, and a file of the host's in /dev/shm; afterwards, the host's
    /dev/shm entries that carry the marker (there must be none; they are removed either way)."""
    marker = f"ipyskills-test-{uuid.uuid4().hex}"
    host_file = Path(f"/dev/shm/{marker}-host")
    host_file.write_text("host")
    os.chmod(host_file, 0o644)
    seen = {"marker": marker, "host_file": host_file.name}
    yield seen
    host_file.unlink()
    left = [name for name in os.listdir("/dev/shm") if name.startswith(marker) and name != host_file.name]
    for name in left:
        os.unlink(f"/dev/shm/{name}")
    assert not left, f"left in the host's /dev/shm: {left}"


def check_private(out: dict) -> None:
    probe = json.loads(out["stdout"])
    assert out["exit_code"] == 0, out["stderr"]
    assert probe["pool"] == 285, probe
    assert probe["left"] == "ok" and probe["sees_host_file"] is False, probe  # its own /dev/shm, not the host's
    assert "/dev/shm: the run's own (64 MiB tmpfs, gone with the run)" in out["isolation"], out["isolation"]


@pytest.mark.skipif(not AS_ROOT, reason="as root; the uid 1000 case below covers an ordinary user")
def test_multiprocessing_works_as_root_in_a_private_dev_shm(shm_skill, host_shm):
    assert namespace_refusal(CLONE_NEWNS) == "", "root may always make a mount namespace here"
    out = run_elsewhere([sys.executable], shm_skill, "scripts/multi.py",
                        [host_shm["marker"], host_shm["host_file"]], cwd="/")
    check_private(out)


def test_multiprocessing_works_as_uid_1000_in_a_private_dev_shm(shm_skill, host_shm):
    with user_venv() as python:
        refusal = namespace_refusal(CLONE_NEWNS, prefix=[str(python)], **as_user())
        out = run_elsewhere([str(python)], shm_skill, "scripts/multi.py", [host_shm["marker"], host_shm["host_file"]],
                            **as_user())
    assert f"uid {USER_UID}" in out["isolation"]
    if refusal:  # the kernel refuses an unprivileged mount namespace: then the line must not claim one
        assert "/dev/shm: the run's own" not in out["isolation"]
        pytest.skip(f"this kernel refuses uid {USER_UID} a mount namespace: {refusal}")
    check_private(out)


def test_the_private_dev_shm_is_capped(make_skill):
    """The run's tmpfs holds tmp_size in all (it is memory, not disk): files of 6 MiB each, under the
    16 MiB per-file limit, until the tmpfs is full."""
    from local_helpers import run

    skill = make_skill({"scripts/fill.py": textwrap.dedent("""
        import errno
        written = 0
        try:
            for n in range(8):
                with open(f"/dev/shm/fill-{n}", "wb") as fh:
                    for _ in range(6):
                        fh.write(b"x" * 1024 * 1024)
                        fh.flush()
                        written += 1
        except OSError as exc:
            print(written, errno.errorcode[exc.errno])
    """)})
    result = run(skill, "scripts/fill.py", tmp_size="16m", memory="256m")
    assert "/dev/shm: the run's own (16 MiB tmpfs" in result.isolation, result.isolation
    mib, error = result.stdout.split()
    assert int(mib) <= 16 and error == "ENOSPC", result.stdout + result.stderr


@pytest.mark.skipif(not AS_ROOT, reason="needs root to make a user namespace that maps every uid")
def test_without_a_mount_namespace_a_run_uid_shares_dev_shm_and_its_files_are_removed(shm_skill, host_shm):
    out = run_elsewhere(without_namespaces("mnt", sys.executable), shm_skill, "scripts/multi.py",
                        [host_shm["marker"], host_shm["host_file"]], cwd="/")
    iso = out["isolation"]
    assert "(unprivileged, this run's own)" in iso, iso
    probe = json.loads(out["stdout"])
    assert probe["pool"] == 285 and probe["left"] == "ok", probe
    assert probe["sees_host_file"] is True  # the truth behind "shared"
    assert "/dev/shm shared with the host (no private one: " in iso, iso
    assert "what the run's uid leaves there is removed afterwards" in iso
    # host_shm checks that "<marker>-left" is gone from the host's /dev/shm


@pytest.mark.skipif(not AS_ROOT, reason="needs root to make the user namespace")
def test_without_a_mount_namespace_or_a_run_uid_python_multiprocessing_uses_the_run_folder(shm_skill, host_shm):
    """Root inside a user namespace that maps only itself: no uid to switch to, and no mount namespace.
    The host's /dev/shm stays out of reach (its files could not be told from the run's), and Python's
    multiprocessing gets its semaphores and shared memory in the run folder (sandbox/local/shm.py)."""
    if landlock_abi() < 1:
        pytest.skip("without Landlock /dev/shm is as open as every other folder, and the line says so")
    quotas = "echo 0 > /proc/sys/user/max_mnt_namespaces"
    prefix = ["unshare", "--user", "--map-root-user", "sh", "-c", f'{quotas}; exec "$0" "$@"', sys.executable]
    out = run_elsewhere(prefix, shm_skill, "scripts/multi.py", [host_shm["marker"], host_shm["host_file"]], cwd="/")
    iso = out["isolation"]
    assert ("/dev/shm: not reachable; Python's multiprocessing semaphores and shared memory in the run folder "
            "instead (gone with the run)") in iso, iso
    assert "sem_open/shm_open outside Python's multiprocessing (no private /dev/shm: " in iso
    probe = json.loads(out["stdout"])
    assert probe["pool"] == 285, probe  # the truth behind the line
    assert probe["left"].startswith("PermissionError") and probe["sees_host_file"] is False, probe

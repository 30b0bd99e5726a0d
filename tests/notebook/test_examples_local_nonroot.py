"""Every examples/*.ipynb runs clean on the local backend as an ordinary user (uid 1000, as on Binder), under
the local backend's full confinement, and shows what its text promises.

The user gets a venv made from /usr/bin/python3 (which it can read; this project's own interpreter may live
where it cannot), with this checkout and the project's installed packages (Jupyter's among them) on its
path, a copy of examples/ it owns, and a HOME and TMPDIR of its own, so every run folder of the local backend
lands where the test can see that none is left. Each notebook's isolation lines must claim what this kernel
lets uid 1000 have: Landlock, no network, a pid namespace with a private /proc and /dev/shm.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "examples").glob("*.ipynb"))


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


helpers = _load("ipyskills_local_helpers", REPO / "tests" / "sandbox" / "local_helpers.py")
examples = _load("ipyskills_test_examples", REPO / "tests" / "notebook" / "test_examples.py")

# Runs in the user's venv: executes one notebook with scripts/run_notebooks.py (a kernel of that venv,
# the notebook's folder as its working directory) and writes the executed copy.
DRIVER = """
import importlib.util, json, sys
from pathlib import Path
import nbformat
spec = importlib.util.spec_from_file_location("run_notebooks", sys.argv[1])
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)
nb, error = runner.execute(Path(sys.argv[2]), timeout=180)
nbformat.write(nb, sys.argv[3])
print(json.dumps({"error": error}))
"""


@pytest.fixture(scope="module")
def user_python():
    if sysconfig.get_python_version() != _system_python_version():
        pytest.skip("the project's packages are for another Python than /usr/bin/python3")
    with helpers.user_venv(extra_paths=[sysconfig.get_paths()["purelib"]]) as python:
        yield python


def _system_python_version() -> str:
    if not os.path.exists("/usr/bin/python3"):
        return ""
    done = subprocess.run(["/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_python_version())"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


@pytest.fixture
def user_folder():
    """A folder uid 1000 owns: a copy of examples/, a HOME, a TMPDIR, a place for the executed copy."""
    base = Path(tempfile.mkdtemp(prefix="ipyskills-test-nb-", dir="/tmp"))
    shutil.copytree(REPO / "examples", base / "examples",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    for name in ("home", "tmp", "out"):
        (base / name).mkdir()
    for dirpath, _dirs, files in os.walk(base):
        os.chown(dirpath, helpers.USER_UID, helpers.USER_UID)
        for name in files:
            os.chown(os.path.join(dirpath, name), helpers.USER_UID, helpers.USER_UID)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as uid 1000")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_example_notebook_as_uid_1000_on_the_local_backend(path, user_python, user_folder):
    shm_before = set(os.listdir("/dev/shm"))
    env = {"PATH": f"{user_python.parent}:/usr/bin:/bin", "HOME": str(user_folder / "home"),
           "TMPDIR": str(user_folder / "tmp"), "IPYTHONDIR": str(user_folder / "home" / ".ipython"),
           "IPYSKILLS_BACKEND": "local", "LANG": "C.UTF-8", **_network_settings()}
    executed = user_folder / "out" / path.name
    # A session of its own, so a hang ends with the kernel too (it is the driver's grandchild).
    driver = subprocess.Popen([str(user_python), "-c", DRIVER, str(REPO / "scripts" / "run_notebooks.py"),
                               str(user_folder / "examples" / path.name), str(executed)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                              **helpers.as_user(env=env))
    try:
        stdout, stderr = driver.communicate(timeout=500)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.communicate()
        pytest.fail(f"{path.name} did not finish in 500 s as uid 1000")
    assert driver.returncode == 0, stderr[-3000:]
    error = json.loads(stdout.strip().splitlines()[-1])["error"]

    import nbformat

    nb = nbformat.read(executed, as_version=4)
    assert error is None, f"{path.name} failed as uid 1000 on the local backend: {error}"
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert set(examples.runner.backends_seen(nb)) == {"local"}
    check = examples.CHECKS.get(path.stem)
    if check:
        try:
            check(examples.Outputs(nb), "local")
        except AssertionError as exc:  # say what the notebook showed, not only what was missing
            raise AssertionError(f"{exc}\n--- the notebook's output ---\n{examples.runner.text_outputs(nb)[-4000:]}") from None
    lines = [ln for ln in examples.runner.text_outputs(nb).splitlines() if "local: throw-away copy" in ln]
    if path.stem in ("quickstart", "sandbox"):
        assert lines, "these notebooks print a run's isolation line"
    for line in lines:
        assert_fully_confined(line, user_python)
    # Nothing left: no run folder in the user's TMPDIR, nothing new in the host's /dev/shm.
    assert not [n for n in os.listdir(user_folder / "tmp") if n.startswith("ipyskills-local-")]
    assert set(os.listdir("/dev/shm")) <= shm_before


def _network_settings() -> dict[str, str]:
    """How this machine reaches a package index (a skill's dependencies are resolved before its run):
    the index, proxy and certificate settings, as a user's login would have them."""
    return {k: v for k, v in os.environ.items()
            if k.startswith(("UV_", "PIP_")) or k.lower().endswith("_proxy")
            or k in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")}


def assert_fully_confined(line: str, python: Path) -> None:
    """What this kernel lets uid 1000 have must be in the line."""
    assert "runs as the current user (uid 1000)" in line, line
    user = {"prefix": [str(python)], **helpers.as_user()}
    if helpers.landlock_abi() >= 1:
        assert "writes only the run folder (Landlock ABI" in line, line
    if not helpers.namespace_refusal(helpers.CLONE_NEWNET, **user):
        assert "network: none (user+net namespace)" in line, line
    if not helpers.namespace_refusal(helpers.CLONE_NEWPID | helpers.CLONE_NEWNS, **user):
        assert "processes: pid namespace" in line and "host processes: not visible (private /proc)" in line, line
        assert "/dev/shm: the run's own" in line, line


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

"""The Binder-faithful test: the local backend and the example notebooks in a container started the way
Binder and Kubernetes start a pod: uid 1000, the engine's default seccomp profile and capabilities (so no
user namespaces), no Docker socket, `--network none`, and the project in a venv made from the image's own
Python, with binder/requirements.txt and the project's dependencies installed from wheels with no index
(downloaded on this machine once, into a cache folder, and mounted).

In there, for real: every no-namespace scenario of no_namespace_scenarios.py holds (UDP and every socket
but AF_UNIX refused, multiprocessing works with nothing in /dev/shm, a memory climb across processes
ended at the limit, setsid and double-forked children gone, a token in the home unreadable); binder/start
reports each of those as held; and every example notebook runs clean offline on the local backend, each
isolation line it prints claiming the same. This is the reference for the README's "hosted" section.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from no_namespace_scenarios import NETWORK_HELD, check_all

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("IPYSKILLS_BINDER_TEST_IMAGE", "ipyskills-sandbox:latest")
NOTEBOOKS = sorted(p.name for p in (REPO / "examples").glob("*.ipynb"))
VENV = "/tmp/venv"
# What a notebook needs to run headless, beyond what Binder installs (JupyterLab brings a kernel too).
RUNNER = ["nbclient>=0.8", "ipykernel>=6.25"]
HELD = (
    NETWORK_HELD,
    "processes: all killed at the end, those that leave the process group too (child subreaper)",
    "/dev/shm: not reachable; Python's multiprocessing semaphores and shared memory in the run folder instead",
    "total memory: 256 MiB (all the run's processes' resident memory, watched every 0.1 s)",
    "files: reads only system, interpreter and dependency folders, writes only the run folder (Landlock ABI",
    "host processes: /proc not readable but for the script's own entry (Landlock ABI",
)

pytestmark = pytest.mark.slow
tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def _unavailable(reason: str):
    if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
        pytest.fail(f"IPYSKILLS_REQUIRE_DOCKER=1 but {reason}")
    pytest.skip(reason)


def _requirements() -> list[str]:
    binder = [line.strip() for line in (REPO / "binder" / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [*binder, *project, *RUNNER, "pip"]


def _wheels(python_version: str) -> Path:
    """A folder of wheels for the image's Python, made once per requirement set (a cache folder)."""
    wanted = _requirements()
    key = hashlib.sha256(json.dumps([python_version, sorted(wanted)]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ipyskills-test" / f"binder-wheels-{key}"
    if (cache / ".complete").exists():
        return cache
    partial = cache.with_name(cache.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version",
                           python_version, "-d", str(partial), *wanted], capture_output=True, text=True, timeout=600,
                          check=False)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        _unavailable(f"the wheels for the Binder test could not be downloaded: {done.stderr[-1500:]}")
    (partial / ".complete").write_text("\n".join(wanted))
    shutil.rmtree(cache, ignore_errors=True)
    partial.rename(cache)
    return cache


def _docker(*args, timeout=120, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"docker {' '.join(args[:3])}...: {done.stderr[-3000:]}"
    return done


class Pod:
    def __init__(self, name: str):
        self.name = name

    def run(self, *command, env=None, timeout=300, check=True) -> subprocess.CompletedProcess:
        extra = [f"--env={k}={v}" for k, v in (env or {}).items()]
        return _docker("exec", "--workdir=/tmp", *extra, self.name, *command, timeout=timeout, check=check)

    def python(self, *args, **kwargs) -> subprocess.CompletedProcess:
        return self.run(f"{VENV}/bin/python", *args, **kwargs)


@pytest.fixture(scope="module")
def pod():
    if shutil.which("docker") is None or _docker("info", check=False, timeout=30).returncode != 0:
        _unavailable("no Docker engine answers")
    if _docker("image", "inspect", IMAGE, check=False, timeout=30).returncode != 0:
        _unavailable(f"the image {IMAGE} is not built (scripts/setup.sh builds it)")
    version = _docker("run", "--rm", "--network=none", IMAGE, "python3", "-c",
                      "import sys; print('%d.%d' % sys.version_info[:2])").stdout.strip()
    wheels = _wheels(version)
    name = f"ipyskills-test-binder-{uuid.uuid4().hex[:12]}"
    # As Kubernetes starts a pod: a uid of no privilege, the engine's default seccomp profile and
    # capabilities (nothing passed), no engine socket, no network.
    _docker("run", "--detach", f"--name={name}", "--user=1000:1000", "--network=none",
            "--env=HOME=/tmp/home", f"--volume={REPO}:/repo:ro", f"--volume={wheels}:/wheels:ro", IMAGE,
            "sleep", "900")
    try:
        pod = Pod(name)
        pip = next(p.name for p in wheels.glob("pip-*.whl"))
        pod.run("sh", "-c", "mkdir -p /tmp/home && python3 -m venv --without-pip " + VENV)
        install = pod.python(f"/wheels/{pip}/pip", "install", "-q", "--no-index", "--find-links=/wheels",
                             "--disable-pip-version-check", *[r for r in _requirements() if r != "pip"], timeout=600)
        assert install.returncode == 0, install.stderr
        pod.python("-c", "import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'ipyskills-repo.pth')"
                         ".write_text('/repo\\n')")
        yield pod
    finally:
        _docker("rm", "--force", name, check=False, timeout=60)


def test_the_pod_refuses_namespaces_and_reaches_no_network(pod):
    code = ("import ctypes, os, socket; libc = ctypes.CDLL(None, use_errno=True); "
            "print(libc.unshare(0x10000000) == 0 or os.strerror(ctypes.get_errno())); "
            "print(sorted(i[1] for i in socket.if_nameindex()))")
    assert pod.python("-c", code).stdout.splitlines() == ["Operation not permitted", "['lo']"]


def test_every_attack_fails_in_the_pod(pod):
    done = pod.python("/repo/tests/sandbox/no_namespace_scenarios.py", timeout=300)
    results = json.loads(done.stdout)
    check_all(results)
    assert pod.run("ls", "-A", "/dev/shm").stdout == ""


def test_binder_start_reports_each_of_them_as_held(pod):
    done = pod.run("bash", "/repo/binder/start", "echo", "handed over", env={"PATH": f"{VENV}/bin:/usr/bin:/bin"})
    assert done.stdout == "handed over\n", done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "ipyskills local backend on this machine:", done.stderr
    confined, missing = lines[1], lines[2]
    for claim in HELD:
        assert claim in confined, (claim, confined)
    assert "network" not in missing and "total memory" not in missing and "outlive" not in missing, missing


NOTEBOOK_DRIVER = """
import importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("run_notebooks", "/repo/scripts/run_notebooks.py")
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)
nb, error = runner.execute(Path(sys.argv[1]), timeout=180)
errors = [o.get("ename", "") + ": " + o.get("evalue", "") for c in nb.cells for o in c.get("outputs", [])
          if o.get("output_type") == "error"]
print(json.dumps({"error": error, "errors": errors, "backends": runner.backends_seen(nb),
                  "text": runner.text_outputs(nb)}))
"""


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_example_notebook_runs_offline_in_the_pod(pod, notebook):
    work = f"/tmp/nb-{notebook[:-6]}"
    pod.run("sh", "-c", f"rm -rf {work} && mkdir -p {work}/tmp && cp -r /repo/examples {work}/examples")
    env = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "TMPDIR": f"{work}/tmp", "IPYSKILLS_BACKEND": "local",
           "IPYTHONDIR": f"{work}/ipython", "LANG": "C.UTF-8"}
    done = pod.python("-c", NOTEBOOK_DRIVER, f"{work}/examples/{notebook}", env=env, timeout=400)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["error"] is None and out["errors"] == [], (out["error"], out["errors"], out["text"][-3000:])
    assert set(out["backends"]) == {"local"}, out["backends"]
    lines = [line for line in out["text"].splitlines() if "local: throw-away copy" in line]
    if notebook in ("quickstart.ipynb", "sandbox.ipynb"):
        assert lines, "these notebooks print a run's isolation line"
    for line in lines:
        assert NETWORK_HELD in line or "network: allowed (requested)" in line, line
        assert HELD[1] in line and HELD[4] in line, line
        assert "resident memory, watched every 0.1 s" in line and "total memory: NOT" not in line, line
    assert pod.run("ls", "-A", f"{work}/tmp").stdout == "", "a run folder was left"
    assert pod.run("ls", "-A", "/dev/shm").stdout == ""

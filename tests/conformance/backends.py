"""The backends of the conformance suite, as the tests see them: an object per backend whose `run` runs a
real skill script and returns the real result, what a run may have left behind, and the documented
differences (`expect_difference`). The `backend` fixture that picks them is in conftest.py."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

# the sandbox tests' helpers (pytest puts that folder on the path only when it collects it)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))

from local_helpers import USER_UID, SkillFactory  # noqa: E402
from podman_helpers import as_podman_user, podman_cli  # noqa: E402

from ipyskills.errors import SandboxError  # noqa: E402
from ipyskills.sandbox.inputs import stage_inputs  # noqa: E402
from ipyskills.sandbox.policy import Limits  # noqa: E402
from ipyskills.sandbox.request import RunRequest  # noqa: E402
from ipyskills.sandbox.result import Artifact, ExecuteResult  # noqa: E402

DEFAULT_TIMEOUT = 20.0  # seconds, unless a test gives its own


class Backend:
    """One backend as the tests see it: `run` a skill made of `files` and get its ExecuteResult."""

    id = ""
    client_uid = os.getuid()  # who runs the package

    def __init__(self):
        self.skills = SkillFactory()
        self.folders: list[Path] = []

    def run(self, files: dict, script: str = "scripts/x.py", *, args=(), stdin: bytes = b"", env=None,
            inputs: dict | None = None, opt_in: bool = True, **limits) -> ExecuteResult:
        """Run `script` of a fresh skill holding `files` with `limits` (Limits' names), `stdin`, `env` and
        `inputs` ({name: content}, staged into the workspace). `opt_in=False` leaves out a backend's
        documented opt-in (only Podman has one: IPYSKILLS_PODMAN_NO_LIMITS=1)."""
        skill = self.skills(files, name="conformance")
        staged = [self._input(name, content) for name, content in (inputs or {}).items()]
        return self._run(skill, script, list(args), stdin, dict(env or {}),
                         {"timeout": DEFAULT_TIMEOUT, **limits}, staged, opt_in)

    def leftovers(self, marker: str, since: float) -> list[str]:
        """What runs since `since` (time.time()) left: processes whose command line holds `marker`,
        temp folders of ipyskills, and the backend's own (containers)."""
        left = [f"process {pid}: {line}" for pid, line in _processes_with(marker)]
        return left + self._left_files(since) + self._left_own(since)

    def _input(self, name: str, content) -> str:
        folder = Path(tempfile.mkdtemp(prefix="ipyskills-test-inputs-"))
        os.chmod(folder, 0o755)  # uid 1000 (Podman's client) reads it too
        self.folders.append(folder)
        path = folder / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        os.chmod(path, 0o644)
        return str(path)

    def _left_files(self, since: float) -> list[str]:
        """The temp folders runs make: the local backend's run folders (named with their owner's pid) and
        the seccomp profile folder a Podman client writes (made since `since`). Other temp folders belong
        to other programs on this machine."""
        root, found = tempfile.gettempdir(), []
        for name in os.listdir(root):
            path = os.path.join(root, name)
            try:
                made = os.lstat(path).st_mtime >= since - 1
            except FileNotFoundError:
                continue
            if name.startswith(f"ipyskills-local-{os.getpid()}-") or (name.startswith("ipyskills-seccomp-") and made
                                                                      and os.lstat(path).st_uid == self.client_uid):
                found.append(f"temp folder {path}")
        return found

    def _left_own(self, since: float) -> list[str]:
        return []

    def close(self):
        self.skills.cleanup()
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)

    def _request(self, skill, script, args, stdin, env, limits, staged) -> RunRequest:
        inputs = stage_inputs(staged, cap=Limits(**limits).input_cap) if staged else None
        return RunRequest(skill_name=skill.name, skill_dir=skill, script=script, args=args, stdin=stdin,
                          limits=Limits(**limits), env=env, inputs=inputs)


class LocalInProcess(Backend):
    id = "local"

    def _run(self, skill, script, args, stdin, env, limits, staged, opt_in):
        from ipyskills.sandbox.local.backend import LocalBackend

        return LocalBackend().run(self._request(skill, script, args, stdin, env, limits, staged))


class DockerInProcess(Backend):
    def __init__(self, backend_id: str, runtime: str):
        super().__init__()
        from ipyskills.sandbox.docker.backend import DockerBackend

        self.id = backend_id
        self.docker = DockerBackend(runtime=runtime)

    def _run(self, skill, script, args, stdin, env, limits, staged, opt_in):
        return self.docker.run(self._request(skill, script, args, stdin, env, limits, staged))

    def _left_own(self, since: float) -> list[str]:
        """Containers of this process's runs since `since` that still exist, and host processes that
        name one of them (runc's shim, gVisor's runsc)."""
        from ipyskills.sandbox.docker.backend import flush_removals
        from ipyskills.sandbox.docker.cleanup import LABEL_PID

        assert flush_removals(timeout=30), "removals of finished runs' containers did not finish in 30 s"
        client = self.docker.client()
        events = client.events(since=int(since) - 1, until=int(time.time()) + 1, decode=True,
                               filters={"type": "container", "event": "create",
                                        "label": f"{LABEL_PID}={os.getpid()}"})
        made = {event["id"] for event in events}
        assert made, "no container of this process was created since the test began: nothing was checked"
        deadline = time.monotonic() + 15  # a finished gVisor container gets 5 s to go by itself
        while True:
            alive = {c["Id"] for c in client.api.containers(all=True, filters={"label": f"{LABEL_PID}={os.getpid()}"})}
            procs = [(pid, line) for pid, line in _processes_with(*made)]
            if (not (alive & made) and not procs) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        return ([f"container {c[:12]}" for c in alive & made]
                + [f"process {pid} of a run's container: {line}" for pid, line in procs])


PODMAN_DRIVER = textwrap.dedent("""
    import base64, dataclasses, json, sys
    from pathlib import Path
    from ipyskills.errors import SandboxError
    from ipyskills.sandbox.docker.backend import DockerBackend, flush_removals
    from ipyskills.sandbox.inputs import stage_inputs
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest
    spec = json.load(sys.stdin)
    limits = Limits(**spec["limits"])
    inputs = stage_inputs(spec["inputs"], cap=limits.input_cap) if spec["inputs"] else None
    request = RunRequest(skill_name=Path(spec["skill"]).name, skill_dir=Path(spec["skill"]), script=spec["script"],
                         args=spec["args"], stdin=base64.b64decode(spec["stdin"]), limits=limits, env=spec["env"],
                         inputs=inputs)
    try:
        result = DockerBackend().run(request)
    except SandboxError as exc:
        print(json.dumps({"refused": str(exc)}))
        sys.exit(0)
    finally:
        flush_removals(30)
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    fields["artifacts"] = [{"path": a.path, "size": a.size,
                            "data": None if a.data is None else base64.b64encode(a.data).decode()}
                           for a in result.artifacts]
    fields["findings"] = []  # no guard on this path
    print(json.dumps({"result": fields}))
""")


class PodmanAsUser(Backend):
    """The package as uid 1000 in a subprocess, talking to that user's rootless Podman."""

    id = "podman"
    client_uid = USER_UID

    def __init__(self, base: Path, url: str, python: Path):
        super().__init__()
        self.base, self.url, self.python = base, url, python

    def _run(self, skill, script, args, stdin, env, limits, staged, opt_in):
        from ipyskills.sandbox.docker.podman import NO_LIMITS_ENV

        spec = {"skill": str(skill), "script": script, "args": args, "stdin": base64.b64encode(stdin).decode(),
                "env": env, "limits": limits, "inputs": staged}
        user_env = {"DOCKER_HOST": self.url, **({NO_LIMITS_ENV: "1"} if opt_in else {}),
                    # what the host has that a script must not see (the same variables as in this process)
                    **{k: v for k, v in os.environ.items() if k.startswith("IPYSKILLS_CONFORMANCE_")}}
        done = subprocess.run([str(self.python), "-c", PODMAN_DRIVER], input=json.dumps(spec), capture_output=True,
                              text=True, timeout=limits["timeout"] + 90, check=False,
                              **as_podman_user(self.base, **user_env))
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        if "refused" in answer:
            raise SandboxError(answer["refused"])
        fields = answer["result"]
        fields["artifacts"] = [Artifact(a["path"], a["size"], None if a["data"] is None else base64.b64decode(a["data"]))
                               for a in fields["artifacts"]]
        fields["saved"] = [tuple(pair) for pair in fields["saved"]]
        return ExecuteResult(**fields)

    def _left_own(self, since: float) -> list[str]:
        deadline = time.monotonic() + 15
        while (left := podman_cli(self.base, "ps", "-aq").stdout.split()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return [f"container {c} in the user's Podman" for c in left]


def _processes_with(*needles: str) -> list[tuple[int, str]]:
    """(pid, command line) of live processes on this machine whose command line holds one of `needles`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                line = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except (OSError, IndexError):
            continue
        if any(needle in line for needle in needles):
            found.append((int(name), line[:200]))
    return found


# -- documented differences --------------------------------------------------------------------------------

def expect_difference(held: bool, reason: str) -> None:
    """A behaviour this backend is documented not to have: an expected failure quoting the documentation
    (`reason`), and a real failure when it behaved like every other backend after all (the documentation
    or this suite is then out of date)."""
    if held:
        pytest.fail(f"documented as different, but it held as on every other backend: {reason}")
    pytest.xfail(reason)


def unenforced_limits(result: ExecuteResult) -> str:
    """The part of the run's isolation line saying which limits were NOT enforced ('' when none)."""
    found = re.search(r"(?:memory|pids|cpu)(?:, (?:memory|pids|cpu))* limits NOT enforced \([^)]*\)",
                      result.isolation)
    return found.group() if found else ""


def not_enforced(result: ExecuteResult, limit: str) -> str:
    """For a run whose isolation line says `limit` was not enforced (rootless Podman on cgroup v1 with
    IPYSKILLS_PODMAN_NO_LIMITS=1), the reason for expect_difference; '' otherwise."""
    said = unenforced_limits(result)
    if limit not in said.split(" limits NOT")[0]:
        return ""
    return f"the run's isolation line says: '{said}'"


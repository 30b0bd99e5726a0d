"""What every backend does with a run: exit code and separate streams, stdin, the environment the script
sees, files in and out, a read-only skill and no network. Written once, run on each backend (conftest.py)."""

from __future__ import annotations

import hashlib
import json
import select
import socket
import subprocess

import pytest

from .backends import expect_difference

STREAMS = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n"


def test_exit_code_and_separate_streams(backend):
    result = backend.run({"scripts/x.py": STREAMS})
    assert (result.exit_code, result.stdout, result.stderr) == (3, "to stdout\n", "to stderr\n"), result.to_dict()
    assert not result.ok and not result.timed_out and not result.oom_killed
    assert result.duration > 0 and result.isolation


def test_stdin_reaches_the_script_byte_for_byte(backend):
    data = bytes(range(256)) * 64 + b"\nlast line without newline"
    echo = "import hashlib, sys\nb = sys.stdin.buffer.read()\nprint(len(b), hashlib.sha256(b).hexdigest())\n"
    result = backend.run({"scripts/x.py": echo}, stdin=data)
    assert result.stdout.split() == [str(len(data)), hashlib.sha256(data).hexdigest()], result.stderr


ENV = r'''
import json, os, sys
skill = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.environ["IPYSKILLS_OUTPUT"]
with open("made-in-cwd.txt", "w") as fh:
    fh.write("cwd")
with open(os.path.join(out, "made-in-output.txt"), "w") as fh:
    fh.write("output")
with open(os.path.join(os.environ["HOME"], ".conformance"), "w") as fh:
    fh.write("home")
print(json.dumps({"cwd": os.getcwd(), "skill": skill, "env": dict(os.environ)}))
'''


def test_the_environment_the_script_sees(backend, monkeypatch):
    """cwd is the workspace (what is written there comes back), IPYSKILLS_OUTPUT and HOME are writable, the
    caller's variables arrive and the host's do not."""
    monkeypatch.setenv("IPYSKILLS_CONFORMANCE_HOST_SECRET", "host-only")
    result = backend.run({"scripts/x.py": ENV}, env={"GIVEN_BY_CALLER": "yes"})
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    assert not seen["cwd"].startswith(seen["skill"]), "the working directory is the skill, not a workspace"
    assert {a.path: a.data for a in result.artifacts} == {"made-in-cwd.txt": b"cwd", "made-in-output.txt": b"output"}
    assert seen["env"]["GIVEN_BY_CALLER"] == "yes"
    assert "IPYSKILLS_CONFORMANCE_HOST_SECRET" not in seen["env"], "a host variable reached the script"
    assert "DOCKER_HOST" not in seen["env"] and "VIRTUAL_ENV" not in seen["env"]


FILES = r'''
import os
text = open("table.csv").read()
with open("report.txt", "w") as fh:
    fh.write(f"{len(text.splitlines())} lines: {text.splitlines()[1]}")
with open(os.path.join(os.environ["IPYSKILLS_OUTPUT"], "summary.bin"), "wb") as fh:
    fh.write(bytes(range(256)))
'''


def test_a_staged_input_is_read_and_written_files_come_back(backend):
    result = backend.run({"scripts/x.py": FILES}, inputs={"table.csv": "a,b\n1,2\n"})
    assert result.exit_code == 0, result.stderr
    back = {a.path: a.data for a in result.artifacts}
    assert back == {"report.txt": b"2 lines: 1,2", "summary.bin": bytes(range(256))}  # not the unchanged input
    assert not result.artifacts_truncated and not result.artifacts_error


READ_ONLY = r'''
import errno, os
skill = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for what, path, mode in (("new file", os.path.join(skill, "planted.txt"), "w"), ("own script", __file__, "a"),
                         ("SKILL.md", os.path.join(skill, "SKILL.md"), "a")):
    try:
        with open(path, mode) as fh:
            fh.write("x")
        print(what, "written")
    except OSError as exc:
        print(what, errno.errorcode[exc.errno])
'''


def test_the_skill_is_read_only_to_the_script(backend):
    result = backend.run({"scripts/x.py": READ_ONLY})
    assert result.exit_code == 0, result.stderr
    outcome = dict(line.rsplit(" ", 1) for line in result.stdout.splitlines())
    held = all(v in ("EROFS", "EACCES", "EPERM") for v in outcome.values())
    skill = backend.skills.made[-1] / "conformance"
    assert not (skill / "planted.txt").exists(), "the script wrote into the host's skill folder"
    assert (skill / "scripts" / "x.py").read_text() == READ_ONLY
    if backend.id == "local" and "read-only copy of the skill" not in result.isolation:
        # README / local backend: "read-only to a run uid; an owner could chmod it, so without root it is
        # only a copy" (the host's folder is still untouched, checked above)
        expect_difference(held, f"the local backend without a uid of its own runs a throw-away copy of the "
                                f"skill; the run's isolation line says: {result.isolation.split(',')[0]!r}")
    assert held, outcome


def _outside_address() -> str:
    """An IPv4 address of this host other than loopback: reachable from here, not from a run without
    network."""
    found = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=False).stdout
    for line in found.splitlines():
        address = line.split()[3].split("/")[0]
        if not address.startswith("127."):
            return address
    pytest.skip("this host has no IPv4 address besides loopback to try to reach")


NETWORK = r'''
import errno, socket, sys
for host, port in ((sys.argv[1], int(sys.argv[2])), ("1.1.1.1", 53)):
    try:
        socket.create_connection((host, port), timeout=3).close()
        print(host, "connected")
    except OSError as exc:
        print(host, errno.errorcode.get(exc.errno, type(exc).__name__))
'''


def test_the_network_is_off(backend):
    """A connect to a listener on this host's own outside address (which this process reaches) and to a
    public address both fail, and the listener sees nobody."""
    address = _outside_address()
    with socket.create_server((address, 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection((address, port), timeout=3).close()  # the control: reachable from here
        server.accept()[0].close()
        result = backend.run({"scripts/x.py": NETWORK}, args=[address, str(port)])
        pending = select.select([server], [], [], 0)[0]  # a connection made waits in the accept queue
    assert result.exit_code == 0, result.stderr
    outcome = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(outcome) == {address, "1.1.1.1"} and "connected" not in outcome.values(), outcome
    assert not pending, "the run connected to this host"

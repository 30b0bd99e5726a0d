"""Attacks on the local backend where no namespace can be made, as on Binder and in a Kubernetes pod
(the engine's default seccomp profile refuses user namespaces): run as a file by an ordinary user,
`python no_namespace_scenarios.py [NAME...]`, it runs each scenario through LocalBackend for real, watches
from outside what the script could not hide (a UDP and a TCP listener, the pids it started, /dev/shm, a
token file in the user's home) and prints one JSON object: scenario name -> what the run returned and what
was seen. Standard library and ipyskills only, so it runs in a bare container too.

Used by test_local_no_namespaces.py (on this machine, uid 1000 behind a seccomp filter that refuses
unshare, as the default profile does) and test_binder_container.py (in a container started like a pod).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

from ipyskills.sandbox.local.backend import LocalBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.runner import RunRequest

SKILL_MD = "---\nname: {name}\ndescription: A skill used by the sandbox tests.\n---\nBody.\n"


def _skill(base: Path, name: str, script: str) -> Path:
    skill = base / name
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD.format(name=name))
    (skill / "scripts" / "s.py").write_text(textwrap.dedent(script))
    return skill


def _run(skill: Path, args=(), **limits) -> dict:
    started = time.monotonic()
    result = LocalBackend().run(RunRequest(skill_name=skill.name, skill_dir=skill, script="scripts/s.py",
                                           args=[str(a) for a in args], limits=Limits(**{"timeout": 30, **limits})))
    return {"stdout": result.stdout, "stderr": result.stderr[-3000:], "isolation": result.isolation,
            "exit_code": result.exit_code, "oom_killed": result.oom_killed, "timed_out": result.timed_out,
            "seconds": round(time.monotonic() - started, 3)}


NETWORK = """
import json, socket, sys
udp_port, tcp_port = int(sys.argv[1]), int(sys.argv[2])
out = {}
def attempt(name, fn):
    try:
        out[name] = fn()
    except OSError as exc:
        out[name] = f"refused: {type(exc).__name__}: {exc}"
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"leak-udp", ("127.0.0.1", udp_port))
    return "sent"
def udp6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.sendto(b"leak-udp6", ("::1", udp_port))
    return "sent"
def tcp():
    s = socket.create_connection(("127.0.0.1", tcp_port), timeout=3)
    s.sendall(b"leak-tcp")
    return "sent"
def tcp_listen():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.listen()  # an unbound socket binds itself to a free port
    return "listening on %d" % s.getsockname()[1]
attempt("udp", udp)
attempt("udp6", udp6)
attempt("tcp", tcp)
attempt("tcp_listen", tcp_listen)
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) and "made")
attempt("ping", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP) and "made")
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) and "made")
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) and "made")
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) and "made")
attempt("socketpair", lambda: socket.socketpair() and "made")
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(0x40000000 | 41, 2, 2, 0) < 0:  # an x32 socket(AF_INET, SOCK_DGRAM)
    out["x32"] = "refused: " + __import__("os").strerror(ctypes.get_errno())
else:
    out["x32"] = "made"
print(json.dumps(out))
"""


def scenario_network(base: Path) -> dict:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    tcp.setblocking(False)
    try:
        out = _run(_skill(base, "net", NETWORK), [udp.getsockname()[1], tcp.getsockname()[1]])
        time.sleep(0.3)
        seen = []
        try:
            seen.append(udp.recv(100).decode())
        except BlockingIOError:
            pass
        try:
            conn, _ = tcp.accept()
            seen.append("tcp connection")
            conn.close()
        except BlockingIOError:
            pass
        out["seen"] = seen
        return out
    finally:
        udp.close()
        tcp.close()


MULTI = """
import json, multiprocessing, os, sys
from multiprocessing import shared_memory
marker, host_file = sys.argv[1], sys.argv[2]

def square(x):
    return x * x

def bump(value, lock):
    with lock:
        value.value += 1

if __name__ == "__main__":
    out = {}
    for method in ("fork", "spawn", "forkserver"):
        try:
            ctx = multiprocessing.get_context(method)
            lock = ctx.Lock()
            with lock:
                with ctx.Pool(2) as pool:
                    total = sum(pool.map(square, range(10)))
            value = ctx.Value("i", 0)
            shared_lock = ctx.Lock()
            workers = [ctx.Process(target=bump, args=(value, shared_lock)) for _ in range(3)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            out[method] = [total, value.value]
        except Exception as exc:
            out[method] = f"{type(exc).__name__}: {exc}"
    try:
        mem = shared_memory.SharedMemory(create=True, size=4096)
        mem.buf[:5] = b"hello"
        other = shared_memory.SharedMemory(name=mem.name)
        out["shared_memory"] = bytes(other.buf[:5]).decode()
        other.close()
        mem.close()  # not unlinked on purpose: the run's folder takes it along
    except Exception as exc:
        out["shared_memory"] = f"{type(exc).__name__}: {exc}"
    try:
        with open(f"/dev/shm/{marker}-left", "w") as fh:
            fh.write("x")
        out["left"] = "written"
    except OSError as exc:
        out["left"] = f"refused: {exc}"
    for name, mode in (("read", "r"), ("write", "a")):
        try:
            with open(f"/dev/shm/{host_file}", mode) as fh:
                fh.write("run was here") if mode == "a" else fh.read()
            out["host_file_" + name] = "done"
        except OSError as exc:
            out["host_file_" + name] = f"refused: {exc}"
    print(json.dumps(out))
"""


def scenario_multiprocessing(base: Path) -> dict:
    marker = f"ipyskills-test-{uuid.uuid4().hex[:12]}"
    host_file = Path(f"/dev/shm/{marker}-host")
    host_file.write_text("host")  # another process's file of the same user
    before = set(os.listdir("/dev/shm"))
    try:
        out = _run(_skill(base, "multi", MULTI), [marker, host_file.name])
        after = set(os.listdir("/dev/shm"))
        mine = os.getuid()
        new = []
        for name in sorted(after - before):
            try:
                if os.stat(f"/dev/shm/{name}").st_uid == mine:
                    new.append(name)
            except OSError:
                continue
        out["new_in_dev_shm"] = new
        out["host_file"] = host_file.read_text()
        return out
    finally:
        host_file.unlink()
        left = Path(f"/dev/shm/{marker}-left")
        if left.exists():
            left.unlink()


CLIMB = """
import os, subprocess, sys, time
# four processes of ~100 MiB each: each is far under the address-space limit, together over the total
code = "import sys, time; b = bytearray(100 * 1024 * 1024); print('holding', flush=True); time.sleep(30)"
workers = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
print("started", [w.pid for w in workers], flush=True)
for w in workers:
    w.wait()
print("all done")
"""


def scenario_memory(base: Path) -> dict:
    out = _run(_skill(base, "climb", CLIMB), memory=256 * 1024**2, timeout=25)
    started = out["stdout"].split("started ", 1)[-1].splitlines()[0] if "started " in out["stdout"] else "[]"
    out["alive_after"] = _alive(json.loads(started))
    return out


def scenario_escape_timeout(base: Path) -> dict:
    """The same escapes, then the script outstays its timeout: the host kills the reaper, and the helper
    ends what the reaper had collected."""
    return scenario_escape(base, timeout=3, stay=True)


UNDER = """
import subprocess, sys
# two processes of ~60 MiB each: under the 256 MiB total, so the run must end by itself
code = "import time; b = bytearray(60 * 1024 * 1024); time.sleep(1.5)"
workers = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
print("exit codes", [w.wait() for w in workers])
"""


def scenario_memory_under(base: Path) -> dict:
    return _run(_skill(base, "under", UNDER), memory=256 * 1024**2, timeout=25)


# socket(AF_INET, SOCK_DGRAM) through the i386 entry (int 0x80, system call 359), from a 64-bit process
I386_SOCKET = """
import ctypes, mmap, os, signal, sys
code = bytes.fromhex("53b867010000bb02000000b90200000031d2cd805bc3")
region = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
region.write(code)
call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(region)))
pid = os.fork()
if pid == 0:
    print("i386 socket() returned", call(), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("child killed by", signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else "nothing")
"""


def scenario_i386(base: Path) -> dict:
    return _run(_skill(base, "i386", I386_SOCKET))


ESCAPE = """
import json, os, subprocess, sys, time
session = subprocess.Popen(["sleep", "60"], start_new_session=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        os.execv("/bin/sleep", ["sleep", "61"])
    os.write(w, b"%d" % grandchild)
    os._exit(0)
grandchildren = [int(os.read(r, 32))]
time.sleep(0.2)
print(json.dumps({"setsid": session.pid, "double_fork": grandchildren}), flush=True)
"""


def _alive(pids) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            continue
    return alive


def scenario_escape(base: Path, timeout: float = 30, stay: bool = False) -> dict:
    script = ESCAPE + ("import sys; sys.stdout.flush(); time.sleep(60)\n" if stay else "")
    out = _run(_skill(base, "escape-stay" if stay else "escape", script), timeout=timeout)
    out["pids"], out["alive_after"] = {}, []
    try:
        out["pids"] = json.loads(out["stdout"].splitlines()[0])
        out["alive_after"] = _alive([out["pids"]["setsid"], *out["pids"]["double_fork"]])
    except (ValueError, KeyError, IndexError):
        pass
    return out


KEEP = """
import os, subprocess, sys, time
first, second = sys.argv[1], sys.argv[2]
subprocess.Popen(["sleep", first], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", second])
    os._exit(0)
time.sleep(60)
"""

OWNER = """
import sys
from pathlib import Path
from ipyskills.sandbox.local.backend import LocalBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.runner import RunRequest
LocalBackend().run(RunRequest(skill_name="keep", skill_dir=Path(sys.argv[1]), script="scripts/s.py",
                              args=sys.argv[2:], limits=Limits(timeout=60)))
"""


def _sleepers(durations) -> list[int]:
    wanted = {b"sleep\x00" + d.encode() + b"\x00" for d in durations}
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if fh.read() in wanted:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return _alive(found)


def scenario_owner_killed(base: Path) -> dict:
    """The owner (the kernel, say) is SIGKILLed while the run goes: its setsid and double-forked children
    die with it too (the helper gets SIGTERM as its parent-death signal and ends what it had collected)."""
    import random
    import signal
    import subprocess

    durations = [f"{random.randrange(600, 900)}.{random.randrange(10**6)}" for _ in range(2)]
    skill = _skill(base, "keep", KEEP)
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(skill), *durations], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while len(_sleepers(durations)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    started = _sleepers(durations)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 5
    while _sleepers(durations) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _sleepers(durations)
    for pid in left:  # not ours to leave, whatever the result
        os.kill(pid, signal.SIGKILL)
    return {"started": started, "alive_after": left}


TOKEN = """
import sys
try:
    print("read:", open(sys.argv[1]).read())
except OSError as exc:
    print("refused:", exc)
"""


def scenario_token(base: Path) -> dict:
    home = Path(os.path.expanduser("~"))
    token = home / f".ipyskills-test-token-{uuid.uuid4().hex[:8]}"
    token.write_text("secret-token")
    os.chmod(token, 0o600)
    try:
        return _run(_skill(base, "token", TOKEN), [token])
    finally:
        token.unlink()


SCENARIOS = {"network": scenario_network, "multiprocessing": scenario_multiprocessing, "memory": scenario_memory,
             "memory_under": scenario_memory_under, "escape": scenario_escape,
             "escape_timeout": scenario_escape_timeout, "owner_killed": scenario_owner_killed,
             "token": scenario_token,
             "i386": scenario_i386}


# -- what must hold (asserted by the tests, here and in the container) ------------------------------------

NETWORK_HELD = ("network: none, no socket but AF_UNIX can be made (seccomp filter: inet and inet6 of every "
                "type, UDP included, netlink, packet and the rest refused")


def check_network(out: dict) -> None:
    got = json.loads(out["stdout"])
    for name in ("udp", "udp6", "tcp", "tcp_listen", "raw", "ping", "netlink", "packet"):
        assert got[name].startswith("refused: PermissionError"), (name, got[name])
    assert got["x32"] == "refused: Function not implemented", got
    assert got["unix"] == "made" and got["socketpair"] == "made", got
    assert out["seen"] == [], out["seen"]  # nothing reached the listeners
    assert NETWORK_HELD in out["isolation"], out["isolation"]
    assert "network other than TCP" not in out["isolation"] and "network: NOT blocked" not in out["isolation"]


def check_multiprocessing(out: dict) -> None:
    got = json.loads(out["stdout"])
    for method in ("fork", "spawn", "forkserver"):
        assert got[method] == [285, 3], (method, got[method], out["stderr"])
    assert got["shared_memory"] == "hello", got
    assert got["left"].startswith("refused:"), got  # the host's /dev/shm stays closed...
    assert got["host_file_read"].startswith("refused:") and got["host_file_write"].startswith("refused:"), got
    assert out["host_file"] == "host"  # ...so another process's file of the same user is untouched
    assert out["new_in_dev_shm"] == [], out["new_in_dev_shm"]
    assert ("Python's multiprocessing semaphores and shared memory in the run folder instead (gone with the "
            "run)") in out["isolation"], out["isolation"]


def check_memory(out: dict, under: dict) -> None:
    assert out["oom_killed"] and out["exit_code"] == 137 and not out["timed_out"], out
    assert out["alive_after"] == [], f"workers outlived the memory kill: {out['alive_after']}"
    assert "all done" not in out["stdout"] and out["seconds"] < 10, out
    assert "total memory: 256 MiB (all the run's processes' resident memory, watched every 0.1 s)" in out["isolation"]
    assert "total memory: NOT limited" not in out["isolation"]
    assert under["exit_code"] == 0 and not under["oom_killed"], under
    assert under["stdout"] == "exit codes [0, 0]\n", under


def check_escape(out: dict, timed_out: bool = False) -> None:
    assert out["timed_out"] if timed_out else out["exit_code"] == 0, out
    assert out["pids"]["setsid"] and out["pids"]["double_fork"], out
    assert out["alive_after"] == [], f"outlived the run: {out['alive_after']}"
    assert "processes: all killed at the end, those that leave the process group too (child subreaper)" in out["isolation"]
    assert "may outlive the run" not in out["isolation"]


def check_owner_killed(out: dict) -> None:
    assert len(out["started"]) == 2, out
    assert out["alive_after"] == [], f"outlived their owner: {out['alive_after']}"


def check_token(out: dict) -> None:
    assert out["stdout"].startswith("refused: [Errno 13]"), out
    assert "writes only the run folder (Landlock ABI" in out["isolation"], out["isolation"]


def check_i386(out: dict) -> None:
    assert out["stdout"].strip().splitlines() == ["child killed by SIGSYS"], out


def check_all(results: dict) -> None:
    check_network(results["network"])
    check_multiprocessing(results["multiprocessing"])
    check_memory(results["memory"], results["memory_under"])
    check_escape(results["escape"])
    check_escape(results["escape_timeout"], timed_out=True)
    check_owner_killed(results["owner_killed"])
    check_token(results["token"])
    check_i386(results["i386"])
    assert results["run_folders_left"] == []


def main(names) -> None:
    base = Path(tempfile.mkdtemp(prefix="ipyskills-test-nons-"))
    os.chmod(base, 0o755)
    results = {}
    try:
        for name in names or SCENARIOS:
            results[name] = SCENARIOS[name](base)
        left = [p for p in os.listdir(os.environ.get("TMPDIR") or tempfile.gettempdir())
                if p.startswith(f"ipyskills-local-{os.getpid()}-")]
        results["run_folders_left"] = left
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])

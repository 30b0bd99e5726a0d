"""The local backend where user namespaces are refused, as in a Binder or Kubernetes pod (the engine's
default seccomp profile refuses them): an ordinary user (uid 1000) with a venv of its own runs the backend
behind a seccomp filter that answers unshare() with EPERM, as that profile does. Each scenario of
no_namespace_scenarios.py attacks for real and is watched from outside: UDP and every non-unix socket
refused (nothing reaches a listener), multiprocessing works with nothing left in /dev/shm and another
process's /dev/shm file of the same user untouched, a memory climb across four processes ended at the limit
(and a run under it left alone), setsid and double-forked children gone when the run returns, a token file
in the user's home unreadable, and the isolation line lists each as held.

test_binder_container.py runs the same scenarios in a container started like a pod."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from local_helpers import as_user, landlock_abi, namespace_refusal, user_venv
from no_namespace_scenarios import (
    check_escape,
    check_i386,
    check_memory,
    check_multiprocessing,
    check_owner_killed,
    check_network,
    check_token,
)

SCENARIOS = str(Path(__file__).with_name("no_namespace_scenarios.py"))

# The engine's default profile refuses unshare (and clone with namespace flags) without CAP_SYS_ADMIN;
# the helper makes its namespaces with unshare only, so refusing that one call is the same for it.
NO_USERNS = textwrap.dedent("""
    import ctypes, os, sys
    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]
    nr = {"x86_64": 272, "aarch64": 97}[os.uname().machine]
    code = (Filter * 4)(
        Filter(0x20, 0, 0, 0),                  # load the system call number
        Filter(0x15, 0, 1, nr),                 # unshare: EPERM
        Filter(0x06, 0, 0, 0x00050000 | 1),
        Filter(0x06, 0, 0, 0x7FFF0000),         # allow
    )
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)
    if libc.prctl(22, 2, ctypes.byref(Program(4, code)), 0, 0) != 0:
        sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
    os.execv(sys.argv[1], sys.argv[1:])
""")


@pytest.fixture(scope="module")
def results():
    with user_venv() as python:
        prefix = [str(python), "-c", NO_USERNS, str(python)]
        user = as_user()
        assert namespace_refusal(0x40000000, prefix=prefix, **user) == "Operation not permitted"
        if landlock_abi() < 4:
            pytest.skip("these scenarios read their line as on a kernel with Landlock ABI 4 or later")
        done = subprocess.run([*prefix, SCENARIOS], capture_output=True, text=True, timeout=240, check=False, **user)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["run_folders_left"] == [], found["run_folders_left"]
    return found


def test_udp_and_every_socket_but_unix_are_refused(results):
    check_network(results["network"])


def test_i386_system_calls_kill_the_process(results):
    check_i386(results["i386"])


def test_multiprocessing_works_and_leaves_nothing_in_dev_shm(results):
    check_multiprocessing(results["multiprocessing"])


def test_a_memory_climb_across_processes_ends_at_the_limit(results):
    check_memory(results["memory"], results["memory_under"])


def test_setsid_and_double_forked_children_do_not_outlive_the_run(results):
    check_escape(results["escape"])


def test_they_are_ended_when_the_run_times_out_too(results):
    check_escape(results["escape_timeout"], timed_out=True)


def test_they_die_with_a_killed_owner_too(results):
    check_owner_killed(results["owner_killed"])


def test_a_token_in_the_users_home_stays_unreadable(results):
    check_token(results["token"])

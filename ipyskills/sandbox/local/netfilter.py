"""A seccomp filter that keeps a run off the network where no network namespace could be made.

Used by the local backend's helper (sandbox/local/isolation.py) in the script process, right before exec,
when the run has no network and the kernel refused the network namespace (a container started with the
engine's default seccomp profile refuses user namespaces, so Binder and Kubernetes pods land here).
Landlock's network rules cover TCP connect and bind only; this filter refuses the sockets themselves:

- socket() and socketpair() may make AF_UNIX sockets only (the same rules as with a network namespace:
  abstract unix sockets are scoped by Landlock where it has ABI 6, paths by its file rules). Every other
  family is refused with EACCES: inet and inet6 of every type (UDP, TCP, raw, ICMP, SCTP, MPTCP), netlink,
  packet, vsock, AF_ALG and the rest.
- io_uring_setup/enter/register are refused with EPERM, since io_uring can make sockets without socket().
- Only the native architecture's system calls pass: a call made through another ABI (i386's int 0x80,
  whose socketcall multiplexes the socket calls, or arm32 on aarch64) kills the process, and x86_64's x32
  calls (number bit 30 set) answer ENOSYS, as on a kernel without x32.

The filter is a small classic-BPF program installed with prctl(PR_SET_SECCOMP) through ctypes: the
standard library has no seccomp binding, libseccomp's Python binding is a Debian package that a venv does
not see, and this helper runs before anything but the standard library is importable. An unprivileged
filter needs no-new-privileges, which the helper sets first. It is inherited by everything the script
starts and cannot be removed.
"""

import ctypes
import errno
import os
import struct

# linux/filter.h, linux/seccomp.h, linux/audit.h
_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_RET = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (the low 32 bits of args[0], little endian)
X32_BIT = 0x40000000
AF_UNIX = 1

# machine: (AUDIT_ARCH_*, socket, socketpair, (io_uring_setup, io_uring_enter, io_uring_register))
ARCHES = {
    "x86_64": (0xC000003E, 41, 53, (425, 426, 427)),
    "aarch64": (0xC00000B7, 198, 199, (425, 426, 427)),
}


def _insn(code, jt, jf, k):
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine=None):
    """The filter for `machine` (default: this one) as bytes of struct sock_filter, or None where the
    architecture is not known here."""
    machine = machine or os.uname().machine
    if machine not in ARCHES:
        return None
    arch, nr_socket, nr_socketpair, uring = ARCHES[machine]
    # Labels resolve to forward jumps; each entry is (code, true_label_or_offset, false_label_or_offset, k).
    code = [
        ("ld", _ARCH),
        ("jeq", arch, None, "kill"),
        ("ld", _NR),
    ]
    if machine == "x86_64":
        code.append(("jge", X32_BIT, "enosys", None))
    for nr in uring:
        code.append(("jeq", nr, "eperm", None))
    code += [
        ("jeq", nr_socket, "family", None),
        ("jeq", nr_socketpair, "family", None),
        ("ret", RET_ALLOW),
        ("label", "family"),
        ("ld", _ARG0),
        ("jeq", AF_UNIX, "allow", None),
        ("ret", RET_ERRNO | errno.EACCES),
        ("label", "allow"),
        ("ret", RET_ALLOW),
        ("label", "eperm"),
        ("ret", RET_ERRNO | errno.EPERM),
        ("label", "enosys"),
        ("ret", RET_ERRNO | errno.ENOSYS),
        ("label", "kill"),
        ("ret", RET_KILL_PROCESS),
    ]
    where, index = {}, 0
    for item in code:
        if item[0] == "label":
            where[item[1]] = index
        else:
            index += 1
    out, index = [], 0
    for item in code:
        op = item[0]
        if op == "label":
            continue

        def offset(label):
            return 0 if label is None else where[label] - index - 1

        if op == "ld":
            out.append(_insn(_LD_W_ABS, 0, 0, item[1]))
        elif op == "ret":
            out.append(_insn(_RET, 0, 0, item[1]))
        else:
            out.append(_insn(_JEQ if op == "jeq" else _JGE, offset(item[2]), offset(item[3]), item[1]))
        index += 1
    return b"".join(out)


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install():
    """Install the filter on this process (and all it will start). Returns '' when it is in force, else
    why not (an unknown architecture, no prctl, or the kernel's refusal)."""
    code = program()
    if code is None:
        return f"no filter for {os.uname().machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = getattr(libc, "prctl", None)
    if prctl is None:
        return "no prctl here"
    if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "no-new-privileges: " + os.strerror(ctypes.get_errno())
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Prog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return os.strerror(ctypes.get_errno())
    return ""

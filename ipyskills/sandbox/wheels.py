"""Host-side resolution and unpacking of wheels with uv: the one place that resolves against a package index.

`compile_lock` resolves requirement strings to a lock text (every distribution pinned with its sha256
hashes, wheels only: uv never builds anything here, since building an sdist runs its code; the sdist
opt-in builds in a container instead, see `provision.sdist`, and hands the wheels it made back through
`find_links`), `install_target` unpacks exactly the locked wheels into a
folder in site-packages layout, `lock_names` reads a lock back. Resolution runs on the host, so the sandbox
itself never needs a network; a target describes the Python the wheels are for (the sandbox image's, or a
host interpreter's).

Cache: uv's own cache (`uv cache dir`: `$UV_CACHE_DIR`, else `~/.cache/uv`), unless a caller passes
`cache_dir`. Sharing it means wheels the user already fetched with uv (numpy, scipy: ~100 MB) are not
fetched again, uv locks it for concurrent use, and `uv cache prune` / `uv cache clean` manage it; wheels in
it are content-addressed and checked against the lock's hashes on every install.

uv sees only what we choose: every requirement is checked as PEP 508 data and passed in its normalised
form (`core.requirement_text`; a line break, an option or a URL never reaches uv's input), constraints are
checked line by line, uv runs with `--no-config` in a private folder (`scratch.py`: no `uv.toml` planted in
a parent is read) with an environment built from a list (`uv_environment`), and its temp files go there too.

Index: from the environment only: `UV_INDEX_URL` / `UV_DEFAULT_INDEX` / `UV_EXTRA_INDEX_URL` / `UV_INDEX` /
`UV_FIND_LINKS` (and pip's `PIP_INDEX_URL` / `PIP_EXTRA_INDEX_URL`, passed on as their uv equivalents when
those are not set); `uv.toml` and pip.conf files are not read. `index_fingerprint()` is part of every cache
key, so an image resolved from one index is never served to a run configured for another.
"""

from __future__ import annotations

import os
import platform as _platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.requirement_text import UnsafeRequirement, checked_spec, shown
from ..errors import ProvisionError, SandboxError
from .scratch import scratch_dir

Log = Callable[[str], None]

IMAGE_PYTHON = "/usr/bin/python3"  # Debian bookworm's python3 in the sandbox image
IMAGE_PYTHON_VERSION = "3.11"
PROGRESS_EVERY = 5.0  # seconds between progress lines
UV_TIMEOUT = 1800.0  # a cold resolve + download of a big stack takes minutes, never half an hour
_NAME_RE = re.compile(r"[-_.]+")


def normalize(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return _NAME_RE.sub("-", name).lower()


@dataclass(frozen=True)
class Target:
    """The Python that wheels are resolved and unpacked for.

    For the sandbox image: `python_version` and `platform` (a uv `--python-platform` such as
    x86_64-manylinux_2_36). For a host interpreter: `platform` is None and `interpreter` names it, so uv
    resolves with that interpreter's own markers and tags.
    """

    python_version: str = IMAGE_PYTHON_VERSION
    platform: str | None = "x86_64-manylinux_2_36"
    interpreter: str | None = None
    torch_backend: str | None = None  # "cpu": the torch family from PyTorch's CPU index (provision.gpu)

    @classmethod
    def for_image(cls) -> Target:
        """The sandbox image on this machine's architecture (Debian bookworm: CPython 3.11, glibc 2.36)."""
        machine = _platform.machine().lower()
        arch = "aarch64" if machine in ("aarch64", "arm64") else "x86_64"
        return cls(python_version=IMAGE_PYTHON_VERSION, platform=f"{arch}-manylinux_2_36")

    @classmethod
    def for_host(cls, python: str) -> Target:
        """A host interpreter (a venv's python): uv resolves for that interpreter itself."""
        if os.path.realpath(python) == os.path.realpath(sys.executable):
            version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        else:
            try:
                out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                     capture_output=True, text=True, timeout=30, check=True)
            except (OSError, subprocess.SubprocessError) as exc:
                raise ProvisionError(f"cannot run the Python interpreter {python}: {exc}") from None
            version = out.stdout.strip()
        return cls(python_version=version, platform=None, interpreter=python)

    def describe(self) -> str:
        if self.platform is None:
            return f"CPython {self.python_version} ({self.interpreter or 'host'})"
        return f"CPython {self.python_version} on {self.platform}"

    def uv_args(self) -> list[str]:
        torch = ["--torch-backend", self.torch_backend] if self.torch_backend else []
        if self.platform is None:
            return ["--python", self.interpreter or sys.executable, *torch]
        # any local interpreter runs uv's side; the tags and markers come from these two options
        return ["--python", sys.executable, "--python-version", self.python_version,
                "--python-platform", self.platform, *torch]


def uv_bin() -> str:
    """The uv executable: the one the `uv` PyPI package ships, else `uv` on PATH."""
    try:
        from uv import find_uv_bin

        found = find_uv_bin()
        if found and os.access(found, os.X_OK):
            return found
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found:
        return found
    raise SandboxError("resolving packages needs uv, which is not installed: run `pip install uv` "
                       "(in the environment ipyskills runs from) and try again")


def compile_lock(specs: list[str], target: Target, *, constraints: str = "", log: Log = print,
                 find_links: str | None = None, cache_dir: str | None = None, preferences: str = "",
                 along: list[str] = ()) -> str:
    """Resolve `specs` (PEP 508 strings) to a lock text: one `name==version \\ --hash=sha256:...` entry per
    distribution, wheels only. `constraints` is the text of a constraints file (e.g. the base image's lock)
    that pins what is already there; `preferences` a lock whose versions uv keeps unless the specs need
    others (it is given as uv's existing output file); `find_links` a folder of extra wheels (built from
    sdists); `along` requirements resolved with `specs` but not named in messages (the image's own). Raises
    ProvisionError saying what to do for a distribution that does not exist, one without a wheel for the
    target (NoWheel), a resolver conflict, or no reachable index. Leaves no temp files behind."""
    specs = safe_specs(specs)
    if not specs:
        return ""
    along = [spec for spec in safe_specs(list(along)) if spec not in specs]
    constraints = safe_constraints(constraints)
    with scratch_dir("uv") as tmp:
        Path(tmp, "requirements.in").write_text("\n".join([*along, *specs]) + "\n")
        if preferences.strip():
            Path(tmp, "requirements.lock").write_text(safe_constraints(preferences))
        cmd = [uv_bin(), "pip", "compile", "requirements.in", "-o", "requirements.lock", "--generate-hashes",
               "--no-header", "--no-config", "--only-binary", ":all:", *target.uv_args()]
        if find_links:
            cmd += ["--find-links", find_links]
        if constraints.strip():
            Path(tmp, "constraints.txt").write_text(constraints)
            cmd += ["-c", "constraints.txt"]
        if cache_dir:
            cmd += ["--cache-dir", cache_dir]
        together = f" with the image's {len(along)}" if along else ""
        log(f"resolving {len(specs)} requirement(s){together} for {target.describe()} with uv "
            f"(stopped after {UV_TIMEOUT / 60:.0f} min)")
        code, lines = _run_uv(cmd, tmp, log, "resolving")
        if code != 0:
            raise _compile_error(lines, specs, target, code, pinned=lock_names(constraints))
        lock = Path(tmp, "requirements.lock").read_text()
    return lock


def install_target(lock: str, dest: Path, target: Target, *, log: Log = print,
                   cache_dir: str | None = None, find_links: str | None = None) -> None:
    """Unpack exactly the locked wheels (hash-checked, no dependency resolution) into `dest` in
    site-packages layout. Console scripts land in dest/bin; for an image target their `#!` line names the
    image's python3. `find_links` must be the folder compile_lock had when the lock holds wheels built
    from sdists."""
    dest = Path(dest)
    if not lock_names(lock):
        dest.mkdir(parents=True, exist_ok=True)
        return
    lock = safe_constraints(lock, strict=True)
    with scratch_dir("uv") as tmp:
        Path(tmp, "requirements.lock").write_text(lock)
        cmd = [uv_bin(), "pip", "install", "--target", str(dest.resolve()), "--no-deps", "--require-hashes",
               "--no-config", "-r", "requirements.lock", "--only-binary", ":all:", "--link-mode", "copy",
               *target.uv_args()]
        if find_links:
            cmd += ["--find-links", find_links]
        if cache_dir:
            cmd += ["--cache-dir", cache_dir]
        log(f"unpacking {len(lock_names(lock))} locked wheel(s) into {dest}")
        code, lines = _run_uv(cmd, tmp, log, "unpacking")
        if code != 0:
            raise ProvisionError(_install_error(lines, code))
    if target.platform is not None:
        _fix_shebangs(dest / "bin", IMAGE_PYTHON)


def lock_names(lock: str) -> dict[str, str]:
    """normalised name -> version, for every `name==version` entry of a lock text."""
    names: dict[str, str] = {}
    for line in lock.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)", line)
        if m:
            names[normalize(m.group(1))] = m.group(2)
    return names


# -- what uv is given --------------------------------------------------------------------------------------

def safe_specs(specs: list[str]) -> list[str]:
    """The normalised PEP 508 form of each spec; a ProvisionError for any that is not plain data (the
    requirement scan already refuses those: this is the last check before uv's input file)."""
    out = []
    for spec in specs:
        if isinstance(spec, str) and not spec.strip():
            continue
        try:
            out.append(checked_spec(spec))
        except UnsafeRequirement as why:
            raise ProvisionError(f"refusing the requirement '{shown(str(spec))}': {why}. Only a name, extras, "
                                 "version specifiers and a marker are passed to the resolver") from None
    return out


_PIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9,._-]*\])?==[A-Za-z0-9.+!_-]+"
                  r"(?: ; [A-Za-z0-9 ._<>=!~'\"()]+)?(?: \\)?")
_HASH_LINE = re.compile(r"--hash=sha256:[0-9a-f]{64}(?: \\)?")


def safe_constraints(text: str, strict: bool = False) -> str:
    """Only `name==version` pins and their `--hash=sha256:` lines (comments kept): anything else in a
    constraints or lock text is dropped with the hashes under it, or with `strict` refused."""
    out, keep = [], False
    for line in text.splitlines():
        body = line.strip()
        if not body or body.startswith("#"):
            out.append(line)
            continue
        if line[0].isspace() and _HASH_LINE.fullmatch(body):
            if keep:
                out.append(line)
            continue
        keep = bool(_PIN.fullmatch(body)) and not line[0].isspace()
        if keep:
            out.append(line)
        elif strict:
            raise ProvisionError(f"refusing a lock line that is not a pinned requirement: '{shown(body)}'")
    return "\n".join(out) + ("\n" if out else "")


# Variables uv may see: where the index is and how to reach it. Nothing else of the host's environment.
_UV_PASSED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "UV_CACHE_DIR",
              "XDG_CACHE_HOME", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "UV_INDEX",
              "UV_FIND_LINKS", "UV_INDEX_STRATEGY", "UV_KEYRING_PROVIDER", "UV_NATIVE_TLS", "UV_OFFLINE",
              "UV_HTTP_TIMEOUT", "UV_CONCURRENT_DOWNLOADS", "UV_INSECURE_HOST", "SSL_CERT_FILE", "SSL_CERT_DIR",
              "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
              "no_proxy", "NETRC")
_INDEX_VARS = ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_FIND_LINKS",
               "UV_INDEX_STRATEGY")


def uv_environment(tmp: str | None = None) -> dict[str, str]:
    """The environment uv runs with: the listed variables of ours, credentials of named indexes
    (UV_INDEX_<NAME>_USERNAME/PASSWORD), pip's index settings as uv's, and TMPDIR in our scratch folder."""
    host = os.environ
    env = {k: host[k] for k in _UV_PASSED if k in host}
    env.update({k: v for k, v in host.items() if re.fullmatch(r"UV_INDEX_[A-Z0-9_]+_(?:USERNAME|PASSWORD)", k)})
    if not (env.get("UV_INDEX_URL") or env.get("UV_DEFAULT_INDEX")) and host.get("PIP_INDEX_URL"):
        env["UV_INDEX_URL"] = host["PIP_INDEX_URL"]
    if not (env.get("UV_EXTRA_INDEX_URL") or env.get("UV_INDEX")) and host.get("PIP_EXTRA_INDEX_URL"):
        env["UV_EXTRA_INDEX_URL"] = host["PIP_EXTRA_INDEX_URL"]
    env.setdefault("PATH", os.defpath)
    env["UV_PYTHON_DOWNLOADS"] = "never"  # never fetch a Python behind the user's back
    env["NO_COLOR"] = "1"
    if tmp:
        env["TMPDIR"] = tmp  # uv's own lock and temp files stay in our private folder
    return env


def index_fingerprint() -> str:
    """A short hash of the effective index settings, for cache keys and image tags."""
    import hashlib

    env = uv_environment()
    text = "\n".join(f"{k}={env.get(k, '')}" for k in _INDEX_VARS)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- running uv ------------------------------------------------------------------------------------------

def _die_with_owner() -> None:
    """In uv's process, before exec: the kernel kills it when its owner dies (kill -9 mid-provisioning),
    so it never goes on writing into a scratch folder that the next provisioning removes."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG



def _run_uv(cmd: list[str], cwd: str, log: Log, doing: str) -> tuple[int, list[str]]:
    """Run uv, collecting its stderr; report progress to `log` at most every PROGRESS_EVERY seconds."""
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=uv_environment(str(cwd)), stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_owner if sys.platform == "linux" else None,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as exc:
        raise SandboxError(f"cannot run uv ({cmd[0]}): {exc}. Reinstall it with `pip install uv`.") from None
    lines: list[str] = []

    def read() -> None:
        for raw in proc.stderr:
            lines.append(raw.decode(errors="replace").rstrip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    t0 = last = time.monotonic()
    shown = 0
    try:
        while True:
            try:
                proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now - t0 > UV_TIMEOUT:
                raise ProvisionError(f"uv was still {doing} after {UV_TIMEOUT:.0f} s and was stopped; "
                                     "check the network and the index, then try again")
            if now - last >= PROGRESS_EVERY:
                news = [ln for ln in lines[shown:] if ln.strip()]
                shown = len(lines)
                detail = f": {news[-1].strip()}" if news else ""
                log(f"  uv still {doing} ({now - t0:.0f} s of at most {UV_TIMEOUT:.0f} s){detail}")
                last = now
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        proc.stderr.close()
    if proc.returncode == 0:
        for line in lines:
            if line.startswith(("Resolved ", "Installed ", "Prepared ")):
                log(f"  {line.strip()}")
    return proc.returncode, lines


def _fix_shebangs(bindir: Path, python: str) -> None:
    if not bindir.is_dir():
        return
    for script in bindir.iterdir():
        if not script.is_file() or script.is_symlink():
            continue
        data = script.read_bytes()
        if data.startswith(b"#!") and b"python" in data.split(b"\n", 1)[0]:
            rest = data.split(b"\n", 1)[1] if b"\n" in data else b""
            script.write_bytes(b"#!" + python.encode() + b"\n" + rest)


# -- uv's errors, as messages that say what to do -------------------------------------------------------

_NET_MARKERS = ("Failed to fetch", "Request failed after", "tcp connect error", "dns error",
                "error sending request", "Connection refused", "network was disabled", "timed out",
                "Could not connect", "failed to lookup address")


def _short(text: str, limit: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _causes(lines: list[str], limit: int = 600) -> str:
    """uv's explanation ("cause:" lines and their continuation), shortened."""
    out: list[str] = []
    for line in lines:
        s = line.strip()
        if not s or s.startswith("error:"):
            continue
        if s.startswith("hint:"):
            break
        out.append(s.removeprefix("cause:").strip())
    return _short(" ".join(out), limit).rstrip(".")


def _index_hint() -> str:
    return ("the host needs access to PyPI or to a configured index (set UV_INDEX_URL, or PIP_INDEX_URL, "
            "which ipyskills passes on to uv)")


OPT_IN = ("let it be built from its source distribution in a throwaway network-off container (source builds "
          "are turned off here): drop `--no-sdist` (ipyskills run / deps), unset IPYSKILLS_ALLOW_SDIST=0, "
          "`%config IPySkills.allow_sdist = True`, or Settings(allow_sdist=True)")


class NoWheel(ProvisionError):
    """A distribution has no wheel for the target; `name` is the one uv named, `specifier` the versions
    uv looked for ("<=0.23.0" when a dependency asks for an old release), "" when uv said none."""

    def __init__(self, message: str, name: str, specifier: str = ""):
        super().__init__(message)
        self.name = name
        self.specifier = specifier


class NotOnIndex(ProvisionError):
    """The index has no distribution of that name; `name` is the one uv named."""

    def __init__(self, message: str, name: str):
        super().__init__(message)
        self.name = name


def _compile_error(lines: list[str], specs: list[str], target: Target, code: int,
                   pinned: dict[str, str] | None = None) -> ProvisionError:
    """The error to raise: NoWheel or NotOnIndex (each naming the distribution uv named), or a plain
    ProvisionError. `pinned`: the constraints' versions."""
    text = "\n".join(lines)
    wanted = ", ".join(specs)
    # uv says "has no usable wheels" about old versions too when the new ones (which have wheels) clash
    # with a pinned package: that is a conflict, and building the old sdist would not be the fix.
    clash = [f"{name}=={version}" for name, version in (pinned or {}).items()
             if re.search(rf"(?<![\w.-]){re.escape(name)}=={re.escape(version)}(?![\w.])", text, re.IGNORECASE)]
    if clash and "depends on" in text and "No solution found" in text:
        return ProvisionError(f"the requirements cannot be satisfied together ({wanted}) with what is already "
                              f"pinned ({', '.join(clash)}): {_causes(lines)}. Loosen or change the pins that "
                              "conflict")
    if any(m in text for m in _NET_MARKERS) or "not found in the cache" in text:
        where = ""
        m = re.search(r"Failed to fetch: (\S+)", text)
        if m:
            where = f" ({m.group(1)})"
        offline = "network was disabled" in text or "not found in the cache" in text
        reason = ("uv is offline and its cache does not hold them" if offline
                  else f"no package index could be reached{where}")
        return ProvisionError(f"cannot resolve {wanted}: {reason}; {_index_hint()}, then try again")
    # the deepest culprit first ("Because deeptoolsintervals>=0.1.8 has no usable wheels and deeptools
    # depends on it"), then uv's hint, which names what was asked for
    m = re.search(r"Because (?:all versions of )?([A-Za-z0-9][A-Za-z0-9._-]*)(\S*) (?:has|have) no usable wheels",
                  text) or re.search(r"Wheels are required for `([^`]+)`()", text)
    abi = re.search(r"only found wheels for `([^`]+)`[^\n]*with the following (Python ABI|platform) tags", text)
    if m or abi or "have no usable wheels" in text:
        name = (m or abi).group(1) if (m or abi) else _first_name(text) or wanted
        return NoWheel(f"{name} has no wheel for {target.describe()} that fits {wanted} (only a source "
                       f"distribution, or wheels for other Pythons/platforms), and building from source is turned "
                       f"off. Pin a version of {name} that publishes a wheel for this target, pick another "
                       f"package, or {OPT_IN}. uv: {_causes(lines, 300)}", name,
                       specifier=m.group(2) if m and m.group(2) else "")
    m = re.search(r"Because (\S+) was not found in the package registry", text) or \
        re.search(r"Because (\S+) was not found in the provided package locations", text) or \
        re.search(r"No matching distribution found for (\S+)", text)
    if m:
        name = m.group(1)
        return NotOnIndex(f"there is no distribution named {name!r} on the package index: check the spelling "
                          f"(the name as on pypi.org, e.g. `beautifulsoup4` for bs4, `pyyaml` for yaml) or "
                          f"configure the index that has it (UV_INDEX_URL)", name)
    if "No solution found" in text:
        return ProvisionError(f"the requirements cannot be satisfied together ({wanted}): {_causes(lines)}. "
                              "Loosen or change the pins that conflict")
    if any("Couldn't parse" in ln or "Unexpected" in ln or "expected" in ln for ln in lines):
        return ProvisionError(f"a requirement could not be parsed ({wanted}): {_causes(lines) or _short(text)}")
    return ProvisionError(f"uv could not resolve {wanted} (exit {code}): {_short(' '.join(lines[-6:]), 600)}")


def _first_name(text: str) -> str:
    m = re.search(r"all versions of (\S+) have no usable wheels", text) or \
        re.search(r"Because (\S+)[^\n]* have no usable wheels", text)
    return m.group(1) if m else ""


def _install_error(lines: list[str], code: int) -> str:
    text = "\n".join(lines)
    if any(m in text for m in _NET_MARKERS):
        return f"cannot download the locked wheels: {_index_hint()}, then try again"
    m = re.search(r"Hash mismatch for `([^`]+)`", text)
    if m or ("hash" in text.lower() and "mismatch" in text.lower()):
        what = m.group(1) if m else "a downloaded wheel"
        got = re.search(r"Computed:\s*(\S+)", text)
        return (f"{what} does not match the hash in the lock (the index or the cache served different bytes"
                f"{': ' + got.group(1) if got else ''}); refusing it. Nothing was installed; try again, and "
                f"if it persists, check the index (UV_INDEX_URL) or clear uv's cache (`uv cache clean`)")
    return f"uv could not unpack the locked wheels (exit {code}): {_short(' '.join(lines[-6:]), 600)}"

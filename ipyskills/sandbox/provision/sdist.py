"""The sdist opt-in (`allow_sdist`): a wheel built from a source distribution in a throwaway container.

Provisioning is wheels only, because installing an sdist means running the package's own build code
(setup.py, or a build backend with its plugins) as whoever builds it. When the user opts in, that code
still never runs on the host:
1. the host downloads the sdist from the index (the simple API, no build step: pip and uv would both run
   its metadata hooks) and checks it against the index's sha256;
2. the host resolves what the build needs (`build` plus the backend named in the sdist's
   `[build-system]`, or setuptools when it names none) as hash-checked wheels for the sandbox image's
   Python and unpacks them into the container's build context;
3. a container of the sandbox image unpacks the sdist and runs `python3 -m build --wheel --no-isolation`
   with the network off, as uid 1000, with every capability dropped, the sandbox's seccomp profile, a
   memory, process and CPU limit and a deadline; files travel in and out through the engine's archive API,
   so a remote engine works too. A backend that asks for more than it declared (`Missing dependencies`)
   gets those resolved on the host and one more try;
4. the wheel it made is copied out and becomes an ordinary wheel for uv (a `--find-links` folder): it is
   resolved, hashed into the lock and installed exactly like one from the index.
The container is removed whatever happens (and carries the owner labels, so `sandbox cleanup` removes it
if this process is killed mid-build).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

from ...errors import ProvisionError, SandboxError
from ..wheels import IMAGE_PYTHON_VERSION, Log, NoWheel, Target, compile_lock, install_target, normalize

BUILD_TIMEOUT = 600.0  # seconds one build may take (a pure-Python sdist takes a few)
BUILD_MEMORY = "1g"
BUILD_PIDS = 256
BUILD_CPUS = 1.0
MAX_SDIST_BYTES = 100 * 1024**2
MAX_WHEEL_BYTES = 1024**3  # what a build may hand back
MAX_ROUNDS = 6  # resolve rounds: each may find one more sdist-only distribution (a dependency of the last)
DEFAULT_BUILD_REQUIRES = ["setuptools>=40.8.0"]  # PEP 517's fallback for an sdist without [build-system]
LABEL_SDIST_BUILD = "ipyskills.sdist-build"  # on build containers: the distribution being built
LOG_TAIL = 1500  # characters of the build log an error quotes
LOG_LINES = 400  # lines of the build log read back (the end: errors and "Missing dependencies")

# Unpack the sdist (inside the container: its archive is untrusted too), then build from its top folder.
_BUILD_SCRIPT = r"""
import os, shutil, subprocess, sys
shutil.unpack_archive('/build/in/' + sys.argv[1], '/build/src')
top = [e for e in os.listdir('/build/src') if os.path.isdir(os.path.join('/build/src', e))]
src = os.path.join('/build/src', top[0]) if len(top) == 1 else '/build/src'
sys.exit(subprocess.call([sys.executable, '-m', 'build', '--wheel', '--no-isolation', '--outdir', '/build/out', src]))
"""


def resolve_with_sdists(specs: list[str], target: Target, *, constraints: str, wheel_dir: Path, builder,
                        log: Log) -> str:
    """compile_lock, where each distribution that has no wheel for `target` is built from its sdist
    with `builder(sdist, name, out_dir)` into `wheel_dir`, and the resolve is tried again with those
    wheels. Returns the lock (built wheels pinned by their hash like any other)."""
    built: set[str] = set()
    for _ in range(MAX_ROUNDS):
        try:
            return compile_lock(specs, target, constraints=constraints, log=log, find_links=str(wheel_dir))
        except NoWheel as exc:
            name = normalize(re.split(r"[\s<>=!~;\[(]", exc.name.strip(), maxsplit=1)[0])  # "x==1.0" -> "x"
            if name in built:  # the wheel we built does not fit (e.g. another version is needed, or another ABI)
                made = ", ".join(sorted(p.name for p in wheel_dir.glob("*.whl")))
                raise ProvisionError(f"{name} was built from its source distribution ({made}), but the "
                                     f"resolve still finds no wheel of it that fits: pin the version of {name} "
                                     f"that the other requirements allow. uv: {str(exc).split(' uv: ', 1)[-1]}"
                                     ) from None
            built.add(name)
            log(f"dependencies: {name} has no wheel; building it from its source distribution "
                "(allow_sdist) in a throwaway container with the network off")
            with tempfile.TemporaryDirectory(prefix="ipyskills-sdist-") as tmp:
                sdist = fetch_sdist(name, _specifier_for(name, specs), Path(tmp), target.python_version, log)
                builder(sdist, name, wheel_dir)
    raise ProvisionError(f"building from source did not converge after {MAX_ROUNDS} rounds ({', '.join(built)})")


def _specifier_for(name: str, specs: list[str]) -> str:
    """The version specifier the skill asked for `name` with ('' when it is only a dependency)."""
    for spec in specs:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)", spec)
        if m and normalize(m.group(1)) == name:
            return m.group(2).strip()
    return ""


# -- the sdist, from the index ----------------------------------------------------------------------------

def index_url() -> str:
    """The index uv would use (its settings first, then pip's), PyPI otherwise."""
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(var):
            return os.environ[var].rstrip("/") + "/"
    return "https://pypi.org/simple/"


def fetch_sdist(name: str, specifier: str, dest: Path, python_version: str = IMAGE_PYTHON_VERSION,
                log: Log = print) -> Path:
    """Download the newest sdist of `name` that fits `specifier` and `python_version` into `dest`,
    checked against the index's sha256. Nothing in it is run."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.utils import InvalidSdistFilename, parse_sdist_filename
    from packaging.version import InvalidVersion

    try:
        wanted = SpecifierSet(specifier)
    except InvalidSpecifier:
        wanted = SpecifierSet()
    files = _index_files(name)
    candidates = []
    for f in files:
        if f.get("yanked"):
            continue
        try:
            project, version = parse_sdist_filename(f["filename"])  # wheels and odd names raise
            if f.get("requires-python") and not SpecifierSet(f["requires-python"]).contains(python_version):
                continue
        except (InvalidSdistFilename, InvalidVersion, InvalidSpecifier):
            continue
        if normalize(project) != name:
            continue
        if version in wanted and (not version.is_prerelease or wanted.prereleases):
            candidates.append((version, f))
    if not candidates:
        raise ProvisionError(f"{name} has no wheel for the sandbox's Python and no source distribution "
                             f"that fits {specifier or 'any version'} either, on {index_url()}: pin a version "
                             "that publishes one, or pick another package")
    version, chosen = max(candidates, key=lambda c: c[0])
    sha256 = (chosen.get("hashes") or {}).get("sha256")
    if not sha256:
        raise ProvisionError(f"the index gives no sha256 for {chosen['filename']}, so it cannot be checked; "
                             "refusing it")
    log(f"  downloading {chosen['filename']}")
    data = _get(chosen["url"], f"downloading {chosen['filename']}", limit=MAX_SDIST_BYTES)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ProvisionError(f"{chosen['filename']} does not match the sha256 the index gives for it (the "
                             "download was altered or cut short); refusing it. Try again")
    path = dest / os.path.basename(chosen["filename"])
    path.write_bytes(data)
    return path


def _index_files(name: str) -> list[dict]:
    """The files of project `name` on the index (PEP 691 JSON, or PEP 503 HTML), with absolute URLs."""
    page = urllib.parse.urljoin(index_url(), f"{name}/")
    body, ctype = _get(page, f"looking {name} up", accept="application/vnd.pypi.simple.v1+json, "
                       "text/html;q=0.1", with_type=True)
    if "json" in ctype:
        files = json.loads(body)["files"]
    else:
        files = _html_files(body.decode(errors="replace"))
    for f in files:
        f["url"] = urllib.parse.urljoin(page, f["url"])
    return files


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.files: list[dict] = []
        self._current: dict | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            a = dict(attrs)
            url, _, fragment = (a.get("href") or "").partition("#")
            algo, _, digest = fragment.partition("=")
            self._current = {"url": url, "hashes": {algo: digest} if digest else {},
                             "requires-python": a.get("data-requires-python"),
                             "yanked": "data-yanked" in a, "filename": ""}

    def handle_data(self, data):
        if self._current is not None:
            self._current["filename"] += data.strip()

    def handle_endtag(self, tag):
        if tag == "a" and self._current is not None:
            self.files.append(self._current)
            self._current = None


def _html_files(html: str) -> list[dict]:
    parser = _Links()
    parser.feed(html)
    return parser.files


def _get(url: str, doing: str, *, accept: str = "*/*", limit: int = 20 * 1024**2, with_type: bool = False):
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "ipyskills"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # the index URL: https or the user's own
            data = response.read(limit + 1)
            ctype = response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        raise ProvisionError(f"{doing} failed: the index answered {exc.code} for {url}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProvisionError(f"{doing} failed: the index could not be reached ({reason}); the host needs "
                             "access to PyPI or to the index in UV_INDEX_URL / PIP_INDEX_URL") from None
    if len(data) > limit:
        raise ProvisionError(f"{doing}: {url} is larger than {limit // 1024**2} MB; refusing it")
    return (data, ctype) if with_type else data


def build_requires(sdist: Path) -> list[str]:
    """`[build-system].requires` of the sdist's pyproject.toml (read from the archive, not unpacked), or
    setuptools when it has none."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: setuptools first, and the build's own report adds what is missing
        return list(DEFAULT_BUILD_REQUIRES)
    text = _member_text(sdist, "pyproject.toml")
    if text is None:
        return list(DEFAULT_BUILD_REQUIRES)
    try:
        system = tomllib.loads(text).get("build-system") or {}
    except tomllib.TOMLDecodeError:
        return list(DEFAULT_BUILD_REQUIRES)
    requires = system.get("requires")
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        return list(DEFAULT_BUILD_REQUIRES)
    return requires


def _member_text(sdist: Path, basename: str) -> str | None:
    """The text of `<top>/<basename>` in the archive, or None."""
    import zipfile

    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as z:
                names = [n for n in z.namelist() if n.count("/") == 1 and n.endswith("/" + basename)]
                return z.read(names[0]).decode(errors="replace") if names else None
        with tarfile.open(sdist, "r:*") as tar:
            for member in tar:
                if member.offset_data > 1024**3:  # a compression bomb: the container's build will say more
                    return None
                if member.isfile() and member.name.count("/") == 1 and member.name.endswith("/" + basename):
                    if member.size > 1024**2:
                        return None
                    return tar.extractfile(member).read().decode(errors="replace")
    except (OSError, tarfile.TarError, zipfile.BadZipFile, KeyError):
        return None
    return None


# -- the build, in a container ------------------------------------------------------------------------------

def docker_builder(client, image: str, *, log: Log = print, timeout: float = BUILD_TIMEOUT):
    """A builder(sdist, name, out_dir) for resolve_with_sdists that builds in containers of `image`."""
    def build(sdist: Path, name: str, out_dir: Path) -> Path:
        return build_wheel(client, image, sdist, name, out_dir, log=log, timeout=timeout)
    return build


def engine_builder(image: str, *, log: Log = print, timeout: float = BUILD_TIMEOUT):
    """A builder for the local backend: connects to the Docker engine only when a build is needed."""
    def build(sdist: Path, name: str, out_dir: Path) -> Path:
        from ..docker import client as docker_client
        from ..docker.backend import shared_client

        try:
            client = shared_client()
            client.ping()
        except (SandboxError, *docker_client.engine_errors()) as exc:
            raise ProvisionError(f"{name} has no wheel, and building it from its source distribution "
                                 f"(allow_sdist) needs a Docker engine, which does not answer "
                                 f"({docker_client.short(exc)}): the build runs in a throwaway container, "
                                 "never on this machine. Start Docker (or set DOCKER_HOST), or pick a "
                                 f"package with a wheel") from None
        return build_wheel(client, image, sdist, name, out_dir, log=log, timeout=timeout)
    return build


def build_wheel(client, image: str, sdist: Path, name: str, out_dir: Path, *, log: Log = print,
                timeout: float = BUILD_TIMEOUT) -> Path:
    """Build `sdist` into a wheel in a throwaway container of `image` and copy it to `out_dir`."""
    requires = build_requires(sdist)
    for _attempt in range(2):
        tools = _build_tools(requires, name, log)
        code, output, wheel = _run_build(client, image, sdist, tools, name, out_dir, log, timeout)
        if wheel is not None:
            return wheel
        missing = _missing_dependencies(output)
        if code != 0 and missing and not set(missing) <= set(requires):
            log(f"  the build of {name} also needs {', '.join(missing)}; trying once more with them")
            requires = sorted(set(requires) | set(missing))
            continue
        break
    tail = output.strip()[-LOG_TAIL:]
    raise ProvisionError(f"building {name} from its source distribution ({sdist.name}) failed "
                         f"(exit {code}) in the network-off build container; pin a version of {name} that "
                         f"publishes a wheel, or pick another package. The end of the build log:\n{tail}")


def _missing_dependencies(output: str) -> list[str]:
    """The requirements `python -m build --no-isolation` reports as missing."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "Missing dependencies:" in line:
            found = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith(("\t", " ")) or not nxt.strip():
                    break
                found.append(nxt.strip().split(" -> ")[0].strip())
            return found
    return []


def _build_tools(requires: list[str], name: str, log: Log) -> Path:
    """`build` and the backend, resolved wheels-only for the image and unpacked into a temp folder
    (the caller's _run_build removes it)."""
    target = Target.for_image()
    try:
        lock = compile_lock(["build>=1.0", *requires], target, log=log)
    except ProvisionError as exc:
        raise ProvisionError(f"the build requirements of {name} ({', '.join(requires)}) cannot be "
                             f"installed as wheels: {exc}") from None
    tools = Path(tempfile.mkdtemp(prefix="ipyskills-buildtools-"))
    try:
        install_target(lock, tools / "site", target, log=log)
    except BaseException:
        shutil.rmtree(tools, ignore_errors=True)
        raise
    return tools


def _run_build(client, image, sdist: Path, tools: Path, name: str, out_dir: Path, log: Log,
               timeout: float) -> tuple[int | None, str, Path | None]:
    """One build container: (exit code, its output, the wheel copied to out_dir or None). The container
    and the `tools` folder are removed whatever happens."""
    import docker.errors
    from docker.types import LogConfig

    from ..docker import backend as docker_backend
    from ..docker import client as docker_client

    container = None
    try:
        archive = _context_archive(sdist, tools)
        labels = {docker_backend.LABEL: "1", docker_backend.LABEL_PID: str(os.getpid()),
                  docker_backend.LABEL_HOST: socket.gethostname(), LABEL_SDIST_BUILD: name}
        api = client.api
        host_config = api.create_host_config(
            network_mode="none", cap_drop=["ALL"],
            security_opt=["no-new-privileges:true", f"seccomp={docker_backend.seccomp_profile()}"],
            mem_limit=BUILD_MEMORY, memswap_limit=BUILD_MEMORY, pids_limit=BUILD_PIDS,
            nano_cpus=int(BUILD_CPUS * 1e9), ipc_mode="private",
            # the engine keeps at most 1 MB of what the build prints (it is read once, at the end)
            log_config=LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
        )
        config = api.create_container_config(
            image, command=["python3", "-c", _BUILD_SCRIPT, sdist.name], user="1000:1000", working_dir="/build",
            environment={"PYTHONPATH": "/build/tools/site", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
                         "SOURCE_DATE_EPOCH": "315532800"},
            labels=labels, host_config=host_config)
        container = api.create_container_from_config(config)["Id"]
        with open(archive, "rb") as stream:
            api.put_archive(container, "/", stream)
        t0 = time.monotonic()
        log(f"  building {sdist.name} (network off, uid 1000, {BUILD_MEMORY} memory, {timeout:.0f} s at most)")
        api.start(container)
        code = _wait(api, container, timeout)
        output = api.logs(container, stdout=True, stderr=True, tail=LOG_LINES).decode(errors="replace")
        if code is None:
            return None, output + f"\n[stopped: the build took longer than {timeout:.0f} s]", None
        if code != 0:
            return code, output, None
        wheel = _copy_wheel(api, container, name, out_dir)
        log(f"  built {wheel.name} in {time.monotonic() - t0:.1f} s")
        return code, output, wheel
    except docker.errors.ImageNotFound:
        raise SandboxError(f"the sandbox image {image} is not present: build the image: "
                           "ipyskills sandbox build [--offline]") from None
    except docker.errors.APIError as exc:
        detail = str(exc.explanation or exc)
        if container is not None and ("No such container" in detail or "marked for removal" in detail):
            raise SandboxError(f"the build container for {name} was removed while it ran (by `ipyskills "
                               "sandbox cleanup --all` or `docker rm`?); try again") from None
        raise SandboxError(f"Docker refused the build container for {name}: {detail}") from None
    except docker_client.engine_errors() as exc:
        raise SandboxError(f"lost contact with the Docker engine while building {name} "
                           f"({docker_client.short(exc)})") from None
    finally:
        if container is not None:
            with contextlib.suppress(Exception):
                client.api.remove_container(container, force=True)
        shutil.rmtree(tools, ignore_errors=True)


def _wait(api, container: str, timeout: float) -> int | None:
    """The exit code, or None after killing a build that outlived `timeout`."""
    import requests

    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            with contextlib.suppress(Exception):
                api.kill(container)
            return None
        try:
            return api.wait(container, timeout=min(left, 30))["StatusCode"]
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
            if "timed out" not in str(exc).lower():  # not the client's read timeout: the engine is gone
                raise


def _context_archive(sdist: Path, tools: Path) -> Path:
    """A tar of /build (in/<sdist>, tools/site, out/, src/) owned by uid 1000, for put_archive. Written to a
    file in `tools` (removed with it), not memory: a backend may ask for big build requirements."""
    path = tools / "context.tar"

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 1000
        info.uname = info.gname = ""
        return info

    with tarfile.open(path, mode="w") as tar:
        for folder in ("build", "build/in", "build/out", "build/src", "build/tools"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(owned(info))
        tar.add(sdist, arcname=f"build/in/{sdist.name}", filter=owned)
        tar.add(tools / "site", arcname="build/tools/site", filter=owned)
    return path


def _copy_wheel(api, container: str, name: str, out_dir: Path) -> Path:
    """The one wheel of `name` in the container's /build/out, written to out_dir."""
    stream, _stat = api.get_archive(container, "/build/out")
    with tempfile.TemporaryFile() as spool:  # what the build wrote is untrusted: on disk, and capped
        size = 0
        for chunk in stream:
            size += len(chunk)
            if size > MAX_WHEEL_BYTES:
                raise ProvisionError(f"the build of {name} wrote more than {MAX_WHEEL_BYTES // 1024**2} MB to "
                                     "its output folder; refusing it")
            spool.write(chunk)
        spool.seek(0)
        return _wheel_from(tarfile.open(fileobj=spool), name, out_dir)


def _wheel_from(tar: tarfile.TarFile, name: str, out_dir: Path) -> Path:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    with tar:
        for member in tar:
            base = os.path.basename(member.name)
            if not (member.isfile() and base.endswith(".whl")):
                continue
            try:
                wheel_name = parse_wheel_filename(base)[0]
            except InvalidWheelFilename:
                continue
            if normalize(wheel_name) != name:
                continue
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / base
            with tar.extractfile(member) as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
            return path
    raise ProvisionError(f"the build of {name} finished but made no wheel named for {name}")

"""Building a wheel from a source distribution (on by default; `allow_sdist=False` or `--no-sdist` refuses).

Installing an sdist means running the package's own build code (setup.py, or a build backend with its
plugins). That code never runs on the host:
1. the host downloads the sdist from the index (the simple API, no build step: pip and uv would both run
   its metadata hooks) and checks it against the index's sha256;
2. the host resolves what the build needs (`build` plus the backend named in the sdist's
   `[build-system]`, or setuptools when it names none) as hash-checked wheels for the sandbox image's
   Python and unpacks them into the container's build context;
3. the build is an ordinary sandbox run (`DockerBackend.run`) of the build image (the core image plus gcc,
   g++ and the Python headers, `profile_images`; made once, on first need, when it is absent): network
   off, uid 1000, no capabilities, the sandbox's seccomp profile, a read-only root, size-capped tmpfs for
   the workspace, /tmp and the output folder (so the disk a build can fill is capped), memory, process and
   CPU limits, and the launcher's own deadline, so a build whose owner dies ends by itself. The build
   tools and a small build script are the run's "skill" (read-only); the sdist is staged into the
   workspace; `python3 -m build --wheel --no-isolation` writes the wheel to the output folder, which comes
   back as the run's artifact. A backend that reports more missing build requirements (`Missing
   dependencies`) gets one more try, but only with names the sdist declares itself (pyproject
   `[build-system]`, setup.cfg `setup_requires`): the build's log is the package's own text and never
   chooses what the host resolves;
4. the wheel becomes an ordinary wheel for uv (a `--find-links` folder): it is resolved, hashed into the
   lock and installed exactly like one from the index. It only ever runs inside the sandbox, as the
   skill's code does, so building by default adds no exposure the skill's own scripts do not have.
A build that fails is remembered for FAILED_BUILD_TTL (by the sdist's hash and the build image), so the
next runs fail at once with the same message instead of building again; a new build image, or
`ipyskills sandbox cleanup`, forgets it.
Every requirement read from the sdist is checked as PEP 508 data first (`core.requirement_text`).
The container is removed whatever happens, and carries the owner labels, so `sandbox cleanup` removes it
if this process is killed mid-build.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

from ...core.requirement_text import UnsafeRequirement, checked, shown
from ...errors import ProvisionError, SandboxError
from ..scratch import make_scratch_dir, remove_tree, scratch_dir
from ..wheels import IMAGE_PYTHON_VERSION, Log, NoWheel, Target, compile_lock, install_target, normalize

BUILD_TIMEOUT = 600.0  # seconds one build may take (a pure-Python sdist takes a few)
# One build's sandbox: the tmpfs folders are charged to its memory, so the disk a build can fill is capped
# by these sizes (a writable root would have let it fill the engine's disk).
BUILD_LIMITS = {"memory": "2g", "pids": 256, "cpus": 1.0, "tmp_size": "512m", "workspace_size": "1g",
                "input_cap": "128m", "output_cap": 256 * 1024, "artifact_cap": "256m", "artifact_files": 20}
MAX_SDIST_BYTES = 100 * 1024**2
MAX_ROUNDS = 6  # resolve rounds: each may find one more sdist-only distribution (a dependency of the last)
DEFAULT_BUILD_REQUIRES = ["setuptools>=40.8.0"]  # PEP 517's fallback for an sdist without [build-system]
LOG_TAIL = 1500  # characters of the build log an error quotes
FAILED_BUILD_TTL = 24 * 3600.0  # seconds a failed build is remembered (the next runs do not build again)

# Runs in the sandbox as the build "skill"'s script; argv[1] is the sdist staged into the workspace. It is
# unpacked in the sandbox (the archive is untrusted too), into /tmp, so the workspace holds only the sdist
# and nothing of the source tree comes back as an artifact.
_BUILD_SCRIPT = r"""
import os, shutil, subprocess, sys
shutil.unpack_archive(sys.argv[1], '/tmp/src')
top = [e for e in os.listdir('/tmp/src') if os.path.isdir(os.path.join('/tmp/src', e))]
src = os.path.join('/tmp/src', top[0]) if len(top) == 1 else '/tmp/src'
os.chdir('/tmp')
sys.exit(subprocess.call([sys.executable, '-m', 'build', '--wheel', '--no-isolation', '--outdir',
                          os.environ['IPYSKILLS_OUTPUT'], src]))
"""


def resolve_with_sdists(specs: list[str], target: Target, *, constraints: str, wheel_dir: Path, builder,
                        log: Log, preferences: str = "", along: list[str] = ()) -> str:
    """compile_lock, where each distribution that has no wheel for `target` is built from its sdist
    with `builder(sdist, name, out_dir)` into `wheel_dir`, and the resolve is tried again with those
    wheels. Returns the lock (built wheels pinned by their hash like any other)."""
    built: set[str] = set()  # "name specifier": the same name may need a second build for older versions
    for _ in range(MAX_ROUNDS):
        try:
            return compile_lock(specs, target, constraints=constraints, log=log, find_links=str(wheel_dir),
                                preferences=preferences, along=along)
        except NoWheel as exc:
            name = normalize(re.split(r"[\s<>=!~;\[(]", exc.name.strip(), maxsplit=1)[0])  # "x==1.0" -> "x"
            # the versions to build: what the skill asked for, narrowed by what uv looked for (a dependency
            # asking for gym<=0.23 needs that release, not gym's newest)
            specifier = ",".join(part for part in (_specifier_for(name, specs), _plain(exc.specifier)) if part)
            if f"{name} {specifier}" in built:  # the wheel we built does not fit (e.g. another ABI)
                made = ", ".join(sorted(p.name for p in wheel_dir.glob("*.whl")))
                raise ProvisionError(f"{name} was built from its source distribution ({made}), but the "
                                     f"resolve still finds no wheel of it that fits: pin the version of {name} "
                                     f"that the other requirements allow. uv: {str(exc).split(' uv: ', 1)[-1]}"
                                     ) from None
            built.add(f"{name} {specifier}")
            log(f"dependencies: {name}{specifier and ' ' + specifier} has no wheel; building it from its source "
                "distribution in a throwaway container with the network off (allow_sdist=False refuses)")
            with scratch_dir("sdist") as tmp:
                sdist = fetch_sdist(name, specifier, tmp, target.python_version, log)
                builder(sdist, name, wheel_dir)
    raise ProvisionError(f"building from source did not converge after {MAX_ROUNDS} rounds ({', '.join(built)})")


def _plain(specifier: str) -> str:
    """uv's version text ("<=0.23.0", "==1.2.*") when it is a valid specifier set, else ""."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return str(SpecifierSet(specifier)) if specifier else ""
    except InvalidSpecifier:
        return ""


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
    setuptools when it has none, each in its normalised PEP 508 form. A ProvisionError when any entry is
    not plain requirement data: the sdist wrote it, and it would go to the resolver on the host."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: setuptools first, and the build's own report adds what is missing
        return list(DEFAULT_BUILD_REQUIRES)
    text = _member_text(sdist, "pyproject.toml")
    if text is None:
        return list(DEFAULT_BUILD_REQUIRES)
    try:
        system = tomllib.loads(text).get("build-system") or {}
    except (tomllib.TOMLDecodeError, RecursionError, MemoryError):
        return list(DEFAULT_BUILD_REQUIRES)
    requires = system.get("requires") if isinstance(system, dict) else None
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        return list(DEFAULT_BUILD_REQUIRES)
    return [_declared_build_requirement(sdist, r) for r in requires]


def _declared_build_requirement(sdist: Path, text: str) -> str:
    try:
        return checked(text)[1]
    except UnsafeRequirement as why:
        raise ProvisionError(f"{sdist.name} declares the build requirement '{shown(text)}', which is not a "
                             f"plain requirement ({why}); refusing to build it") from None


def declared_build_names(sdist: Path) -> set[str]:
    """The distributions the sdist itself names as build requirements: pyproject `[build-system]
    .requires` and setup.cfg `[options] setup_requires` (setuptools' backend asks for those). The only
    names a "missing dependencies" retry may add."""
    names = {normalize(checked(r)[0]) for r in build_requires(sdist)}
    text = _member_text(sdist, "setup.cfg")
    if text:
        import configparser

        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
            listed = parser.get("options", "setup_requires", fallback="")
        except (configparser.Error, RecursionError, MemoryError):
            listed = ""
        for line in listed.replace(";", "\n").splitlines():
            try:
                names.add(normalize(checked(line)[0]))
            except UnsafeRequirement:
                continue
    return names


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


# -- the build, in the sandbox -----------------------------------------------------------------------------

def docker_builder(client, image: str, *, log: Log = print, timeout: float = BUILD_TIMEOUT):
    """A builder(sdist, name, out_dir) for resolve_with_sdists that builds in containers of the build image
    (or of `image`, the run's own, when the build image cannot be made)."""
    def build(sdist: Path, name: str, out_dir: Path) -> Path:
        return build_wheel(client, build_image(client, image, log), sdist, name, out_dir, log=log,
                           timeout=timeout)
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
                                 f"needs a Docker engine, which does not answer "
                                 f"({docker_client.short(exc)}): the build runs in a throwaway container, "
                                 "never on this machine. Start Docker (or set DOCKER_HOST), pick a package "
                                 "with a wheel, or refuse source builds (allow_sdist=False)") from None
        return build_wheel(client, build_image(client, image, log), sdist, name, out_dir, log=log,
                           timeout=timeout)
    return build


_build_image_lock = threading.Lock()


def build_image(client, fallback: str, log: Log = print) -> str:
    """The build profile's image (core image + compiler and Python headers), made now when it is absent or
    stale; `fallback` (the run's image, which has no compiler) when it cannot be made here."""
    from ..docker.image import DEFAULT_IMAGE, image_info, profile_image
    from ..docker.profile_images import build_profile_image

    tag = profile_image("build")
    with _build_image_lock:  # parallel provisionings wait for one build of it
        info = image_info(client, tag)
        if info and info["current"]:
            return tag
        core = image_info(client, DEFAULT_IMAGE)
        if not (core and core["current"]):
            log(f"  the build image {tag} is {'stale' if info else 'absent'} and the core image is not current "
                f"(ipyskills sandbox build): building in {fallback}, which has no compiler")
            return fallback
        log(f"  making the build image {tag} (the core image with gcc, g++ and the Python headers; once, "
            "about a minute)")
        try:
            build_profile_image("build", client=client, log=lambda line: log("    " + line))
            return tag
        except SandboxError as exc:
            log(f"  the build image could not be made ({exc}); building in {fallback}, which has no compiler")
            return fallback


def build_wheel(client, image: str, sdist: Path, name: str, out_dir: Path, *, log: Log = print,
                timeout: float = BUILD_TIMEOUT) -> Path:
    """Build `sdist` into a wheel in a throwaway sandbox run of `image` and write it to `out_dir`. A build
    of the same sdist in the same image that failed within FAILED_BUILD_TTL fails at once, the same way."""
    key = _failure_key(client, image, sdist)
    remembered = remembered_failure(key)
    if remembered:
        raise ProvisionError(remembered)
    requires = build_requires(sdist)
    for _attempt in range(2):
        code, output, wheel = _run_build(client, image, sdist, requires, name, out_dir, log, timeout)
        if wheel is not None:
            return wheel
        missing = _missing_dependencies(output)
        have = {_name_of(r) for r in requires}
        extra = [m for m in missing if _name_of(m) not in have]
        if code != 0 and extra:
            allowed = declared_build_names(sdist)
            undeclared = [m for m in extra if _name_of(m) not in allowed]
            if undeclared:
                raise _remember(key, name, sdist, (
                    f"the build of {name} asks for {', '.join(shown(m) for m in undeclared)}, which its "
                    f"source distribution does not declare (pyproject [build-system] or setup.cfg "
                    f"setup_requires); a build's own output never chooses what is installed. Pin a version "
                    f"of {name} that publishes a wheel, or pick another package"))
            log(f"  the build of {name} also needs {', '.join(extra)}; trying once more with them")
            requires = sorted(set(requires) | set(extra))
            continue
        break
    tail = output.strip()[-LOG_TAIL:]
    raise _remember(key, name, sdist, (
        f"building {name} from its source distribution ({sdist.name}) failed (exit {code}) in the "
        f"network-off build container ({image}); pin a version of {name} that publishes a wheel, or pick "
        f"another package. The end of the build log:\n{tail}"))


# -- failed builds, remembered -----------------------------------------------------------------------------

def failures_dir() -> Path:
    from ..scratch import cache_base

    return cache_base() / "sdist-failures"


def _failure_key(client, image: str, sdist: Path) -> str:
    """The sdist's content and the image's id: the same source in the same image fails the same way."""
    try:
        image_id = client.images.get(image).id
    except Exception:  # noqa: BLE001 - the build itself reports an engine or image problem properly
        image_id = image
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    return hashlib.sha256(f"{digest}\0{image_id}".encode()).hexdigest()[:32]


def remembered_failure(key: str, now: float | None = None) -> str:
    """The message of a failed build recorded under `key` less than FAILED_BUILD_TTL ago, or ''."""
    path = failures_dir() / f"{key}.json"
    try:
        record = json.loads(path.read_text())
        age = (time.time() if now is None else now) - float(record["at"])
        message = str(record["message"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if not 0 <= age < FAILED_BUILD_TTL:
        path.unlink(missing_ok=True)
        return ""
    return (f"{message}\n(remembered: this build failed {_ago(age)} and is not tried again for "
            f"{FAILED_BUILD_TTL / 3600:.0f} h; `ipyskills sandbox cleanup` forgets it)")


def _remember(key: str, name: str, sdist: Path, message: str) -> ProvisionError:
    folder = failures_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        record = {"name": name, "sdist": sdist.name, "at": time.time(), "message": message}
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record))
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        pass  # not remembering only costs a second build
    return ProvisionError(message)


def forget_failures() -> int:
    """Forget every remembered failed build; returns how many there were."""
    gone = 0
    for path in failures_dir().glob("*.json"):
        path.unlink(missing_ok=True)
        gone += 1
    return gone


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _name_of(requirement: str) -> str:
    return normalize(checked(requirement)[0])


def _missing_dependencies(output: str) -> list[str]:
    """The requirements `python -m build --no-isolation` reports as missing, as plain requirements
    (anything else on those lines is dropped: the log is the package's text)."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "Missing dependencies:" in line:
            found = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith(("\t", " ")) or not nxt.strip():
                    break
                try:
                    found.append(checked(nxt.strip().split(" -> ")[0].strip())[1])
                except UnsafeRequirement:
                    continue
            return found
    return []


def _build_tools(requires: list[str], name: str, log: Log) -> Path:
    """The build "skill": `build` and the backend resolved wheels-only for the image and unpacked into
    tools/site, beside build.py. A private folder the caller removes."""
    target = Target.for_image()
    try:
        lock = compile_lock(["build>=1.0", *requires], target, log=log)
    except ProvisionError as exc:
        raise ProvisionError(f"the build requirements of {name} ({', '.join(requires)}) cannot be "
                             f"installed as wheels: {exc}") from None
    folder = make_scratch_dir("buildtools")
    try:
        install_target(lock, folder / "tools" / "site", target, log=log)
        (folder / "tools" / "site" / ".lock").unlink(missing_ok=True)
        (folder / "build.py").write_text(_BUILD_SCRIPT)
        from ..docker.image import _world_readable

        _world_readable(folder)  # the run's uid 1000 reads it through a read-only mount
        os.chmod(folder, 0o755)
    except BaseException:
        remove_tree(folder)
        raise
    return folder


def _run_build(client, image, sdist: Path, requires: list[str], name: str, out_dir: Path, log: Log,
               timeout: float) -> tuple[int | None, str, Path | None]:
    """One build run: (exit code, its output, the wheel written to out_dir or None). Nothing of it is
    left: the run's container is removed like any run's, the build folder here."""
    from ..docker.backend import WORKSPACE, DockerBackend
    from ..inputs import stage_inputs
    from ..policy import Limits
    from ..request import RunRequest

    limits = Limits(timeout=timeout, **BUILD_LIMITS)
    tools = _build_tools(requires, name, log)
    try:
        request = RunRequest(
            skill_name=f"build of {name}", skill_dir=tools, script="build.py", args=[f"{WORKSPACE}/{sdist.name}"],
            limits=limits, image=image, inputs=stage_inputs([sdist], limits.input_cap), workdir="skill",
            env={"PYTHONPATH": "/skill/tools/site", "SOURCE_DATE_EPOCH": "315532800"})
        shown_image = image[:19] if image.startswith("sha256:") else image
        log(f"  building {sdist.name} in {shown_image} (network off, uid 1000, read-only root, "
            f"{limits.memory // 1024**2} MiB memory, {timeout:.0f} s at most)")
        t0 = time.monotonic()
        result = DockerBackend(image=image, client=client).run(request)
    finally:
        remove_tree(tools)
    output = result.stdout + ("\n" if result.stdout and not result.stdout.endswith("\n") else "") + result.stderr
    if result.timed_out:
        return None, output + f"\n[stopped: the build took longer than {timeout:.0f} s]", None
    if result.oom_killed:
        return None, output + f"\n[stopped: the build ran out of its {limits.memory // 1024**2} MiB memory]", None
    if result.exit_code != 0:
        return result.exit_code, output, None
    wheel = _wheel_from(result.artifacts, name, out_dir)
    log(f"  built {wheel.name} in {time.monotonic() - t0:.1f} s")
    return 0, output, wheel


def _wheel_from(artifacts, name: str, out_dir: Path) -> Path:
    """The one wheel of `name` among the run's artifacts, written to out_dir."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    for artifact in artifacts:
        base = artifact.path.rsplit("/", 1)[-1]
        if not base.endswith(".whl") or "/" in artifact.path:
            continue
        try:
            wheel_name = parse_wheel_filename(base)[0]
        except InvalidWheelFilename:
            continue
        if normalize(wheel_name) != name:
            continue
        if artifact.data is None:
            raise ProvisionError(f"the wheel the build of {name} made ({artifact.size:,} bytes) is over the "
                                 f"{BUILD_LIMITS['artifact_cap']} a build may hand back; refusing it")
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / base
        path.write_bytes(artifact.data)
        return path
    raise ProvisionError(f"the build of {name} finished but made no wheel named for {name}")

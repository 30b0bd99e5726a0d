"""Building the sandbox image, the normal way (FROM a registry image) or offline (debootstrap + import).

Both builds use the one Dockerfile in `images/`; the image carries a label with a hash of the recipe
(Dockerfile, Debian package list, base-requirements.txt and base.lock) so `ipyskills sandbox status` can tell
when it is stale. The Python stack comes from the wheels pinned in `images/base.lock`: the host unpacks them
into the build context (`sandbox.wheels.install_target`), so neither build fetches Python packages inside
Docker and the offline build stays registry-free.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ...errors import SandboxError
from ...settings import DEFAULT_IMAGE

IMAGES_DIR = Path(__file__).parent / "images"
RECIPE_FILES = ("Dockerfile", "packages.txt", "base-requirements.txt", "base.lock")
LABEL_RECIPE = "ipyskills.recipe-sha256"
LABEL_BUILD = "ipyskills.build"  # "online" or "offline"
LABEL_PROFILE = "ipyskills.profile"  # "office" or "build" on a profile image (absent on the core image)
ONLINE_BASE = "debian:bookworm-slim"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_REPOSITORY = "ipyskills-base"  # the imported debootstrap root, tagged <suite>-<package hash>

Log = Callable[[str], None]

# Image profiles: "core" is the sandbox image; "office" adds LibreOffice, poppler, pandoc, tesseract and Node
# on top; "build" adds a compiler and the Python headers, for sdist builds only (profile_images.py).
PROFILES = {"core": DEFAULT_IMAGE, "office": "ipyskills-sandbox-office:latest",
            "build": "ipyskills-sandbox-build:latest"}


def profile_image(profile: str) -> str:
    """The image tag of a profile ("core", "office", "build")."""
    try:
        return PROFILES[profile]
    except KeyError:
        raise SandboxError(f"unknown sandbox profile {profile!r}: choose one of {', '.join(PROFILES)}") from None

# The wheels' own test suites: every `tests/` and `test/` folder inside these packages is deleted from the
# build context (~180 MB with bytecode). Nothing imports them at run time (the public helpers numpy.testing,
# pandas.testing, pandas._testing, matplotlib.testing, sympy.testing are other folders and stay); the image
# tests import every base distribution and run a numpy/pandas/scipy/sklearn/matplotlib calculation after.
TRIM_TESTS_IN = ("numpy", "pandas", "scipy", "sklearn", "statsmodels", "matplotlib", "mpl_toolkits", "sympy")


def packages() -> list[str]:
    lines = (IMAGES_DIR / "packages.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def base_requirements() -> list[str]:
    """The requirement lines of images/base-requirements.txt (the image's Python stack, from wheels)."""
    lines = (IMAGES_DIR / "base-requirements.txt").read_text().splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def base_lock() -> str:
    """The text of images/base.lock: every distribution in the image, pinned and hashed."""
    return (IMAGES_DIR / "base.lock").read_text()


def recipe_hash() -> str:
    """sha256 over the files the image is built from; stored as a label on the image."""
    digest = hashlib.sha256()
    for name in RECIPE_FILES:
        digest.update(name.encode() + b"\0" + (IMAGES_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()


def image_info(client, tag: str = DEFAULT_IMAGE) -> dict | None:
    """What is known about the local image `tag`, or None when it is absent. A profile image (by its
    label, or by its tag) is current when it matches that profile's recipe hash."""
    import docker.errors

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    labels = image.labels or {}
    by_tag = next((name for name, known in PROFILES.items() if known == tag), "core")
    profile = labels.get(LABEL_PROFILE) or by_tag
    if profile == "core":
        expected = recipe_hash()
    else:
        expected = _profile_images().recipe_hash(profile)
    return {
        "id": image.short_id,
        "recipe": labels.get(LABEL_RECIPE, ""),
        "build": labels.get(LABEL_BUILD, ""),
        "profile": profile,
        "current": labels.get(LABEL_RECIPE) == expected,
        "size_mb": round((image.attrs.get("Size") or 0) / 1e6, 1),
    }


class _Stages:
    """Prints numbered stages with the elapsed time, because an offline build takes minutes."""

    def __init__(self, log: Log, total: int):
        self.log, self.total, self.n, self.t0 = log, total, 0, time.monotonic()

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.t0:5.0f}s"

    def start(self, what: str) -> None:
        self.n += 1
        self.log(f"[{self.elapsed()}] stage {self.n}/{self.total}: {what}")

    def note(self, what: str) -> None:
        self.log(f"[{self.elapsed()}]   {what}")


def build_image(tag: str | None = DEFAULT_IMAGE, offline: bool = False, client=None, log: Log = print,
                mirror: str | None = None, fresh_base: bool = False, profile: str = "core") -> str:
    """Build the sandbox image and tag it `tag`; returns the image id.

    offline: no registry at all; debootstrap a minimal Debian root from `mirror` (default the Debian
    archive, or $IPYSKILLS_DEBIAN_MIRROR), import it, build on it. The imported root is kept as
    `ipyskills-base:<suite>-<hash>` and reused by the next offline build unless `fresh_base`.
    profile "office" or "build": that image FROM the core image (built first when absent or stale); see
    profile_images.build_profile_image.
    """
    from .client import connect

    client = client or connect(timeout=600)
    if profile != "core":
        profile_image(profile)  # refuses an unknown profile
        return _profile_images().build_profile_image(profile, tag=tag or PROFILES[profile], offline=offline, client=client,
                                   log=log, mirror=mirror, fresh_base=fresh_base)
    tag = tag or DEFAULT_IMAGE
    stages = _Stages(log, 4 if offline else 2)
    if offline:
        base = _offline_base(client, stages, mirror or os.environ.get("IPYSKILLS_DEBIAN_MIRROR") or DEFAULT_MIRROR,
                             fresh_base)
    else:
        base = ONLINE_BASE
    image_id = _docker_build(client, tag, base, offline, stages)
    stages.note(f"done: {tag} ({image_id[:19]})")
    return image_id


def offline_base_tag() -> str:
    """The tag of the imported Debian root for the current package list (reused across builds)."""
    recipe = f"{SUITE} minbase + apt-get --no-install-recommends {' '.join(packages())}"
    return f"{BASE_REPOSITORY}:{SUITE}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def _offline_base(client, stages: _Stages, mirror: str, fresh: bool) -> str:
    import docker.errors

    pkgs = packages()
    base_tag = offline_base_tag()
    stages.start(f"minimal Debian {SUITE} root with {', '.join(pkgs)}")
    if not fresh:
        try:
            client.images.get(base_tag)
            stages.note(f"reusing {base_tag} (build with --fresh-base to redo it)")
            stages.start("import: skipped")
            return base_tag
        except docker.errors.ImageNotFound:
            pass
    if shutil.which("debootstrap") is None:
        raise SandboxError("the offline build needs debootstrap: install it (apt-get install debootstrap) "
                           "and run `ipyskills sandbox build --offline` again")
    if os.geteuid() != 0:
        raise SandboxError("the offline build runs debootstrap, which needs root: run "
                           "`sudo ipyskills sandbox build --offline` (or build without --offline)")
    workdir = Path(tempfile.mkdtemp(prefix="ipyskills-rootfs-", dir="/var/tmp"))
    root = workdir / "root"
    try:
        _debootstrap(root, pkgs, mirror, stages)
        _trim(root)
        stages.start(f"import the root as {base_tag}")
        tarball = workdir / "root.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(tarball), "."], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        stages.note(f"root tarball {tarball.stat().st_size / 1e6:.0f} MB")
        repository, _, tag = base_tag.partition(":")
        with open(tarball, "rb") as fh:
            client.api.import_image_from_data(fh, repository=repository, tag=tag)
        return base_tag
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or b"").decode(errors="replace").strip()[-500:]
        raise SandboxError(f"offline build failed in {exc.cmd[0]}: {detail}") from None
    finally:
        _remove_tree(workdir)
        stages.note(f"removed {workdir}")


def _debootstrap(root: Path, pkgs: list[str], mirror: str, stages: _Stages) -> None:
    """A minbase root, then apt-get inside it: apt resolves alternatives and skips Recommends, where
    debootstrap's own --include resolver drags in compilers and -dev packages (1.2 GB instead of ~0.4)."""
    _stream(["debootstrap", "--variant=minbase", SUITE, str(root), mirror], stages,
            f"debootstrap failed from {mirror}", "Check that the mirror is reachable or set "
            "IPYSKILLS_DEBIAN_MIRROR to one that is.")
    shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")  # apt inside the chroot needs DNS
    apt = ["chroot", str(root), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q"]
    _stream([*apt, "update"], stages, "apt-get update in the new root failed", "")
    _stream([*apt, "install", "-y", "--no-install-recommends", *pkgs], stages,
            "apt-get install in the new root failed", "Check the package names in images/packages.txt.")
    _stream([*apt, "clean"], stages, "apt-get clean failed", "")


def _stream(cmd: list[str], stages: _Stages, failure: str, hint: str) -> None:
    stages.note(" ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    last_report, tail = time.monotonic(), []
    for raw in proc.stdout:
        line = raw.decode(errors="replace").rstrip()
        tail = (tail + [line])[-20:]
        # these tools print hundreds of lines; show one every 15 s so progress is visible but short
        if time.monotonic() - last_report > 15 or line.startswith(("E:", "W: Failure")):
            stages.note(line)
            last_report = time.monotonic()
    if proc.wait() != 0:
        raise SandboxError(f"{failure} (exit {proc.returncode}): {' | '.join(tail[-5:])}. {hint}".rstrip())


def _trim(root: Path) -> None:
    """Drop package caches, docs and locales: they are not needed to run scripts."""
    for rel in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                "usr/share/locale", "usr/share/info"):
        target = root / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


def _remove_tree(path: Path) -> None:
    """Unmount whatever debootstrap left mounted inside `path` (proc, sys, ...) before deleting it."""
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts") as fh:
            mounts = [line.split()[1] for line in fh]
    except OSError:
        mounts = []
    for mnt in sorted((m for m in mounts if m.startswith(real + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", mnt], check=False, stderr=subprocess.DEVNULL)
    shutil.rmtree(path, ignore_errors=True)


def _docker_build(client, tag: str, base: str, offline: bool, stages: _Stages) -> str:
    import docker.errors

    with tempfile.TemporaryDirectory(prefix="ipyskills-build-") as ctx:
        for name in RECIPE_FILES:
            shutil.copy(IMAGES_DIR / name, Path(ctx) / name)
        stages.start("unpack the wheels of base.lock into the build context")
        prepare_site(Path(ctx), stages.note)
        stages.start(f"docker build {tag} FROM {base}")
        options = {"path": ctx, "tag": tag, "buildargs": {"BASE": base}, "rm": True, "forcerm": True,
                   "decode": True,
                   "labels": {LABEL_RECIPE: recipe_hash(), LABEL_BUILD: "offline" if offline else "online"}}
        if offline:
            options.update(pull=False, network_mode="none")  # proves nothing is fetched
        image_id = ""
        try:
            for chunk in client.api.build(**options):
                if "error" in chunk:
                    raise SandboxError(_build_error(chunk["error"], offline))
                line = (chunk.get("stream") or "").strip()
                if line.startswith("Step "):
                    stages.note(line)
                aux = chunk.get("aux") or {}
                image_id = aux.get("ID", image_id)
        except docker.errors.APIError as exc:
            raise SandboxError(_build_error(str(exc.explanation or exc), offline)) from None
    if not image_id:
        image_id = client.images.get(tag).id
    return image_id


def prepare_site(ctx: Path, log: Log = print) -> None:
    """Unpack exactly the wheels of base.lock into `ctx`/site (console scripts into `ctx`/bin), drop the
    bundled test suites and make every file world-readable, as the Dockerfile COPYs them."""
    from ..wheels import Target, install_target

    site, bindir = ctx / "site", ctx / "bin"
    install_target(base_lock(), site, Target.for_image(), log=log)
    if (site / "bin").is_dir():
        shutil.move(str(site / "bin"), str(bindir))
    bindir.mkdir(exist_ok=True)
    freed = trim_tests(site)
    log(f"removed the bundled test suites of {', '.join(TRIM_TESTS_IN)} ({freed / 1e6:.0f} MB)")
    for folder in (site, bindir):
        _world_readable(folder)
    log(f"site-packages {_tree_size(site) / 1e6:.0f} MB")


def trim_tests(site: Path) -> int:
    """Delete every tests/ and test/ folder inside the TRIM_TESTS_IN packages; returns the bytes freed."""
    freed = 0
    for package in TRIM_TESTS_IN:
        root = site / package
        if not root.is_dir():
            continue
        for dirpath, dirnames, _files in os.walk(root):
            for name in [d for d in dirnames if d in ("tests", "test")]:
                path = Path(dirpath) / name
                freed += _tree_size(path)
                shutil.rmtree(path)
                dirnames.remove(name)
    return freed


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _world_readable(root: Path) -> None:
    """Directories 755, files 644 (755 when executable by the owner): uid 1000 reads what root owns."""
    os.chmod(root, 0o755)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)


def _build_error(message: str, offline: bool) -> str:
    message = message.strip()
    if offline:
        return f"docker build of the sandbox image failed: {message}"
    return (f"docker build of the sandbox image failed: {message}. If no registry is reachable, run "
            "`ipyskills sandbox build --offline` (builds from the Debian archive, no registry).")


def _profile_images():
    # The profile images build on this module, so it finds theirs by name instead of importing the module
    # that imports it (the same lookup the runner uses for backends).
    return importlib.import_module(".profile_images", __package__)

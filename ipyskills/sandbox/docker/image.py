"""Building the sandbox image, the normal way (FROM a registry image) or offline (debootstrap + import).

Both builds use the one Dockerfile in `images/`; the image carries a label with a hash of the recipe
(Dockerfile, Debian package list, base-requirements.txt and base.lock) so `ipyskills sandbox status` can tell
when it is stale. The Python stack comes from the wheels pinned in `images/base.lock`: the host unpacks them
into the build context (`sandbox.wheels.install_target`), so neither build fetches Python packages inside
Docker and the offline build stays registry-free.
"""

from __future__ import annotations

import hashlib
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
LABEL_PROFILE = "ipyskills.profile"  # "office" on the office image (absent on the core image)
OFFICE_RECIPE_FILES = ("office-packages.txt", "office-npm.txt")
OFFICE_NODE_PATH = "/opt/ipyskills/node/node_modules"
ONLINE_BASE = "debian:bookworm-slim"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_REPOSITORY = "ipyskills-base"  # the imported debootstrap root, tagged <suite>-<package hash>

Log = Callable[[str], None]

# Image profiles: "core" is the sandbox image; "office" adds LibreOffice, poppler, pandoc and Node on top.
PROFILES = {"core": DEFAULT_IMAGE, "office": "ipyskills-sandbox-office:latest"}


def profile_image(profile: str) -> str:
    """The image tag of a profile ("core", "office")."""
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
    """What is known about the local image `tag`, or None when it is absent. An office-profile image
    (by its label, or by the office tag) is current when it matches office_recipe_hash()."""
    import docker.errors

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    labels = image.labels or {}
    profile = labels.get(LABEL_PROFILE) or ("office" if tag == PROFILES["office"] else "core")
    expected = office_recipe_hash() if profile == "office" else recipe_hash()
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
    profile "office": the office image FROM the core image (built first when absent or stale); see
    build_office_image.
    """
    from .client import connect

    client = client or connect(timeout=600)
    if profile != "core":
        profile_image(profile)  # refuses an unknown profile
        return build_office_image(tag=tag or PROFILES["office"], offline=offline, client=client, log=log,
                                  mirror=mirror, fresh_base=fresh_base)
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


# -- the office profile -----------------------------------------------------------------------------------

def _list_file(name: str) -> list[str]:
    lines = (IMAGES_DIR / name).read_text().splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def office_packages() -> list[str]:
    return _list_file("office-packages.txt")


def office_npm() -> list[str]:
    return _list_file("office-npm.txt")


# Runs as root in a network-none container of the core image, with the .debs in /tmp/ipyskills-debs and the
# npm packages in /opt/ipyskills/node; the container is then committed as the office image.
_OFFICE_INSTALL = f"""set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends /tmp/ipyskills-debs/*.deb
rm -rf /tmp/ipyskills-debs /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin \
    /usr/share/doc/* /usr/share/man/* /usr/share/info/* /var/log/apt /var/log/dpkg.log
chmod -R a+rX /opt/ipyskills/node
HOME=/tmp/lo-home soffice --version
rm -rf /tmp/lo-home
pdftoppm -v 2>&1 | head -1
pandoc --version | head -1
NODE_PATH={OFFICE_NODE_PATH} node -e "require('docx'); require('pptxgenjs'); console.log('node', process.version)"
"""


def office_recipe_hash() -> str:
    """sha256 over the core recipe, the office package lists and the install steps."""
    digest = hashlib.sha256(recipe_hash().encode() + b"\0" + _OFFICE_INSTALL.encode() + b"\0")
    for name in OFFICE_RECIPE_FILES:
        digest.update(name.encode() + b"\0" + (IMAGES_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()


def build_office_image(tag: str = PROFILES["office"], offline: bool = False, client=None, log: Log = print,
                       mirror: str | None = None, fresh_base: bool = False) -> str:
    """The office profile: headless LibreOffice, poppler-utils, qpdf, pandoc, fonts and Node with the docx
    and pptxgenjs npm packages, FROM the core image (built first when it is absent or stale).

    No image registry is used either way: the .debs are downloaded by apt-get --download-only in a
    throw-away container of the core image (which reaches the Debian archive, as the offline build's
    debootstrap does), the npm packages by `npm install --ignore-scripts` on the host; both are then
    installed in a container with network none, which is committed as `tag`.
    """
    from .client import connect

    client = client or connect(timeout=600)
    stages = _Stages(log, 4)
    core = PROFILES["core"]
    stages.start(f"core image {core}")
    info = image_info(client, core)
    if info and info["current"]:
        stages.note(f"reusing {core} ({info['id']}, current)")
    else:
        stages.note(f"{core} is {'stale' if info else 'absent'}: building it first")
        build_image(tag=core, offline=offline, client=client, mirror=mirror, fresh_base=fresh_base,
                    log=lambda line: stages.note("  " + line))
    workdir = Path(tempfile.mkdtemp(prefix="ipyskills-office-"))
    try:
        stages.start(f"download {len(office_packages())} Debian packages and their dependencies (apt-get "
                     f"--download-only in a container of {core})")
        debs = _download_debs(client, core, office_packages(), workdir / "debs", stages)
        stages.note(f"{len(debs)} .deb files, {sum(p.stat().st_size for p in debs) / 1e6:.0f} MB")
        stages.start(f"npm install --ignore-scripts {' '.join(office_npm())} (on the host)")
        _npm_install(office_npm(), workdir / "node", stages)
        stages.start(f"install them with network none and commit {tag}")
        image_id = _install_and_commit(client, core, workdir, tag, offline, stages)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    stages.note(f"done: {tag} ({image_id[:19]})")
    return image_id


def _download_debs(client, core: str, pkgs: list[str], dest: Path, stages: _Stages) -> list[Path]:
    import io
    import tarfile

    import docker.errors

    script = ("set -eu; export DEBIAN_FRONTEND=noninteractive; apt-get update -q; "
              f"apt-get install -y -q --no-install-recommends --download-only {' '.join(pkgs)}")
    container = client.containers.create(core, ["sh", "-c", script], user="0", entrypoint=[],
                                         labels={"ipyskills.build-helper": "1"})
    try:
        container.start()
        _follow(container.logs(stream=True, follow=True), stages)
        code = container.wait().get("StatusCode", 1)
        if code != 0:
            tail = container.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
            raise SandboxError(f"downloading the office packages failed (exit {code}): {tail}. The engine's "
                               "containers need to reach the Debian archive (as the offline build's "
                               "debootstrap does); check the network, then build again.")
        stream, _stat = container.get_archive("/var/cache/apt/archives")
        buf = io.BytesIO(b"".join(stream))
    except docker.errors.APIError as exc:
        raise SandboxError(f"downloading the office packages failed: {exc.explanation or exc}") from None
    finally:
        container.remove(force=True)
    dest.mkdir(parents=True)
    debs = []
    with tarfile.open(fileobj=buf) as tar:
        for member in tar.getmembers():
            name = os.path.basename(member.name)
            if member.isfile() and name.endswith(".deb") and "/" not in name:
                with tar.extractfile(member) as src, open(dest / name, "wb") as out:
                    shutil.copyfileobj(src, out)
                debs.append(dest / name)
    if not debs:
        raise SandboxError("apt-get downloaded no packages for the office profile; are they installed already?")
    return debs


def _npm_install(specs: list[str], dest: Path, stages: _Stages) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SandboxError("the office profile needs npm on this machine to fetch "
                           f"{', '.join(specs)}: install it (apt-get install npm) and build again")
    dest.mkdir(parents=True)
    (dest / "package.json").write_text('{"name": "ipyskills-office", "private": true}\n')
    _stream([npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev", "--save-exact",
             "--prefix", str(dest), *specs], stages,
            "npm install failed", "The host needs access to the npm registry (or a configured one).")


def _follow(lines, stages: _Stages) -> None:
    last, tail = time.monotonic(), ""
    for chunk in lines:
        for line in chunk.decode(errors="replace").splitlines():
            tail = line
            if time.monotonic() - last > 15 or line.startswith("E:"):
                stages.note(line.strip())
                last = time.monotonic()
    if tail:
        stages.note(tail.strip())


def _tar_of(workdir: Path) -> Path:
    """One tar with the .debs at tmp/ipyskills-debs and the npm tree at opt/ipyskills/node, owned by root."""
    import tarfile

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode = (info.mode | 0o444 | (0o111 if info.isdir() or info.mode & 0o100 else 0)) & 0o755
        return info

    path = workdir / "payload.tar"
    with tarfile.open(path, "w") as tar:
        tar.add(workdir / "debs", arcname="tmp/ipyskills-debs", filter=owned_by_root)
        tar.add(workdir / "node", arcname="opt/ipyskills/node", filter=owned_by_root)
    return path


def _install_and_commit(client, core: str, workdir: Path, tag: str, offline: bool, stages: _Stages) -> str:
    import docker.errors

    payload = _tar_of(workdir)
    container = client.containers.create(core, ["sleep", "infinity"], user="0", entrypoint=[],
                                         network_mode="none", labels={"ipyskills.build-helper": "1"})
    try:
        container.start()
        with open(payload, "rb") as fh:
            if not container.put_archive("/", fh):
                raise SandboxError("could not copy the office packages into the build container")
        payload.unlink()
        result = container.exec_run(["sh", "-c", _OFFICE_INSTALL], user="0", stream=True, demux=False)
        _follow(result.output, stages)
        probe = (f"NODE_PATH={OFFICE_NODE_PATH} node -e \"require('docx'); require('pptxgenjs')\" "
                 "&& command -v soffice pdftoppm qpdf pandoc")
        check = container.exec_run(["sh", "-c", probe])
        if check.exit_code != 0:
            raise SandboxError("installing the office packages failed: "
                               f"{check.output.decode(errors='replace').strip()[-500:]}")
        repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        changes = [
            "USER 1000:1000", "WORKDIR /skill", 'CMD ["python3"]',
            f"ENV NODE_PATH={OFFICE_NODE_PATH}",
            f"LABEL {LABEL_PROFILE}=office",
            f"LABEL {LABEL_BUILD}={'offline' if offline else 'online'}",
            f"LABEL {LABEL_RECIPE}={office_recipe_hash()}",
        ]
        image = container.commit(repository=repository, tag=version, changes=changes)
        return image.id
    except docker.errors.APIError as exc:
        raise SandboxError(f"building the office image failed: {exc.explanation or exc}") from None
    finally:
        container.remove(force=True)

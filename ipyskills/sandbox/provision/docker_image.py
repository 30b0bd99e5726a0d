"""Docker provisioning: a derived image FROM the sandbox image holding exactly the missing wheels.

The wheels are resolved and unpacked on the host and travel in the build context (so a remote engine
works too: nothing is bind-mounted), and the build runs with the network off. Bytecode is compiled during
the build, because the root is read-only when scripts run; a file that does not compile (some wheels ship
templates or Python 2 examples as .py) is left as it is, as pip leaves it, rather than failing the build.

Tags: `ipyskills-deps:<hash of base image id + index settings + locked set>` is the image;
`ipyskills-deps:r-<hash of base image id + index settings + requested specs>` points at it, so the next run
of a skill asking for the same set from the same index finds its image with a single lookup and never
resolves again. A failed build leaves nothing tagged.

Every layer is labelled, intermediate ones included (the LABEL comes first in the Dockerfile), with the
owner's pid and host: a build cut short (Ctrl-C, kill -9) leaves dangling layers that are pruned on the
failure itself or, for a dead owner, by the next build and `ipyskills sandbox cleanup --images`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import socket
import threading
import time
from pathlib import Path

from ...errors import ProvisionError, SandboxError
from ..docker import client as docker_client
from ..owners import pid_alive
from ..scratch import scratch_dir
from ..wheels import Target, compile_lock, index_fingerprint, install_target, lock_names
from . import RESOLVE_POLICY, Progress, Provisioned, Timer, _quiet, missing_from
from .budget import Budget
from .budget import check as check_budget
from . import undeclared
from .gpu import cpu_route
from .sdist import docker_builder, resolve_with_sdists

REPOSITORY = "ipyskills-deps"
LABEL = "ipyskills.deps"  # "1" on every derived image (what `sandbox cleanup --images` looks at)
LABEL_BASE = "ipyskills.deps.base"  # the id of the image it was built FROM
LABEL_INSTALLED = "ipyskills.deps.installed"  # JSON list of "name==version"
LABEL_OWNER = "ipyskills.deps.owner"  # "<host>:<pid>:<build token>" of the build (on every layer)
SITE = "/usr/local/lib/python{version}/dist-packages"  # on the image's python3 path, after the stdlib
HIT_TTL = 60.0  # seconds a found image is trusted without asking the engine again (a rebuilt base image
# is noticed after that; a removed dependency image is rebuilt at once: see runner.run)

# Modes are set in the build context and only the new entries are compiled: a `chmod -R` or compileall
# over all of dist-packages would copy the base image's ~500 MB of packages into this layer.
DOCKERFILE = """\
ARG BASE
FROM ${BASE}
LABEL %(labels)s
USER 0:0
%(remove)sCOPY site/ %(site)s/
COPY bin/ /usr/local/bin/
RUN cd %(site)s && (python3 -m compileall -q -j 0 %(entries)s >/dev/null || true)
USER 1000:1000
"""

# Removes the files of the image's own distributions that the skill needs in other versions (listed in each
# one's RECORD, with their compiled bytecode) before the new versions are copied in, so no file of the old
# version is left to mix with the new one. Runs in the build, as root; argv: the site folder, then names.
_REMOVE_REPLACED = r"""
import glob, os, re, shutil, sys
site, names = sys.argv[1], {re.sub(r"[-_.]+", "-", n).lower() for n in sys.argv[2:]}
for info in glob.glob(os.path.join(site, "*.dist-info")):
    if re.sub(r"[-_.]+", "-", os.path.basename(info)[:-10].rsplit("-", 1)[0]).lower() not in names:
        continue
    for line in open(os.path.join(info, "RECORD"), encoding="utf-8"):
        path = os.path.normpath(os.path.join(site, line.split(",", 1)[0]))
        if path.startswith("/usr/local/") and os.path.isfile(path) and not os.path.islink(path):
            os.remove(path)
            stem, ext = os.path.splitext(os.path.basename(path))
            if ext == ".py":
                for pyc in glob.glob(os.path.join(os.path.dirname(path), "__pycache__", stem + ".*.pyc")):
                    os.remove(pyc)
    shutil.rmtree(info)
"""

_hits: dict[tuple, tuple[float, Provisioned]] = {}  # (endpoint, base image, specs) -> (time, what was found)
_building: dict[str, threading.Lock] = {}  # one build per request tag at a time, in this process
_building_lock = threading.Lock()


def request_tag(base_id: str, specs: list[str]) -> str:
    """The tag for `specs` on `base_id` resolved from the index configured now (JSON-joined: specs are
    never joined with a separator they could contain)."""
    key = json.dumps([base_id, index_fingerprint(), sorted(set(specs)), RESOLVE_POLICY])
    return f"{REPOSITORY}:r-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def ensure_image(client, base_image: str, specs: list[str], *, base_lock: str, reasons: list[str],
                 progress: Progress = _quiet, allow_sdist: bool = False, budget=None) -> Provisioned:
    """The image to run in for `specs` on top of `base_image` (built now when missing). `allow_sdist`:
    a distribution without a wheel is built from its sdist in a throwaway container (provision.sdist).
    It is not part of the tag: an image made with the opt-in is reused without it, since nothing builds
    then."""
    import docker.errors

    endpoint = docker_client.engine_name(client)  # base_url is the same for every unix socket
    recent = (endpoint, base_image, index_fingerprint(), tuple(sorted(set(specs))))
    hit = _hits.get(recent)
    if hit is not None and time.monotonic() - hit[0] < HIT_TTL:
        return hit[1]  # no engine call at all: a run of a provisioned skill costs what any other run does
    try:
        base_id = client.images.get(base_image).id
    except docker.errors.ImageNotFound:
        raise SandboxError(f"the sandbox image {base_image} is not present: build the image: "
                           "ipyskills sandbox build [--offline]") from None
    except docker_client.engine_errors() as exc:
        raise SandboxError(f"no Docker engine answers ({docker_client.short(exc)})") from None
    alias = request_tag(base_id, specs)
    with _lock_for(alias):
        found = _existing(client, alias)
        if found is None:
            with scratch_dir("built") as built:
                found = _provision(client, base_image, base_id, specs, alias, base_lock, reasons, progress,
                                   Path(built) if allow_sdist else None, budget or Budget())
        _hits[recent] = (time.monotonic(), found)
        return found


def forget_recent() -> None:
    """Ask the engine again next time (after an image was found missing)."""
    _hits.clear()


def _lock_for(tag: str) -> threading.Lock:
    with _building_lock:
        return _building.setdefault(tag, threading.Lock())


def _existing(client, tag: str) -> Provisioned | None:
    import docker.errors

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    labels = image.labels or {}
    installed = json.loads(labels.get(LABEL_INSTALLED) or "[]")
    return Provisioned(installed=installed, image=tag if installed else "", built=False)


def _provision(client, base_image: str, base_id: str, specs: list[str], alias: str, base_lock: str,
               reasons: list[str], progress: Progress, built: Path | None, budget: Budget) -> Provisioned:
    """`built`: the folder for wheels built from sdists (None: wheels from the index only)."""
    timer = Timer()
    target = Target.for_image()
    progress(f"dependencies: resolving {len(specs)} requirement(s) for Python {target.python_version} "
             f"({target.platform}), wheels only{' (sdists built in a container)' if built else ''}: "
             f"{', '.join(specs)}")
    # The skill's requirements win: the image's set and the skill's are resolved together, the image's
    # versions kept wherever the skill allows them (uv's preferences), so a skill gets the newest release
    # it can have even when an older one would fit the image (mp-api 0.37, whose maggma import is broken,
    # instead of 0.47, which wants a newer pyarrow than the image's). What moves is replaced in the
    # derived image and named in the notice.
    from ..docker.image import base_requirements

    def resolve(specs, target):
        return _resolve(client, base_id, specs, target, built, progress, preferences=base_lock,
                        along=base_requirements())

    try:
        lock = resolve(specs, target)
        lock, specs = undeclared.complete(lock, specs, lambda more: resolve(more, target), progress)
        lock, target, gpu_note = cpu_route(lock, target, budget.allow_gpu, log=progress,
                                           resolve=lambda cpu: resolve(specs, cpu))
    except ProvisionError as exc:
        if "cannot be satisfied" not in str(exc):
            raise
        raise ProvisionError(f"{exc}. No versions satisfy the skill's requirements together with the "
                             "sandbox image's packages, even replacing those") from None
    pinned = lock_names(base_lock)
    new_lock, installed = missing_from(lock, pinned)
    replaced = sorted(f"{n} {pinned[n]} → {v}" for n, v in lock_names(new_lock).items() if n in pinned)
    check_budget(new_lock, installed, budget, progress, gpu_note)
    if not installed:
        progress("dependencies: everything needed is already in the sandbox image")
        client.images.get(base_id).tag(*alias.split(":"))
        return Provisioned(image="", built=False, seconds=timer.seconds)
    key = json.dumps([base_id, index_fingerprint(), new_lock])
    tag = f"{REPOSITORY}:{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if _existing(client, tag) is None:
        progress(f"dependencies: installing {len(installed)} distribution(s): {', '.join(installed)}"
                 + (f" (replacing the image's {', '.join(replaced)})" if replaced else ""))
        _build(client, base_id, new_lock, installed, tag, target, progress, built,
               replaced=[r.split(" ", 1)[0] for r in replaced])
    client.images.get(tag).tag(*alias.split(":"))
    progress(f"dependencies: ready in {timer.seconds:.1f} s ({tag})")
    return Provisioned(installed=installed, image=tag, built=True, seconds=timer.seconds, reasons=reasons,
                       replaced=replaced)


def _resolve(client, base_id: str, specs: list[str], target: Target, built: Path | None, progress, *,
             constraints: str = "", preferences: str = "", along: list[str] = ()) -> str:
    if built is None:
        return compile_lock(specs, target, constraints=constraints, preferences=preferences, log=progress,
                            along=along)
    return resolve_with_sdists(specs, target, constraints=constraints, preferences=preferences, along=along,
                               wheel_dir=built, log=progress, builder=docker_builder(client, base_id, log=progress))


def _build(client, base_id: str, lock: str, installed: list[str], tag: str, target: Target,
           progress: Progress, built: Path | None, replaced: list[str] = ()) -> None:
    import docker.errors

    site = SITE.format(version=target.python_version)
    with scratch_dir("deps") as context:
        ctx = str(context)
        install_target(lock, context / "site", target, log=progress, find_links=str(built) if built else None)
        (context / "site" / ".lock").unlink(missing_ok=True)  # uv's lock file, not part of any package
        bin_dir = context / "site" / "bin"
        if bin_dir.is_dir():
            shutil.move(str(bin_dir), context / "bin")  # console scripts go on PATH, not into site-packages
        else:
            (context / "bin").mkdir()
        from ..docker.image import _world_readable

        _world_readable(context / "site")
        _world_readable(context / "bin")
        entries = " ".join(shlex.quote(p.name) for p in sorted((context / "site").iterdir())
                           if not p.name.endswith(".dist-info")) or "."
        owner = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        layer_labels = " ".join(f"{k}={json.dumps(v)}" for k, v in {LABEL: "1", LABEL_OWNER: owner}.items())
        remove = (f"RUN {json.dumps(['python3', '-c', _REMOVE_REPLACED, site, *replaced])}\n" if replaced else "")
        (context / "Dockerfile").write_text(DOCKERFILE % {"site": site, "entries": entries, "labels": layer_labels,
                                                          "remove": remove})
        labels = {LABEL: "1", LABEL_BASE: base_id, LABEL_INSTALLED: json.dumps(installed)}
        progress(f"dependencies: building {tag} with the network off")
        try:
            for chunk in client.api.build(path=ctx, tag=tag, buildargs={"BASE": base_id}, rm=True,
                                          forcerm=True, pull=False, network_mode="none", decode=True,
                                          labels=labels):
                if "error" in chunk:
                    raise SandboxError(f"building the dependency image failed: {chunk['error'].strip()}")
        except docker.errors.APIError as exc:
            prune_dangling(client, build=owner)
            raise SandboxError(f"building the dependency image failed: {exc.explanation or exc}") from None
        except docker_client.engine_errors() as exc:
            raise SandboxError(f"lost contact with the Docker engine while building the dependency image "
                               f"({docker_client.short(exc)})") from None
        except BaseException:  # a build error, or Ctrl-C: the layers made so far are ours to remove
            prune_dangling(client, build=owner)
            raise


def unused_tags(client, wanted: set[str]) -> list[str]:
    """The `ipyskills-deps` tags that no skill asks for now (`wanted` holds the request tags of the skills
    in view), together with the derived images only those tags point at."""
    unused = []
    for image in client.images.list(name=REPOSITORY):
        tags = [t for t in image.tags if t.startswith(REPOSITORY + ":")]
        requests = [t for t in tags if t.split(":", 1)[1].startswith("r-")]
        if any(t in wanted for t in requests):
            continue
        unused += tags
    return unused


def remove_tags(client, tags: list[str]) -> list[str]:
    """Untag each (an image loses its last tag and is deleted, unless a container still uses it)."""
    import docker.errors

    removed = []
    for tag in tags:
        try:
            client.images.remove(tag, noprune=False)
            removed.append(tag)
        except docker.errors.ImageNotFound:
            continue
        except docker.errors.APIError:  # in use by a container: kept, and tried again next time
            continue
    return removed


def prune_dangling(client, build: str | None = None) -> list[str]:
    """Remove untagged layers that dependency builds left: those of one `build` (its owner label, after
    that build failed or was interrupted), or else those whose owner on this host is gone. Layers of a
    build still running are kept. Returns the ids removed."""
    import docker.errors

    host = socket.gethostname()
    removed = []
    try:
        dangling = client.images.list(filters={"dangling": True, "label": f"{LABEL}=1"})
    except (docker.errors.APIError, *docker_client.engine_errors()):
        return removed
    for image in dangling:
        owner = (image.labels or {}).get(LABEL_OWNER, "")
        where, pid, _token = (owner.split(":") + ["", "", ""])[:3]
        if build is not None:
            if owner != build:
                continue
        elif where != host or not pid.isdigit() or pid_alive(int(pid)):
            continue
        with contextlib.suppress(docker.errors.APIError, *docker_client.engine_errors()):
            client.images.remove(image.id, noprune=False)
            removed.append(image.id)
    return removed

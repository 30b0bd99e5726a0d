"""`ipyskills sandbox build [--offline] [--profile core|office] | status [--json] | cleanup [--all] [--json]`."""

from __future__ import annotations

import json
import sys

from . import add_dir_option, add_json_option


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sandbox", help="build, check and clean up the Docker sandbox",
        description="Manage the Docker sandbox that runs skill scripts.",
    )
    sub = parser.add_subparsers(dest="sandbox_command", metavar="ACTION")
    sub.required = True

    build = sub.add_parser(
        "build", help="build the sandbox image",
        description="Build the sandbox image from the Dockerfile shipped with ipyskills. --offline needs no "
        "registry: it debootstraps a minimal Debian root from the Debian archive (root and debootstrap "
        "required), imports it and builds on it.",
    )
    build.add_argument("--offline", action="store_true", help="build without any image registry")
    build.add_argument("--tag", help="image tag (default: the configured image, or the profile's image)")
    build.add_argument("--profile", choices=("core", "office", "build"), default="core",
                       help="core: Python with the data stack (default); office: core plus headless "
                       "LibreOffice 25.x, poppler-utils, qpdf, ghostscript, pandoc, tesseract-ocr and Node "
                       "with docx and pptxgenjs; build: core plus gcc, g++ and the Python headers, used "
                       "only to build packages from source distributions, never for runs")
    build.add_argument("--fresh-base", action="store_true",
                       help="with --offline: debootstrap again even if a matching base image exists")
    build.set_defaults(func=run_build)

    status = sub.add_parser("status", help="is the engine up, is the image present and current",
                            description="Report the Docker engine, the sandbox image and the backend "
                            "`auto` would pick. Exit 1 when the Docker backend is not ready.")
    add_json_option(status)
    status.set_defaults(func=run_status)

    gvisor = sub.add_parser("gvisor", help="set up gVisor (runsc) as a runtime for the sandbox (root)",
                            description="Install Debian's runsc (bookworm-backports: the build with the systrap "
                            "platform), register it in /etc/docker/daemon.json as ipyskills-runsc with "
                            "--network=none --platform=systrap, reload the engine with SIGHUP (running "
                            "containers go on) and check it with one trial run. Then runtime runsc or auto "
                            "(IPYSKILLS_RUNTIME, --runtime, %config IPySkills.runtime) runs scripts under "
                            "gVisor's user-space kernel.")
    gvisor.set_defaults(func=run_gvisor)

    cleanup = sub.add_parser("cleanup", help="remove leftover sandbox containers (and unused dependency images)",
                             description="Remove sandbox containers whose owning process is gone "
                             "(or all sandbox containers with --all), local run folders and provisioning scratch folders of "
                             "dead owners. With --images, also remove dangling layers of interrupted dependency "
                             "builds, and dependency images (ipyskills-deps:*) that none of the skills in view needs with the "
                             "current sandbox images; the skills in view are those of the configured roots, "
                             "or of --dir. A removed dependency image is rebuilt by the next run that needs it.")
    cleanup.add_argument("--all", action="store_true", help="also remove containers of running processes")
    cleanup.add_argument("--images", action="store_true",
                         help="also remove dependency images that no skill in view needs")
    add_dir_option(cleanup)
    add_json_option(cleanup)
    cleanup.set_defaults(func=run_cleanup)


def _image_tag(args) -> str:
    from ..settings import Settings

    return getattr(args, "tag", None) or Settings.from_env().image


def run_build(args) -> int:
    from ..sandbox.docker.image import build_image

    def log(line: str) -> None:
        print(line, flush=True)

    profile = getattr(args, "profile", "core") or "core"
    if profile == "core":
        tag = _image_tag(args)
    else:
        from ..sandbox.docker.image import profile_image

        tag = getattr(args, "tag", None) or profile_image(profile)
    build_image(tag=tag, offline=args.offline, log=log, fresh_base=args.fresh_base, profile=profile)
    return 0


def sandbox_status(image: str) -> dict:
    """Engine, image and backend facts; never raises for a missing engine or image."""
    from ..errors import SkillError
    from ..sandbox.docker.backend import DockerBackend
    from ..sandbox.docker.client import engine_endpoint, engine_errors
    from ..sandbox.docker.image import image_info

    report = {"engine": False, "engine_version": None, "endpoint": None, "image": image,
              "image_present": False, "image_current": None, "image_build": None,
              "backend": "local", "message": ""}
    try:
        report["endpoint"] = engine_endpoint()[0] or "default (local socket)"
    except SkillError as exc:  # a broken context store is reported, not raised
        report["message"] = str(exc)
        return report
    backend = DockerBackend(image=image)
    ready, reason = backend.readiness()
    report["message"] = reason
    try:
        client = backend.probe_client()
        report["engine_version"] = client.version().get("Version")
        report["engine"] = True
        info = image_info(client, image)
    except (*engine_errors(), SkillError):
        return report
    if info:
        report.update(image_present=True, image_current=info["current"], image_build=info["build"] or None,
                      image_id=info["id"], image_size_mb=info["size_mb"])
        if not info["current"]:
            report["message"] += (". The image is older than the Dockerfile shipped with this ipyskills: "
                                   "rebuild it with ipyskills sandbox build [--offline]")
    report["backend"] = "docker" if ready else "local"
    report["profiles"] = _profile_images(client, image)
    report["gvisor"] = _gvisor_status(client)
    return report


def _gvisor_status(client) -> dict:
    """Whether the engine offers our gVisor runtime, and what the configured `runtime` picks."""
    from ..errors import SkillError
    from ..sandbox.docker import runtime
    from ..sandbox.docker.client import engine_errors
    from ..settings import Settings

    wanted = Settings.from_env().runtime
    try:
        config = runtime.offered(client).get(runtime.GVISOR_RUNTIME)
        chosen = runtime.choose(client, wanted, network=False).describe()
    except (*engine_errors(), SkillError) as exc:
        config, chosen = None, f"unavailable ({exc})"
    return {"available": config is not None, "runtime_name": runtime.GVISOR_RUNTIME,
            "runtime_args": (config or {}).get("runtimeArgs") or [], "setting": wanted, "in_use": chosen}


def _profile_images(client, configured: str) -> dict:
    """Each profile's image: present, current, size (the core entry is the configured image)."""
    from ..errors import SkillError
    from ..sandbox.docker.client import engine_errors
    from ..sandbox.docker.image import PROFILES, image_info

    profiles = {}
    for profile, tag in PROFILES.items():
        tag = configured if profile == "core" else tag
        try:
            info = image_info(client, tag)
        except (*engine_errors(), SkillError):
            info = None
        profiles[profile] = {"image": tag, "present": bool(info),
                             "current": info["current"] if info else None,
                             "size_mb": info["size_mb"] if info else None}
    return profiles


def run_status(args) -> int:
    report = sandbox_status(_image_tag(args))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        engine = f"running ({report['engine_version']})" if report["engine"] else "not reachable"
        print(f"engine:   {engine} at {report['endpoint']}")
        if report["image_present"]:
            freshness = "current" if report["image_current"] else "STALE (rebuild)"
            print(f"image:    {report['image']} present, {report['image_build'] or 'unknown'} build, "
                  f"{report.get('image_size_mb')} MB, {freshness}")
        else:
            print(f"image:    {report['image']} not present")
        for profile, info in (report.get("profiles") or {}).items():
            state = (f"present, {info['size_mb']} MB, {'current' if info['current'] else 'STALE (rebuild)'}"
                     if info["present"] else f"not built (ipyskills sandbox build --profile {profile})")
            print(f"profile:  {profile:7} {info['image']} {state}")
        gv = report.get("gvisor")
        if gv:
            offer = (f"available ({' '.join(gv['runtime_args'])})" if gv["available"]
                     else "not set up (sudo ipyskills sandbox gvisor)")
            print(f"gvisor:   {offer}; runtime setting {gv['setting']} → {gv['in_use']}")
        print(f"backend:  auto would use {report['backend']}")
        if report["backend"] != "docker" or not report["image_current"]:
            print(report["message"], file=sys.stderr)
    return 0 if report["backend"] == "docker" else 1


def run_gvisor(args) -> int:
    from ..sandbox.docker.gvisor_setup import setup_gvisor

    line = setup_gvisor(log=lambda text: print(text, flush=True))
    print(f"gVisor is ready: {line}")
    print("use it with runtime runsc or auto: IPYSKILLS_RUNTIME=auto, ipyskills run --runtime runsc, "
          "or %config IPySkills.runtime = 'auto'")
    return 0


def run_cleanup(args) -> int:
    from ..errors import SandboxError
    from ..sandbox.docker.backend import cleanup
    from ..sandbox.docker.client import connect
    from ..sandbox.local.confine import remove_stale
    from ..sandbox.local.run_files import remove_tree
    from ..sandbox.provision.docker_image import prune_dangling, remove_tags, unused_tags
    from ..sandbox.provision.local_site import cache_root, remove_dead_partials
    from ..sandbox.provision.sdist import forget_failures
    from ..sandbox.scratch import sweep_dead
    from .core_cmds import make_registry

    local = remove_stale(remove_tree)  # local runs whose owner died: their folders (and cgroups)
    # provisioning's scratch folders and half-made dependency folders of owners that died mid-way
    scratch = sweep_dead() + remove_dead_partials(cache_root())
    forgotten = forget_failures()  # remembered failed source builds: the next provisioning tries again
    engine = True
    try:
        removed = cleanup(all_owners=args.all)
    except SandboxError:
        if not local:
            raise
        removed, engine = [], False  # no Docker engine here (Binder): the local part is what there was to do
    # processes of gVisor containers whose start failed, which the engine no longer has
    ended, unended = _gvisor_orphans() if engine else ([], [])
    images, layers = [], []
    if args.images:
        client = connect()
        images = remove_tags(client, unused_tags(client, wanted_request_tags(make_registry(args), client)))
        layers = prune_dangling(client)  # what interrupted dependency builds of dead owners left
    if args.json:
        print(json.dumps({"removed": removed, "removed_local": local, "removed_scratch": scratch,
                          "forgotten_builds": forgotten, "ended_gvisor_processes": [p.describe() for p in ended],
                          "unended_gvisor_processes": [p.describe() for p in unended],
                          **({"removed_images": images, "removed_layers": layers} if args.images else {})}))
        return 0
    if local:
        print(f"removed {len(local)} local run folder(s) of dead owners: {' '.join(local)}")
    if scratch:
        print(f"removed {len(scratch)} provisioning folder(s) of dead owners: {' '.join(scratch)}")
    if forgotten:
        print(f"forgot {forgotten} failed source build(s): the next provisioning builds them again")
    if removed:
        print(f"removed {len(removed)} sandbox container(s): {' '.join(removed)}")
    else:
        print("no stray sandbox containers")
    if ended:
        print(f"ended {len(ended)} process(es) of gVisor containers the engine no longer has (failed starts): "
              + ", ".join(p.describe() for p in ended))
    if unended:
        print(f"{len(unended)} process(es) of gVisor containers the engine no longer has could not be ended by "
              "this user (run it as root: sudo ipyskills sandbox cleanup): " + ", ".join(p.describe() for p in unended))
    if images:
        print(f"removed {len(images)} unused dependency image tag(s): {' '.join(images)}")
    if args.images and layers:
        print(f"removed {len(layers)} dangling layer(s) of interrupted dependency builds")
    return 0


def _gvisor_orphans() -> tuple[list, list]:
    """(ended, still running): shim and runsc processes that failed gVisor starts left (gvisor_orphans.py)."""
    from ..sandbox.docker import gvisor_orphans
    from ..sandbox.docker.client import connect

    try:
        return gvisor_orphans.reap_orphans(connect())
    except Exception:  # noqa: BLE001 - no engine here: nothing of it to end
        return [], []


def wanted_request_tags(reg, client) -> set[str]:
    """The dependency-image request tags the skills in view would use now (on every profile's image)."""
    import docker.errors

    from ..errors import SkillError
    from ..sandbox.docker.image import PROFILES
    from ..sandbox.provision import wanted_requirements
    from ..sandbox.provision.docker_image import request_tag

    base_ids = []
    for image in {reg.settings.image, *PROFILES.values()}:
        try:
            base_ids.append(client.images.get(image).id)
        except docker.errors.ImageNotFound:
            continue
    wanted = set()
    for meta in reg.list():
        try:
            reqs = reg.requirements(meta.name)
        except SkillError:
            continue
        specs = sorted({r.spec for r in wanted_requirements(reqs, reg.settings.deps, "docker")})
        wanted |= {request_tag(base_id, specs) for base_id in base_ids if specs}
    return wanted

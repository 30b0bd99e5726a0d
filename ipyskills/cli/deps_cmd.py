"""`ipyskills deps NAME [--json] [--install] [--allow-sdist|--no-sdist]`: what a skill needs, where each need
came from, and (with --install) provisioning it now rather than at the first run.

Text output: one line per Python distribution with its source (file:line and why), then what the sandbox
image already has, what was skipped and why, and the programs the scripts call. `--json` prints
SkillRequirements.to_dict(), plus an "installed" record with --install. Provisioning progress goes to
stderr, prefixed `ipyskills:`.
"""

from __future__ import annotations

import json
import sys

from . import add_dir_option, add_json_option


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "deps", help="show (and install) the Python packages a skill's scripts need",
        description="List the Python distributions skill NAME needs, each with where it came from: PEP 723 "
        "blocks, requirements*.txt, pyproject.toml, install lines in SKILL.md, and imports in its scripts. "
        "--install resolves them on this machine (wheels only) and installs them where the sandbox runs "
        "(a derived Docker image, or a cache folder for the local backend), as the first run would.",
    )
    p.add_argument("name", metavar="NAME", help="the skill")
    add_dir_option(p)
    p.add_argument("--install", action="store_true", help="provision them now")
    p.add_argument("--deps", choices=("auto", "declared", "off"),
                   help="auto: every requirement found (default); declared: ignore inferred imports")
    p.add_argument("--backend", choices=("docker", "local", "auto"), help="where runs go (default: auto)")
    add_allow_sdist_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_deps)


def add_allow_sdist_option(p) -> None:
    """--allow-sdist / --no-sdist, shared by `deps` and `run`."""
    choice = p.add_mutually_exclusive_group()
    choice.add_argument("--allow-sdist", dest="allow_sdist", action="store_const", const=True, default=None,
                        help="a package that publishes no wheel is built from its source distribution in a "
                        "throwaway container with the network off (its build code never runs on this "
                        "machine); the default, unless the setting allow_sdist or IPYSKILLS_ALLOW_SDIST=0 "
                        "turned it off")
    choice.add_argument("--no-sdist", dest="allow_sdist", action="store_const", const=False,
                        help="refuse packages that publish no wheel instead of building them")


def apply_allow_sdist(reg, args) -> None:
    chosen = getattr(args, "allow_sdist", None)
    if chosen is not None:
        reg.settings = reg.settings.with_overrides(allow_sdist=chosen)


def cmd_deps(args) -> int:
    from ..core.requirements_report import install_summary, requirements_text
    from .core_cmds import make_registry

    reg = make_registry(args)
    apply_allow_sdist(reg, args)
    reqs = reg.requirements(args.name)
    installed = None
    if args.install:
        def progress(line: str) -> None:
            print(f"ipyskills: {line}", file=sys.stderr, flush=True)

        installed = reg.install_requirements(args.name, backend=args.backend, deps=args.deps, progress=progress)
    if args.json:
        data = reqs.to_dict()
        if args.install:
            data["installed"] = None if installed is None else {
                "distributions": installed.installed, "image": installed.image, "site": installed.site,
                "built": installed.built, "seconds": round(installed.seconds, 2)}
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    print(requirements_text(reqs, args.deps or reg.settings.deps))
    if args.install:
        print(install_summary(installed))
    return 0

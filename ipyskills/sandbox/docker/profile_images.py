"""The profile images derived from the core sandbox image: "office" (for runs) and "build" (for builds only).

- office: headless LibreOffice 25.x (from bookworm-backports: bookworm's 7.4 aborts on published
  spreadsheet macros), poppler-utils, qpdf, ghostscript, pandoc, tesseract-ocr with English data, fonts, and
  Node with the docx and pptxgenjs npm packages.
- build: a C/C++ toolchain and the Python headers, for building sdists that have C extensions
  (`provision.sdist`). It is never used for a run: the runner refuses it.

No image registry is used: the .debs are downloaded by `apt-get --download-only` in a throw-away container
of the core image (which reaches the Debian archive, as the offline build's debootstrap does), the npm
packages by `npm install --ignore-scripts` on the host; both are installed in a container with network
none, which is committed. The committed image then checks itself with an ordinary sandbox run (uid 1000,
network off, read-only root): an office image must recalculate a workbook with a headless macro, convert a
DOCX to PDF and read the PDF back by OCR; a build image must compile and import a C extension. An image
that fails its check is removed, so a broken build never counts as current.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import SandboxError
from ...settings import DEFAULT_IMAGE

OFFICE_NODE_PATH = "/opt/ipyskills/node/node_modules"
BACKPORTS = "bookworm-backports"
LABEL_BUILD_ONLY = "ipyskills.build-only"  # "1" on the build image: the runner refuses to run scripts in it


@dataclass(frozen=True)
class Profile:
    name: str
    tag: str
    packages_file: str  # images/<file>: Debian packages, one a line
    npm_file: str | None  # images/<file>: npm packages (name@version) or None
    backports: bool  # take the packages from bookworm-backports where it has newer ones
    versions: str  # shell lines printing the versions of what was installed (shown during the build)
    check_script: str  # a Python script run as a sandbox run of the new image; prints one JSON line
    check_timeout: float
    build_only: bool = False

    @property
    def recipe_files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.packages_file, self.npm_file) if f)


# -- the office self-check ----------------------------------------------------------------------------------

# The recalculation is done as published spreadsheet skills do it: a Basic macro in the user profile,
# called headless with the workbook as argument (calculateAll, store, close).
_OFFICE_CHECK = r'''
import json, os, shutil, subprocess
from pathlib import Path

import docx
import openpyxl
from docx.shared import Pt

work = Path("/tmp/office-check")
work.mkdir()
report = {}


def run(cmd, timeout=150):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=work)
        return p.returncode, (p.stdout + p.stderr).strip()[-300:]
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    except OSError as exc:
        return None, str(exc)


report["soffice"] = run(["soffice", "--version"])[1].splitlines()[0:1]
wb = openpyxl.Workbook()
ws = wb.active
ws["A1"], ws["A2"], ws["A3"], ws["A4"], ws["A5"] = 2, 3, "=A1*A2+1", "=SUM(A1:A3)", "=1/0"
wb.save(work / "calc.xlsx")
run(["soffice", "--headless", "--terminate_after_init"])
basic = Path.home() / ".config/libreoffice/4/user/basic/Standard"
basic.mkdir(parents=True, exist_ok=True)
(basic / "Module1.xba").write_text("""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE script:module PUBLIC "-//OpenOffice.org//DTD OfficeDocument 1.0//EN" "module.dtd">
<script:module xmlns:script="http://openoffice.org/2000/script" script:name="Module1" script:language="StarBasic">
Sub RecalculateAndSave()
  ThisComponent.calculateAll()
  ThisComponent.store()
  ThisComponent.close(True)
End Sub
</script:module>
""")
code, log = run(["soffice", "--headless", "--norestore",
                 "vnd.sun.star.script:Standard.Module1.RecalculateAndSave?language=Basic&location=application",
                 str(work / "calc.xlsx")])
values = openpyxl.load_workbook(work / "calc.xlsx", data_only=True).active
cells = [values[c].value for c in ("A3", "A4", "A5")]
report["recalc"] = {"exit": code, "values": cells[:2],
                    "errors": sum(isinstance(v, str) and v.startswith("#") for v in cells), "log": log}

document = docx.Document()
document.add_paragraph().add_run("IPYSKILLS OFFICE CHECK 4217").font.size = Pt(28)
document.save(work / "check.docx")
code, log = run(["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(work), str(work / "check.docx")])
pages = None
if (work / "check.pdf").exists():
    info = run(["pdfinfo", str(work / "check.pdf")])[1]
    pages = next((int(line.split()[-1]) for line in info.splitlines() if line.startswith("Pages:")), None)
report["docx_pdf"] = {"exit": code, "pages": pages, "log": log}

run(["pdftoppm", "-r", "150", "-png", "-singlefile", str(work / "check.pdf"), str(work / "page")])
code, text = run(["tesseract", str(work / "page.png"), "stdout"])
report["ocr"] = {"exit": code, "text": " ".join(text.split())[:200]}
report["tools"] = {tool: shutil.which(tool) is not None for tool in ("qpdf", "pandoc", "gs", "pdftotext")}
code, log = run(["node", "-e", "require('docx'); require('pptxgenjs')"])
report["node"] = code == 0 or log[-200:]
print(json.dumps(report))
'''


def _office_failures(report: dict) -> list[str]:
    """What the office self-check's report says is wrong (empty when everything worked)."""
    wrong = []
    recalc = report.get("recalc") or {}
    if recalc.get("values") != [7, 12] or recalc.get("errors") != 1:
        wrong.append(f"the macro recalculation gave {recalc.get('values')} with {recalc.get('errors')} error "
                     f"cells (want [7, 12] and 1; exit {recalc.get('exit')}: {recalc.get('log')})")
    converted = report.get("docx_pdf") or {}
    if converted.get("pages") != 1:
        wrong.append(f"DOCX to PDF gave {converted.get('pages')} pages (want 1; exit {converted.get('exit')}: "
                     f"{converted.get('log')})")
    ocr = report.get("ocr") or {}
    if "OFFICE CHECK 4217" not in (ocr.get("text") or "").upper():
        wrong.append(f"OCR of the rendered page read {ocr.get('text')!r} (want 'IPYSKILLS OFFICE CHECK 4217')")
    missing = [tool for tool, there in (report.get("tools") or {}).items() if not there]
    if missing or not report.get("tools"):
        wrong.append(f"programs missing: {', '.join(missing) or 'all'}")
    if report.get("node") is not True:
        wrong.append(f"Node cannot require docx and pptxgenjs: {report.get('node')}")
    return wrong


# -- the build image's self-check ---------------------------------------------------------------------------

_BUILD_CHECK = r'''
import json, subprocess, sysconfig
from pathlib import Path


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return p.returncode, (p.stdout + p.stderr)[-300:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)


work = Path("/tmp/build-check")
work.mkdir()
(work / "ipyskills_check.c").write_text("""
#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *arg) { return PyNumber_Multiply(arg, PyLong_FromLong(2)); }
static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ipyskills_check", NULL, -1, methods};
PyMODINIT_FUNC PyInit_ipyskills_check(void) { return PyModule_Create(&module); }
""")
so = work / ("ipyskills_check" + sysconfig.get_config_var("EXT_SUFFIX"))
code, log = run(["gcc", "-shared", "-fPIC", "-O1", "-I", sysconfig.get_paths()["include"],
                 str(work / "ipyskills_check.c"), "-o", str(so)])
report = {"gcc": code, "log": log}
# /tmp is noexec in the sandbox, so the module is not imported here; its init symbol is looked up instead
# (the sdist tests import a module built in this image for real)
report["exports_init"] = "PyInit_ipyskills_check" in run(["nm", "-D", "--defined-only", str(so)])[1]
report["gxx"] = run(["g++", "--version"])[0]
print(json.dumps(report))
'''


def _build_failures(report: dict) -> list[str]:
    wrong = []
    if report.get("gcc") != 0 or not report.get("exports_init"):
        wrong.append(f"compiling a C extension against the Python headers failed (gcc exit {report.get('gcc')}: "
                     f"{report.get('log')})")
    if report.get("gxx") != 0:
        wrong.append("g++ does not run")
    return wrong


PROFILE_IMAGES = {
    "office": Profile(
        name="office", tag="ipyskills-sandbox-office:latest", packages_file="office-packages.txt",
        npm_file="office-npm.txt", backports=True,
        versions=("HOME=/tmp/lo-home soffice --version; rm -rf /tmp/lo-home\n"
                  "pdftoppm -v 2>&1 | head -1\npandoc --version | head -1\ntesseract --version 2>&1 | head -1\n"
                  f"NODE_PATH={OFFICE_NODE_PATH} node -e \"require('docx'); require('pptxgenjs'); "
                  "console.log('node', process.version)\"\n"),
        check_script=_OFFICE_CHECK, check_timeout=300),
    "build": Profile(
        name="build", tag="ipyskills-sandbox-build:latest", packages_file="build-packages.txt", npm_file=None,
        backports=False, versions="gcc --version | head -1\npython3-config --includes\n",
        check_script=_BUILD_CHECK, check_timeout=120, build_only=True),
}
FAILURES = {"office": _office_failures, "build": _build_failures}


def profile(name: str) -> Profile:
    try:
        return PROFILE_IMAGES[name]
    except KeyError:
        raise SandboxError(f"unknown sandbox profile {name!r}: choose one of core, "
                           f"{', '.join(PROFILE_IMAGES)}") from None


def list_file(name: str) -> list[str]:
    from .image import IMAGES_DIR

    lines = (IMAGES_DIR / name).read_text().splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def _install_script(p: Profile) -> str:
    """Runs as root in a network-none container of the core image, with the .debs in /tmp/ipyskills-debs
    (and the npm tree in /opt/ipyskills/node); the container is then committed."""
    npm = "chmod -R a+rX /opt/ipyskills/node\n" if p.npm_file else ""
    return ("set -eu\nexport DEBIAN_FRONTEND=noninteractive\n"
            "apt-get install -y -q --no-install-recommends /tmp/ipyskills-debs/*.deb\n"
            "rm -rf /tmp/ipyskills-debs /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin "
            "/usr/share/doc/* /usr/share/man/* /usr/share/info/* /var/log/apt /var/log/dpkg.log\n"
            + npm + p.versions)


def recipe_hash(name: str) -> str:
    """sha256 over the core recipe, the profile's package lists, its install steps and its self-check."""
    from .image import IMAGES_DIR
    from .image import recipe_hash as core_recipe_hash

    p = profile(name)
    digest = hashlib.sha256(core_recipe_hash().encode() + b"\0" + _install_script(p).encode() + b"\0"
                            + p.check_script.encode() + b"\0" + (BACKPORTS if p.backports else "").encode())
    for file in p.recipe_files:
        digest.update(file.encode() + b"\0" + (IMAGES_DIR / file).read_bytes() + b"\0")
    return digest.hexdigest()


def build_profile_image(name: str, tag: str | None = None, offline: bool = False, client=None, log=print,
                        mirror: str | None = None, fresh_base: bool = False) -> str:
    """Build the profile image `name` FROM the core image (built first when it is absent or stale), check
    it with a sandbox run, and return its id."""
    from .client import connect
    from .image import _Stages, build_image, image_info

    p = profile(name)
    tag = tag or p.tag
    client = client or connect(timeout=600)
    stages = _Stages(log, 5 if p.npm_file else 4)
    core = DEFAULT_IMAGE
    stages.start(f"core image {core}")
    info = image_info(client, core)
    if info and info["current"]:
        stages.note(f"reusing {core} ({info['id']}, current)")
    else:
        stages.note(f"{core} is {'stale' if info else 'absent'}: building it first")
        build_image(tag=core, offline=offline, client=client, mirror=mirror, fresh_base=fresh_base,
                    log=lambda line: stages.note("  " + line))
    pkgs = list_file(p.packages_file)
    workdir = Path(tempfile.mkdtemp(prefix=f"ipyskills-{name}-"))
    try:
        where = f" ({BACKPORTS} where it is newer)" if p.backports else ""
        stages.start(f"download {len(pkgs)} Debian packages{where} and their dependencies (apt-get "
                     f"--download-only in a container of {core})")
        debs = _download_debs(client, core, pkgs, p.backports, workdir / "debs", stages)
        stages.note(f"{len(debs)} .deb files, {sum(d.stat().st_size for d in debs) / 1e6:.0f} MB")
        if p.npm_file:
            specs = list_file(p.npm_file)
            stages.start(f"npm install --ignore-scripts {' '.join(specs)} (on the host)")
            _npm_install(specs, workdir / "node", stages)
        stages.start(f"install them with network none and commit {tag}")
        image_id = _install_and_commit(client, core, p, workdir, tag, offline, stages)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    stages.start(f"self-check: a sandbox run of {tag}")
    try:
        summary = self_check(client, name, tag)
    except SandboxError:
        _untag(client, tag)
        stages.note(f"removed the tag {tag}: the image failed its self-check")
        raise
    stages.note(summary)
    size = (client.images.get(image_id).attrs.get("Size") or 0) / 1e6
    stages.note(f"done: {tag} ({image_id[:19]}, {size:.0f} MB)")
    return image_id


def self_check(client, name: str, tag: str | None = None) -> str:
    """Run the profile's check as an ordinary sandbox run of `tag` (uid 1000, network none, read-only
    root) and return a one-line summary; raises SandboxError saying what does not work."""
    from ..policy import Limits
    from ..request import RunRequest
    from ..scratch import make_scratch_dir, remove_tree
    from .backend import DockerBackend

    p = profile(name)
    tag = tag or p.tag
    folder = make_scratch_dir(f"{name}-check")
    try:
        (folder / "check.py").write_text(p.check_script)
        for path in (folder, folder / "check.py"):
            os.chmod(path, 0o755)
        request = RunRequest(skill_name=f"{name} self-check", skill_dir=folder, script="check.py", args=[],
                             limits=Limits(memory=2 * 1024**3, timeout=p.check_timeout, tmp_size="512m"),
                             image=tag, env={})
        result = DockerBackend(image=tag, client=client).run(request)
    finally:
        remove_tree(folder)
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise SandboxError(f"the {name} image's self-check did not finish (exit {result.exit_code}"
                           f"{', timed out' if result.timed_out else ''}): {result.stderr.strip()[-800:]}") from None
    wrong = FAILURES[name](report)
    if wrong:
        raise SandboxError(f"the {name} image failed its self-check: " + "; ".join(wrong))
    if name == "office":
        return (f"self-check passed in {result.duration:.0f} s: {' '.join(report['soffice'])}; a macro "
                f"recalculated [7, 12] with 1 error cell; DOCX to PDF, 1 page; OCR read "
                f"{report['ocr']['text']!r}")
    return f"self-check passed in {result.duration:.0f} s: a C extension compiled against the Python headers"


def _untag(client, tag: str) -> None:
    """Remove `tag` (the image goes when nothing uses it: the check's container may still be going)."""
    import docker.errors

    try:
        client.images.remove(tag, force=True)
    except docker.errors.APIError:
        pass


def _download_debs(client, core: str, pkgs: list[str], backports: bool, dest: Path, stages) -> list[Path]:
    import docker.errors

    # The backports suite is added next to the core image's own sources, on the same mirror; `-t` prefers
    # it for every package it carries (LibreOffice needs its matching libraries from there too).
    suite = ""
    if backports:
        suite = ("sed -n 's/^deb \\([^ ]*\\) bookworm main.*/deb \\1 " + BACKPORTS + " main/p' "
                 "/etc/apt/sources.list > /etc/apt/sources.list.d/backports.list; ")
    target = f"-t {BACKPORTS} " if backports else ""
    script = ("set -eu; export DEBIAN_FRONTEND=noninteractive; " + suite + "apt-get update -q; "
              f"apt-get install -y -q --no-install-recommends --download-only {target}{' '.join(pkgs)}")
    container = client.containers.create(core, ["sh", "-c", script], user="0", entrypoint=[],
                                         labels={"ipyskills.build-helper": "1"})
    try:
        container.start()
        _follow(container.logs(stream=True, follow=True), stages)
        code = container.wait().get("StatusCode", 1)
        if code != 0:
            tail = container.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
            raise SandboxError(f"downloading the profile's packages failed (exit {code}): {tail}. The engine's "
                               "containers need to reach the Debian archive (as the offline build's "
                               "debootstrap does); check the network, then build again.")
        stream, _stat = container.get_archive("/var/cache/apt/archives")
        buf = io.BytesIO(b"".join(stream))
    except docker.errors.APIError as exc:
        raise SandboxError(f"downloading the profile's packages failed: {exc.explanation or exc}") from None
    finally:
        container.remove(force=True)
    dest.mkdir(parents=True)
    debs = []
    with tarfile.open(fileobj=buf) as tar:
        for member in tar.getmembers():
            base = os.path.basename(member.name)
            if member.isfile() and base.endswith(".deb") and "/" not in base:
                with tar.extractfile(member) as src, open(dest / base, "wb") as out:
                    shutil.copyfileobj(src, out)
                debs.append(dest / base)
    if not debs:
        raise SandboxError("apt-get downloaded no packages for the profile; are they installed already?")
    return debs


def _npm_install(specs: list[str], dest: Path, stages) -> None:
    from .image import _stream

    npm = shutil.which("npm")
    if npm is None:
        raise SandboxError("the office profile needs npm on this machine to fetch "
                           f"{', '.join(specs)}: install it (apt-get install npm) and build again")
    dest.mkdir(parents=True)
    (dest / "package.json").write_text('{"name": "ipyskills-office", "private": true}\n')
    _stream([npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev", "--save-exact",
             "--prefix", str(dest), *specs], stages,
            "npm install failed", "The host needs access to the npm registry (or a configured one).")


def _follow(lines, stages) -> None:
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
    """One tar with the .debs at tmp/ipyskills-debs (and the npm tree at opt/ipyskills/node), owned by root."""
    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode = (info.mode | 0o444 | (0o111 if info.isdir() or info.mode & 0o100 else 0)) & 0o755
        return info

    path = workdir / "payload.tar"
    with tarfile.open(path, "w") as tar:
        tar.add(workdir / "debs", arcname="tmp/ipyskills-debs", filter=owned_by_root)
        if (workdir / "node").is_dir():
            tar.add(workdir / "node", arcname="opt/ipyskills/node", filter=owned_by_root)
    return path


def _install_and_commit(client, core: str, p: Profile, workdir: Path, tag: str, offline: bool, stages) -> str:
    import docker.errors

    from .image import LABEL_BUILD, LABEL_PROFILE, LABEL_RECIPE

    payload = _tar_of(workdir)
    container = client.containers.create(core, ["sleep", "infinity"], user="0", entrypoint=[],
                                         network_mode="none", labels={"ipyskills.build-helper": "1"})
    try:
        container.start()
        with open(payload, "rb") as fh:
            if not container.put_archive("/", fh):
                raise SandboxError(f"could not copy the {p.name} packages into the build container")
        payload.unlink()
        result = container.exec_run(["sh", "-c", _install_script(p)], user="0", stream=True, demux=False)
        _follow(result.output, stages)
        repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        changes = ["USER 1000:1000", "WORKDIR /skill", 'CMD ["python3"]',
                   f"LABEL {LABEL_PROFILE}={p.name}",
                   f"LABEL {LABEL_BUILD}={'offline' if offline else 'online'}",
                   f"LABEL {LABEL_RECIPE}={recipe_hash(p.name)}"]
        if p.npm_file:
            changes.append(f"ENV NODE_PATH={OFFICE_NODE_PATH}")
        if p.build_only:
            changes.append(f"LABEL {LABEL_BUILD_ONLY}=1")
        image = container.commit(repository=repository, tag=version, changes=changes)
        return image.id
    except docker.errors.APIError as exc:
        raise SandboxError(f"building the {p.name} image failed: {exc.explanation or exc}") from None
    finally:
        container.remove(force=True)

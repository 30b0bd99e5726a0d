"""The sandbox image: its recipe hash, what is inside it, and the offline build path."""

from __future__ import annotations

import contextlib
import os
import shutil

import pytest

from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker import image


def test_recipe_hash_follows_the_dockerfile_and_package_list(tmp_path, monkeypatch):
    for name in image.RECIPE_FILES:
        shutil.copy(image.IMAGES_DIR / name, tmp_path / name)
    monkeypatch.setattr(image, "IMAGES_DIR", tmp_path)
    original = image.recipe_hash()
    assert original == image.recipe_hash()
    (tmp_path / "packages.txt").write_text((tmp_path / "packages.txt").read_text() + "jq\n")
    changed = image.recipe_hash()
    assert changed != original and "jq" in image.packages()
    (tmp_path / "Dockerfile").write_text((tmp_path / "Dockerfile").read_text() + "# tweak\n")
    assert image.recipe_hash() not in (original, changed)


def test_package_list_has_what_skills_need():
    pkgs = image.packages()
    assert {"python3", "bash", "ca-certificates", "fonts-dejavu-core"} <= set(pkgs)
    assert not any(p.startswith("#") or " " in p for p in pkgs)
    # the Python stack comes from wheels: a Debian numpy would clash with an overlay's numpy
    assert not any(p.startswith("python3-") for p in pkgs)


# import name of each distribution in base-requirements.txt (the test fails when one is added without it)
BASE_IMPORTS = {
    "numpy": "numpy", "pandas": "pandas", "scipy": "scipy", "scikit-learn": "sklearn",
    "statsmodels": "statsmodels.api", "matplotlib": "matplotlib.pyplot", "seaborn": "seaborn",
    "pillow": "PIL.Image", "openpyxl": "openpyxl", "xlsxwriter": "xlsxwriter", "pypdf": "pypdf",
    "pdfplumber": "pdfplumber", "python-docx": "docx", "python-pptx": "pptx", "lxml": "lxml.etree",
    "defusedxml": "defusedxml.ElementTree", "requests": "requests", "pyyaml": "yaml",
    "beautifulsoup4": "bs4", "sympy": "sympy", "tqdm": "tqdm",
    "setuptools": "pkg_resources", "pip": "pip",  # as in every fresh Python 3.11 environment
}


def test_base_requirements_are_the_data_set_and_all_locked():
    from ipyskills.sandbox.wheels import lock_names, normalize

    import re

    reqs = image.base_requirements()
    assert {normalize(re.split(r"[<>=!~]", r, maxsplit=1)[0]) for r in reqs} == set(BASE_IMPORTS)
    lines = [ln for ln in (image.IMAGES_DIR / "base-requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert lines == reqs  # one plain requirement a line: other code reads the names from this file
    lock = image.base_lock()
    locked = lock_names(lock)
    assert set(BASE_IMPORTS) <= set(locked)
    entries = [ln for ln in lock.splitlines() if ln and not ln.startswith((" ", "#"))]
    assert len(entries) == len(locked)
    assert all("==" in e and e.endswith("\\") for e in entries)  # exact pin, hashes follow
    assert lock.count("--hash=sha256:") >= len(locked)


def test_recipe_hash_covers_the_lock_and_requirements(tmp_path, monkeypatch):
    for name in image.RECIPE_FILES:
        shutil.copy(image.IMAGES_DIR / name, tmp_path / name)
    monkeypatch.setattr(image, "IMAGES_DIR", tmp_path)
    original = image.recipe_hash()
    (tmp_path / "base.lock").write_text((tmp_path / "base.lock").read_text().replace("==", "== ", 1))
    after_lock = image.recipe_hash()
    (tmp_path / "base-requirements.txt").write_text("numpy\n")
    assert len({original, after_lock, image.recipe_hash()}) == 3


def test_trim_tests_removes_only_test_suites(tmp_path):
    site = tmp_path / "site"
    for rel in ("numpy/_core/tests/test_a.py", "numpy/testing/__init__.py", "numpy/_core/multiarray.py",
                "pandas/tests/frame/test_b.py", "pandas/_testing/__init__.py", "scipy/stats/tests/data/x.csv",
                "sympy/core/tests/test_c.py", "openpyxl/tests/__init__.py", "joblib/test/test_d.py"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("x = 1\n")
    freed = image.trim_tests(site)
    assert freed == 4 * len("x = 1\n")
    left = sorted(str(p.relative_to(site)) for p in site.rglob("*.*"))
    assert left == ["joblib/test/test_d.py", "numpy/_core/multiarray.py", "numpy/testing/__init__.py",
                    "openpyxl/tests/__init__.py", "pandas/_testing/__init__.py"]


def test_offline_build_explains_missing_debootstrap(monkeypatch):
    class NoBaseClient:
        class images:  # mimics docker-py's client.images
            @staticmethod
            def get(tag):
                import docker.errors

                raise docker.errors.ImageNotFound(tag)

    monkeypatch.setattr(image.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="install it \\(apt-get install debootstrap\\)"):
        image.build_image(tag="ipyskills-test:never", offline=True, client=NoBaseClient(), log=lambda s: None)


@pytest.mark.docker
def test_built_image_is_current_and_has_the_tools(docker_backend, run_in_docker):
    client = docker_backend.client()
    info = image.image_info(client, docker_backend.image)
    assert info["current"], "the sandbox image is older than images/Dockerfile: run ipyskills sandbox build"
    script = (
        "import os, pwd, shutil, time; t = time.monotonic(); import numpy, pandas, matplotlib.pyplot as plt; "
        "print(pwd.getpwuid(1000).pw_name, os.getuid(), plt.get_backend().lower(), bool(shutil.which('bash')), "
        "numpy.__version__ > '1', pandas.__version__ > '1', time.monotonic() - t < 5)"
    )
    result = run_in_docker({"check.py": script}, "check.py")
    assert result.stdout.split() == ["sandbox", "1000", "agg", "True", "True", "True", "True"]
    assert result.stderr == ""  # no "Matplotlib is building the font cache" (the image seeds it)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1200)  # stage 4 of an image build: docker build and the locked wheels unpacked
def test_offline_build_on_the_kept_base_needs_no_network(docker_backend):
    import docker.errors

    client = docker_backend.client()
    try:
        client.images.get(image.offline_base_tag())
    except docker.errors.ImageNotFound:
        reason = "no imported offline base for this package list yet (ipyskills sandbox build --offline)"
        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":  # scripts/setup.sh built it: it must be there
            pytest.fail(f"IPYSKILLS_REQUIRE_DOCKER=1 but there is {reason}")
        pytest.skip(reason)
    tag = "ipyskills-sandbox-test:offline"
    lines = []
    try:
        image.build_image(tag=tag, offline=True, client=client, log=lines.append)
        info = image.image_info(client, tag)
        assert info["current"] and info["build"] == "offline"
        assert any("reusing ipyskills-base:" in line for line in lines)
        assert any("stage 4/4: docker build" in line for line in lines)
        assert any("unpacking" in line and "locked wheel" in line for line in lines)
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag)


def _json_line(result) -> dict:
    import json

    assert result.exit_code == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.docker
def test_every_base_distribution_imports_as_uid_1000_on_the_read_only_root(docker_backend, run_in_docker):
    from ipyskills.sandbox.wheels import lock_names

    script = (
        "import importlib, importlib.metadata as md, json, os, sys\n"
        f"mods = {BASE_IMPORTS!r}\n"
        "out = {'uid': os.getuid(), 'ro': not os.access('/usr/local/lib', os.W_OK), 'versions': {}, 'bad': {}}\n"
        "try:\n    open('/usr/local/x', 'w')\nexcept OSError as e:\n    out['write'] = e.errno\n"
        "for dist, mod in mods.items():\n"
        "    try:\n        importlib.import_module(mod)\n        out['versions'][dist] = md.version(dist)\n"
        "    except Exception as e:\n        out['bad'][dist] = repr(e)\n"
        "print(json.dumps(out))\n"
    )
    out = _json_line(run_in_docker({"check.py": script}, "check.py", memory=1024**3, timeout=120))
    assert out["bad"] == {}
    assert out["uid"] == 1000 and out["ro"] and out["write"] == 30  # EROFS: the root is read-only
    locked = lock_names(image.base_lock())
    assert {d: locked[d] for d in out["versions"]} == out["versions"]  # exactly the locked wheels


@pytest.mark.docker
def test_science_stack_works_within_the_default_limits(docker_backend, run_in_docker):
    script = """
import json, os
import numpy as np, pandas as pd, scipy.optimize, scipy.stats, matplotlib.pyplot as plt
from sklearn.linear_model import LinearRegression
x = np.linspace(0, 10, 200)
y = 3 * x + 2 + np.random.default_rng(0).normal(0, 0.1, x.size)
df = pd.DataFrame({"x": x, "y": y})
fit = LinearRegression().fit(df[["x"]], df["y"])
root = scipy.optimize.brentq(lambda v: v * v - 2, 0, 2)
p = scipy.stats.pearsonr(df.x, df.y)[0]
fig, ax = plt.subplots()
ax.plot(df.x, df.y)
fig.savefig("/tmp/plot.png")
with open("/tmp/plot.png", "rb") as fh:
    png = fh.read(8)
print(json.dumps({"coef": round(float(fit.coef_[0]), 2), "root": round(root, 6), "p": round(float(p), 3),
                  "png": png == b"\\x89PNG\\r\\n\\x1a\\n", "size": os.path.getsize("/tmp/plot.png")}))
"""
    out = _json_line(run_in_docker({"calc.py": script}, "calc.py"))
    assert out["coef"] == 3.0 and out["root"] == 1.414214 and out["p"] == 1.0
    assert out["png"] and out["size"] > 1000


@pytest.mark.docker
def test_every_module_has_its_bytecode_compiled_at_build_time(docker_backend, run_in_docker):
    script = """
import importlib.util, json, os, sys
root = "/usr/local/lib/python3.11/dist-packages"
total, missing = 0, []
for dirpath, dirs, files in os.walk(root):
    for name in files:
        if name.endswith(".py"):
            total += 1
            src = os.path.join(dirpath, name)
            if not os.path.exists(importlib.util.cache_from_source(src)):
                missing.append(src)
import numpy, pandas
loaded = [m for m in list(sys.modules.values())
          if getattr(m, "__file__", None) and m.__file__.startswith(root) and m.__file__.endswith(".py")]
not_cached = [m.__name__ for m in loaded if not os.path.exists(m.__cached__)]
print(json.dumps({"version": sys.version_info[:2], "total": total, "missing": missing[:10],
                  "loaded": len(loaded), "not_cached": not_cached[:10]}))
"""
    out = _json_line(run_in_docker({"pyc.py": script}, "pyc.py", timeout=60))
    assert out["version"] == [3, 11]
    assert out["total"] > 3000 and out["missing"] == []
    assert out["loaded"] > 100 and out["not_cached"] == []  # numpy and pandas load from .pyc files


@pytest.mark.docker
def test_image_is_well_under_the_debian_stack_size(docker_backend):
    size = docker_backend.client().images.get(docker_backend.image).attrs["Size"]
    print(f"sandbox image: {size / 1e6:.0f} MB")
    assert size < 1.0e9  # the Debian-packaged stack was 1.13 GB


OFFICE_SCRIPT = r"""
import json, os, subprocess, sys
import docx
work = "/tmp/work"
os.makedirs(work)
d = docx.Document()
d.add_heading("ipyskills office profile", 0)
d.add_paragraph("A paragraph written by python-docx, converted by LibreOffice.")
d.save(f"{work}/in.docx")
env = dict(os.environ, HOME="/tmp")
soffice = subprocess.run(["soffice", "-env:UserInstallation=file:///tmp/lo", "--headless", "--convert-to", "pdf",
                          "--outdir", work, f"{work}/in.docx"], capture_output=True, text=True, timeout=100, env=env)
pdf = f"{work}/in.pdf"
head = open(pdf, "rb").read(5) if os.path.exists(pdf) else b""
ppm = subprocess.run(["pdftoppm", "-png", "-r", "50", "-singlefile", pdf, f"{work}/page"], capture_output=True,
                     text=True)
png = open(f"{work}/page.png", "rb").read(8) if os.path.exists(f"{work}/page.png") else b""
text = subprocess.run(["pdftotext", pdf, "-"], capture_output=True, text=True).stdout
node = subprocess.run(["node", "-e", "require('docx'); require('pptxgenjs'); console.log('ok')"],
                      capture_output=True, text=True)
tools = {t: subprocess.run(["sh", "-c", f"command -v {t}"], capture_output=True).returncode == 0
         for t in ("qpdf", "pandoc")}
try:
    open("/usr/x", "w")
    ro = False
except OSError:
    ro = True
print(json.dumps({"uid": os.getuid(), "ro": ro, "soffice": soffice.returncode, "soffice_err": soffice.stderr[-500:],
                  "pdf": head == b"%PDF-", "png": png == b"\x89PNG\r\n\x1a\n", "ppm_err": ppm.stderr[-300:],
                  "text": "python-docx" in text, "node": node.stdout.strip(), "node_err": node.stderr[-300:],
                  "tools": tools}))
"""


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(600)  # LibreOffice's first start in a fresh container, under a 150 s run limit
def test_office_profile_converts_docx_to_pdf_and_png_offline(docker_backend, make_skill):
    """In the office image, as uid 1000 on the read-only root with no network: LibreOffice converts a .docx
    written by python-docx to PDF, pdftoppm renders it to PNG, and Node has docx and pptxgenjs."""
    import json

    from ipyskills.sandbox.docker.backend import DockerBackend
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.request import RunRequest

    client = docker_backend.client()
    tag = image.profile_image("office")
    info = image.image_info(client, tag)
    if info is None:
        if os.environ.get("IPYSKILLS_REQUIRE_OFFICE") == "1":
            pytest.fail("IPYSKILLS_REQUIRE_OFFICE=1 but there is no office image")
        pytest.skip("no office image (ipyskills sandbox build --profile office [--offline])")
    assert info["current"] and info["profile"] == "office"
    folder = make_skill({"office.py": OFFICE_SCRIPT})
    backend = DockerBackend(image=tag, client=client)
    request = RunRequest(skill_name=folder.name, skill_dir=folder, script="office.py", args=[], stdin=b"",
                         limits=Limits(memory=1024**3, timeout=150), env={})
    result = backend.run(request)
    assert result.exit_code == 0, result.stderr[-3000:]
    assert "read-only root" in result.isolation and "network none" in result.isolation
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["uid"] == 1000 and out["ro"]
    assert out["soffice"] == 0 and out["pdf"], out["soffice_err"]
    assert out["text"] and out["png"], out["ppm_err"]
    assert out["node"] == "ok", out["node_err"]
    assert out["tools"] == {"qpdf": True, "pandoc": True}


def test_profiles_name_their_images():
    assert image.profile_image("core") == image.PROFILES["core"]
    assert image.profile_image("office") == "ipyskills-sandbox-office:latest"
    with pytest.raises(SandboxError, match="unknown sandbox profile"):
        image.profile_image("gpu")
    assert image.profile_image("build") == "ipyskills-sandbox-build:latest"
    from ipyskills.sandbox.docker import profile_images

    hashes = {profile_images.recipe_hash("office"), profile_images.recipe_hash("build"), image.recipe_hash()}
    assert len(hashes) == 3
    office = profile_images.profile("office")
    assert "libreoffice-writer-nogui" in profile_images.list_file(office.packages_file)
    assert {"tesseract-ocr", "tesseract-ocr-eng", "ghostscript"} <= set(profile_images.list_file(office.packages_file))
    assert office.backports and not profile_images.profile("build").backports
    assert all("@" in spec for spec in profile_images.list_file(office.npm_file))  # exact npm versions
    assert {"gcc", "g++", "python3-dev"} <= set(profile_images.list_file(profile_images.profile("build").packages_file))


def test_unknown_profile_is_refused_before_any_docker_call():
    with pytest.raises(SandboxError, match="unknown sandbox profile 'gpu'"):
        image.build_image(profile="gpu", client=object(), log=lambda s: None)


@pytest.mark.docker
def test_status_reports_each_profile(docker_backend):
    from ipyskills.cli.sandbox_cmds import sandbox_status

    report = sandbox_status(docker_backend.image)
    assert set(report["profiles"]) == {"core", "office", "build"}
    core = report["profiles"]["core"]
    assert core["image"] == docker_backend.image and core["present"] and core["current"]
    assert report["profiles"]["office"]["image"] == image.profile_image("office")


def test_a_profile_recipe_hash_follows_its_package_list_and_its_self_check(tmp_path, monkeypatch):
    """A changed package list or self-check makes the present office image stale (status says rebuild)."""
    import dataclasses

    from ipyskills.sandbox.docker import profile_images

    for name in (*image.RECIPE_FILES, "office-packages.txt", "office-npm.txt", "build-packages.txt"):
        shutil.copy(image.IMAGES_DIR / name, tmp_path / name)
    monkeypatch.setattr(image, "IMAGES_DIR", tmp_path)
    original = profile_images.recipe_hash("office")
    build = profile_images.recipe_hash("build")
    (tmp_path / "office-packages.txt").write_text((tmp_path / "office-packages.txt").read_text() + "jq\n")
    with_jq = profile_images.recipe_hash("office")
    assert with_jq != original and profile_images.recipe_hash("build") == build
    office = profile_images.PROFILE_IMAGES["office"]
    monkeypatch.setitem(profile_images.PROFILE_IMAGES, "office",
                        dataclasses.replace(office, check_script=office.check_script + "\n# tweak\n"))
    assert profile_images.recipe_hash("office") not in (original, with_jq)
    (tmp_path / "Dockerfile").write_text((tmp_path / "Dockerfile").read_text() + "# tweak\n")
    assert profile_images.recipe_hash("build") != build  # the core recipe is part of every profile's

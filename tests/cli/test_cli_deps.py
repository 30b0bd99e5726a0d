"""`ipyskills deps` through a real subprocess: the report, --json, errors; --install on the local backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

SKILL_MD = """---
name: pdf-maker
description: Makes PDFs. Use when a PDF is asked for.
---
# PDF maker

```bash
pip install "reportlab>=4"
# Optional: GPU acceleration
pip install cupy-cuda12x
```
"""


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    e.update(HOME=str(home), IPYSKILLS_BUNDLED_SKILLS="0", PYTHONIOENCODING="utf-8")
    skill = tmp_path / "skills" / "pdf-maker"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "scripts" / "make.py").write_text("import fitz\nimport yaml\nimport tabulate\nprint('made')\n")
    (skill / "requirements.txt").write_text("# pinned for the table\ntabulate==0.9.0\n")
    return e, tmp_path / "skills"


def cli(env, *args, **kwargs):
    return subprocess.run([sys.executable, "-m", "ipyskills", *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False, **kwargs)


def test_deps_lists_each_distribution_with_its_source(env):
    e, root = env
    proc = cli(e, "deps", "pdf-maker", "--dir", str(root))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("pdf-maker: 3 Python distribution(s) to install, 1 already in the sandbox image")
    table = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert "SKILL.md:8" in table["reportlab>=4"]
    assert "requirements.txt:2" in table["tabulate==0.9.0"]
    assert "scripts/make.py:1" in table["PyMuPDF"] and "import fitz" in table["PyMuPDF"]
    assert "scripts/make.py:2" in table["PyYAML"]  # in the image, listed under that heading
    assert lines.index("already in the sandbox image:") < lines.index(table["PyYAML"])
    assert any("cupy-cuda12x" in line and "optional" in line for line in lines)


def test_deps_declared_mode_marks_inferred_ones_as_not_installed(env):
    e, root = env
    proc = cli(e, "deps", "pdf-maker", "--dir", str(root), "--deps", "declared")
    assert "2 Python distribution(s) to install" in proc.stdout
    pymupdf = next(line for line in proc.stdout.splitlines() if "PyMuPDF" in line)
    assert "not installed: --deps declared" in pymupdf


def test_deps_json_round_trips(env):
    e, root = env
    data = json.loads(cli(e, "deps", "pdf-maker", "--dir", str(root), "--json").stdout)
    assert {r["name"] for r in data["python"]} == {"reportlab", "tabulate", "PyMuPDF"}
    source = {r["name"]: (r["source"], r["file"], r["line"]) for r in data["python"]}
    assert source["tabulate"] == ("requirements", "requirements.txt", 2)
    assert source["PyMuPDF"] == ("import", "scripts/make.py", 1)
    assert data["profile"] is None


def test_deps_of_an_unknown_skill_is_one_error_line(env):
    e, root = env
    proc = cli(e, "deps", "no-such-skill", "--dir", str(root))
    assert proc.returncode == 1
    assert proc.stderr.startswith("ipyskills: error: ") and "no-such-skill" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_deps_install_on_the_local_backend_reports_and_caches(env, tmp_path):
    e, root = env
    cache = tempfile.mkdtemp(prefix="ipyskills-cache-")
    os.chmod(cache, 0o755)
    e = {**e, "IPYSKILLS_CACHE_DIR": cache}
    (root / "pdf-maker" / "scripts" / "make.py").write_text("import tabulate\nprint('made')\n")
    (root / "pdf-maker" / "SKILL.md").write_text(SKILL_MD.replace('pip install "reportlab>=4"', ""))
    try:
        first = cli(e, "deps", "pdf-maker", "--dir", str(root), "--install", "--backend", "local", "--json")
        assert first.returncode == 0, first.stderr
        installed = json.loads(first.stdout)["installed"]
        assert installed["built"] is True and installed["distributions"] == ["tabulate==0.9.0"]
        assert installed["site"].startswith(cache)
        assert "ipyskills: dependencies: resolving" in first.stderr
        second = cli(e, "deps", "pdf-maker", "--dir", str(root), "--install", "--backend", "local")
        assert second.stdout.splitlines()[-1] == f"already provisioned: tabulate==0.9.0 -> {installed['site']}"
        run = cli(e, "run", "--dir", str(root), "--backend", "local", "pdf-maker", "scripts/make.py",
                  stdin=subprocess.DEVNULL)
        assert run.returncode == 0 and run.stdout == "made\n", run.stderr
    finally:
        import shutil

        shutil.rmtree(cache, ignore_errors=True)


def _docker_ready() -> tuple[bool, str]:
    from ipyskills.sandbox.docker.backend import DockerBackend

    return DockerBackend().readiness()


def _forget_docopt_images() -> None:
    """Remove dependency images holding docopt (one made with the opt-in is reused without it)."""
    from ipyskills.sandbox.docker.backend import shared_client
    from ipyskills.sandbox.provision import docker_image

    client = shared_client()
    for image in client.images.list(name=docker_image.REPOSITORY):
        if "docopt" in (image.labels or {}).get(docker_image.LABEL_INSTALLED, ""):
            for tag in image.tags:
                client.images.remove(tag, force=True)  # a finished run's container may still be going


@pytest.mark.slow
def test_an_sdist_is_built_by_default_and_no_sdist_refuses_it(env):
    """docopt publishes only an sdist: by default it is built in a throwaway container and provisioned;
    --no-sdist (or IPYSKILLS_ALLOW_SDIST=0) refuses it with both ways out named, and --allow-sdist beats the
    environment variable."""
    e, root = env
    skill = root / "pdf-maker"
    (skill / "requirements.txt").write_text("docopt==0.6.2\n")
    (skill / "scripts" / "make.py").write_text("import docopt\nprint('docopt', docopt.__version__)\n")
    (skill / "SKILL.md").write_text(SKILL_MD.replace('pip install "reportlab>=4"', ""))
    ready, reason = _docker_ready()
    if not ready:
        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"IPYSKILLS_REQUIRE_DOCKER=1 but Docker is not ready: {reason}")
        pytest.skip(f"Docker backend not ready: {reason}")
    _forget_docopt_images()
    for refuse, extra_env in ((["--no-sdist"], {}), ([], {"IPYSKILLS_ALLOW_SDIST": "0"})):
        refused = cli({**e, **extra_env}, "run", "--dir", str(root), "--backend", "docker", *refuse, "pdf-maker",
                      "scripts/make.py", stdin=subprocess.DEVNULL)
        assert refused.returncode == 1 and refused.stdout == ""
        error = refused.stderr.splitlines()[-1]
        assert error.startswith("ipyskills: error: docopt has no wheel") and "--no-sdist" in error
        assert "requirements.txt:1" in error
    for allow, extra_env in (([], {}), (["--allow-sdist"], {"IPYSKILLS_ALLOW_SDIST": "0"})):
        run = cli({**e, **extra_env}, "run", "--dir", str(root), "--backend", "docker", *allow, "pdf-maker",
                  "scripts/make.py", stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr
        assert run.stdout == "docopt 0.6.2\n"
        _forget_docopt_images()  # so the next run builds again

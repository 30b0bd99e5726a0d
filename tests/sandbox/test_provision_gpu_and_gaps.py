"""Provisioning's last gaps: torch's CPU builds instead of its CUDA build (or the CUDA build when the user
accepts it), dependencies a package imports without declaring, and a dependency that needs an old
release built from that release's sdist."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import forget_deps_images

from ipyskills import SkillRegistry
from ipyskills.errors import ProvisionError
from ipyskills.sandbox import wheels
from ipyskills.sandbox.provision import gpu, sdist, undeclared
from ipyskills.settings import Settings

needs_index = pytest.mark.skipif(os.environ.get("IPYSKILLS_NO_INDEX") == "1", reason="no package index")


@pytest.fixture
def private_cache(monkeypatch):
    """A cache of its own that every run uid can read (root's local runs switch to other uids), which must
    hold no scratch folder at the end."""
    cache = Path(tempfile.mkdtemp(prefix="ipyskills-cache-"))
    os.chmod(cache, 0o755)
    monkeypatch.setenv("IPYSKILLS_CACHE_DIR", str(cache))
    yield cache
    left = sorted(os.listdir(cache / "scratch")) if (cache / "scratch").is_dir() else []
    shutil.rmtree(cache, ignore_errors=True)
    assert left == [], f"scratch folders left behind: {left}"


def skill(tmp_path: Path, files: dict[str, str], name: str) -> Path:
    root = tmp_path / name
    (root / "scripts").mkdir(parents=True)
    (root / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A test skill.\n---\n# {name}\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def registry(root: Path, **settings) -> SkillRegistry:
    return SkillRegistry([str(root.parent)], settings=Settings(default_roots=False, bundled_skills=False,
                                                              pool_size=0, **settings))


def pep723(deps: list[str], body: str) -> str:
    return "# /// script\n# dependencies = " + json.dumps(deps) + "\n# ///\n" + body


# -- torch: the CPU builds, or the CUDA build on request ---------------------------------------------------------

@needs_index
@pytest.mark.slow
def test_torch_takes_the_cpu_builds_when_that_index_answers_and_says_so_when_it_does_not(tmp_path, private_cache):
    root = skill(tmp_path, {"scripts/run.py": "import torch\nprint(torch.__version__)\n"}, "torchy")
    lines: list[str] = []
    if gpu.reachable(gpu.CPU_INDEX):  # a machine that reaches download.pytorch.org
        made = registry(root).install_requirements("torchy", backend="local", progress=lines.append)
        assert any("+cpu" in spec for spec in made.installed if spec.startswith("torch==")), made.installed
        assert not gpu.gpu_only(spec.split("==")[0] for spec in made.installed)
        assert any("resolving again with PyTorch's CPU builds" in line for line in lines)
        return
    with pytest.raises(ProvisionError) as caught:  # this machine: only PyPI is reachable
        registry(root).install_requirements("torchy", backend="local", progress=lines.append)
    message = str(caught.value)
    assert "GPU-only distribution(s)" in message and "the sandbox has no GPU" in message
    assert f"PyTorch's CPU builds ({gpu.CPU_INDEX}) could not be reached" in message
    assert "gpu_wheels, IPYSKILLS_GPU_WHEELS=1" in message and "deps_max_size of at least" in message
    assert not any("unpacking" in line for line in lines)  # refused before anything was downloaded


@needs_index
def test_a_cuda_wheel_is_refused_by_default_and_installed_when_gpu_wheels_is_on(tmp_path, private_cache,
                                                                               monkeypatch):
    body = "import importlib.metadata as md\nprint(md.version('nvidia-nvtx-cu12'))\n"
    root = skill(tmp_path, {"scripts/run.py": pep723(["nvidia-nvtx-cu12==12.9.79"], body)}, "cuda-small")
    with pytest.raises(ProvisionError, match=r"1 GPU-only distribution\(s\) \(nvidia-nvtx-cu12==12.9.79"):
        registry(root).run("cuda-small", "scripts/run.py", backend="local")
    monkeypatch.setenv("IPYSKILLS_GPU_WHEELS", "1")
    settings = Settings.from_env().with_overrides(default_roots=False, bundled_skills=False, pool_size=0)
    assert settings.gpu_wheels is True
    lines: list[str] = []
    result = SkillRegistry([str(root.parent)], settings=settings).run("cuda-small", "scripts/run.py",
                                                                     backend="local", progress=lines.append)
    assert result.exit_code == 0, (result.stderr, result.notice, lines)
    assert result.stdout.strip() == "12.9.79"
    assert any("accepting 1 GPU-only distribution(s)" in line and "(gpu_wheels)" in line for line in lines)


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_cpu_index_probe_counts_any_answer_and_remembers_it(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(gpu, "_probed", {})
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
        assert gpu.reachable(url) is True  # a 404 is an answer
        assert gpu.reachable("http://127.0.0.1:9/whl/cpu") is False  # nothing listens on the discard port
    finally:
        server.shutdown()
        server.server_close()
    assert gpu.reachable(url) is True  # remembered: the server is gone


def test_the_cpu_route_is_not_taken_without_torch_or_when_cuda_is_accepted(monkeypatch):
    cuda_lock = "torch==2.9.1 \\\n    --hash=sha256:" + "a" * 64 + "\nnvidia-cublas-cu12==12.8.4.1\n"
    monkeypatch.setattr(gpu, "reachable", lambda url: True)
    target = wheels.Target.for_image()
    called = []

    def resolve(cpu):
        called.append(cpu)
        return "torch==2.9.1+cpu\n"

    assert gpu.cpu_route("numpy==2.3.0\nnvidia-cublas-cu12==12.8.4.1\n", target, False, resolve, print)[0] \
        .startswith("numpy")  # CUDA wheels without torch: left to the budget's refusal
    assert gpu.cpu_route(cuda_lock, target, True, resolve, print)[0] == cuda_lock  # accepted as it is
    assert called == []
    lock, cpu, note = gpu.cpu_route(cuda_lock, target, False, resolve, print)
    assert lock == "torch==2.9.1+cpu\n" and note == ""
    assert cpu.torch_backend == "cpu" and cpu.uv_args()[-2:] == ["--torch-backend", "cpu"]
    assert called == [cpu]  # the install uses the same target, so it finds the same files


# -- undeclared dependencies ---------------------------------------------------------------------------------------

def test_undeclared_dependencies_are_added_only_when_missing():
    assert undeclared.missing("ete3==3.1.3\nnumpy==2.3.0\n") == [
        ("six", undeclared.KNOWN["ete3"][1])]
    assert undeclared.missing("ete3==3.1.3\nsix==1.17.0\nnumpy==2.3.0\n") == []
    assert undeclared.missing("pandas==3.0.0\n") == []
    seen = []
    lock, specs = undeclared.complete("ete3==3.1.3\n", ["ete3"], lambda more: seen.append(more) or "x", print)
    assert specs == ["ete3", "six", "numpy"] and seen == [specs] and lock == "x"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ete3_which_imports_six_without_declaring_it_runs(docker_backend, make_skill):
    skill_dir = make_skill({"SKILL.md": "---\nname: trees\ndescription: Phylogenetic trees.\n---\n"
                                        "```bash\npip install ete3\n```\n",
                            "scripts/leaves.py": "from ete3 import Tree\n"
                                                 "print(len(Tree('((A,B),(C,(D,E)));').get_leaves()))\n"},
                           name="trees")
    client = docker_backend.client()
    forget_deps_images(client, "ete3==")
    lines: list[str] = []
    result = SkillRegistry([str(skill_dir.parent)], settings=Settings(
        default_roots=False, bundled_skills=False, pool_size=0)).run(
        "trees", "scripts/leaves.py", backend="docker", timeout=120, memory="1g", progress=lines.append)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "5"
    assert any(line.startswith("dependencies: adding six, which the package imports without declaring it")
               for line in lines), lines
    assert "six==" in result.notice
    forget_deps_images(client, "ete3==")


# -- an old release of a dependency, built from its own sdist ----------------------------------------------------

def test_uv_s_version_range_for_a_wheelless_dependency_is_kept():
    lines = ["  × No solution found when resolving dependencies:",
             "  ╰─▶ Because gym<=0.23.0 has no usable wheels and pufferlib==2.0.2 depends on gym<=0.23, we can "
             "conclude that pufferlib==2.0.2 cannot be used."]
    error = wheels._compile_error(lines, ["pufferlib"], wheels.Target.for_image(), 1)
    assert isinstance(error, wheels.NoWheel) and (error.name, error.specifier) == ("gym", "<=0.23.0")


def test_the_sdist_built_is_the_release_the_resolve_looked_for(monkeypatch, tmp_path):
    """Before: the newest sdist (gym 0.26.2) was built for a dependency asking gym<=0.23, and the resolve
    still failed."""
    asked: list[tuple[str, str]] = []
    tries = iter([wheels.NoWheel("no wheel", "gym", "<=0.23.0"), "gym==0.23.1\n"])

    def compile_lock(*args, **kwargs):
        outcome = next(tries)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def fetch(name, specifier, dest, python_version, log):
        asked.append((name, specifier))
        return Path(dest) / f"{name}.tar.gz"

    monkeypatch.setattr(sdist, "compile_lock", compile_lock)
    monkeypatch.setattr(sdist, "fetch_sdist", fetch)
    lock = sdist.resolve_with_sdists(["pufferlib", "gym>=0.21"], wheels.Target.for_image(), constraints="",
                                     wheel_dir=tmp_path, builder=lambda *a: None, log=lambda _m: None)
    assert lock == "gym==0.23.1\n"
    assert asked == [("gym", ">=0.21,<=0.23.0")]
    assert re.fullmatch(r"[<>=.,0-9]+", asked[0][1])

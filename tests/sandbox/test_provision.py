"""Provisioning a skill's Python requirements: a derived Docker image (or a local cache folder) holding
exactly what is missing, resolved on the host from real wheels, cached by what it was made for, and every
failure a clear SkillError before any container starts."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from ipyskills import SkillError, SkillRegistry
from ipyskills.settings import Settings

TABLE_SCRIPT = """\
import socket
import tabulate
print(tabulate.tabulate([["a", 1], ["b", 2]], headers=["k", "v"]))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("NETWORK: reachable")
except OSError as exc:
    print("NETWORK: blocked", type(exc).__name__)
"""


def registry(folder: Path, **settings) -> SkillRegistry:
    base = Settings(default_roots=False, bundled_skills=False, pool_size=0)
    return SkillRegistry([str(folder)], settings=base.with_overrides(**settings))


def forget_images(client, *names: str, force: bool = False) -> None:
    """Remove every dependency image that installed one of `names`, so the next run must build again.
    force: untag even while a finished run's container (removed by the engine, later) still uses it."""
    from ipyskills.sandbox.provision import docker_image

    docker_image._hits.clear()
    for image in client.images.list(name=docker_image.REPOSITORY):
        installed = (image.labels or {}).get(docker_image.LABEL_INSTALLED, "")
        if any(name in installed for name in names) or not installed:
            for tag in image.tags:
                if tag.startswith(docker_image.REPOSITORY + ":"):
                    client.images.remove(tag, force=force)


def deps_tags(client) -> set[str]:
    from ipyskills.sandbox.provision import docker_image

    return {t for image in client.images.list(name=docker_image.REPOSITORY) for t in image.tags}


@pytest.mark.docker
@pytest.mark.slow
def test_declared_requirement_is_built_into_an_image_and_the_run_stays_offline(docker_backend, make_skill):
    client = docker_backend.client()
    forget_images(client, "tabulate")
    skill = make_skill({"requirements.txt": "tabulate==0.9.0\n", "scripts/table.py": TABLE_SCRIPT},
                       name="table-maker")
    lines: list[str] = []
    result = registry(skill).run("table-maker", "scripts/table.py", backend="docker", progress=lines.append)
    assert result.exit_code == 0, result.stderr
    assert re.search(r"^a +1$", result.stdout, re.MULTILINE) and "---  ---" in result.stdout  # tabulate's table
    assert "NETWORK: blocked" in result.stdout
    assert "tabulate==0.9.0" in result.notice and "requirements.txt:1" in result.notice
    assert any("resolving" in line for line in lines) and any("building" in line for line in lines)
    from ipyskills.sandbox.provision import docker_image

    built = [i for i in client.images.list(name=docker_image.REPOSITORY)
             if "tabulate" in (i.labels or {}).get(docker_image.LABEL_INSTALLED, "")]
    assert len(built) == 1 and json.loads(built[0].labels[docker_image.LABEL_INSTALLED]) == ["tabulate==0.9.0"]
    assert built[0].labels[docker_image.LABEL_BASE] == client.images.get(docker_backend.image).id


@pytest.mark.docker
@pytest.mark.slow
def test_a_second_skill_with_the_same_set_reuses_the_image_without_resolving(docker_backend, make_skill,
                                                                            monkeypatch):
    from ipyskills.sandbox.provision import docker_image

    files = {"requirements.txt": "tabulate==0.9.0\n", "scripts/table.py": TABLE_SCRIPT}
    first = make_skill(files, name="table-one")
    assert registry(first).run("table-one", "scripts/table.py", backend="docker").exit_code == 0
    docker_image._hits.clear()  # a new process: only the engine's tags are left

    def no_resolving(*_args, **_kwargs):
        raise AssertionError("a cache hit must not resolve again")

    monkeypatch.setattr(docker_image, "compile_lock", no_resolving)
    second = make_skill(files, name="table-two")
    lines: list[str] = []
    result = registry(second).run("table-two", "scripts/table.py", backend="docker", progress=lines.append)
    assert result.exit_code == 0, result.stderr
    assert result.notice == "" and lines == []


@pytest.mark.docker
def test_with_deps_off_the_same_script_lacks_the_package(docker_backend, make_skill):
    skill = make_skill({"requirements.txt": "tabulate==0.9.0\n", "scripts/table.py": TABLE_SCRIPT},
                       name="table-off")
    result = registry(skill).run("table-off", "scripts/table.py", backend="docker", deps="off")
    assert result.exit_code == 1
    assert "No module named 'tabulate'" in result.stderr


@pytest.mark.docker
def test_declared_mode_ignores_inferred_imports(docker_backend, make_skill):
    skill = make_skill({"scripts/table.py": TABLE_SCRIPT}, name="table-inferred")
    reg = registry(skill)
    assert [r.name for r in reg.requirements("table-inferred").python] == ["tabulate"]
    result = reg.run("table-inferred", "scripts/table.py", backend="docker", deps="declared")
    assert "No module named 'tabulate'" in result.stderr


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("requirement, expected", [
    ("ipyskills-no-such-dist-zz9", ["ipyskills-no-such-dist-zz9", "requirements.txt:1"]),
    # no version satisfies it, even replacing the image's numpy (which a skill's requirement may do)
    ("numpy>2,<1", ["numpy", "requirements.txt:1", "No versions satisfy"]),
])
def test_a_requirement_that_cannot_be_met_fails_before_any_container_or_tag(docker_backend, make_skill,
                                                                           requirement, expected):
    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID

    client = docker_backend.client()
    skill = make_skill({"requirements.txt": requirement + "\n", "scripts/x.py": "print('ran')\n"},
                       name="unmet")
    tags_before = deps_tags(client)
    with pytest.raises(SkillError) as caught:
        registry(skill).run("unmet", "scripts/x.py", backend="docker")
    message = str(caught.value)
    for part in expected:
        assert part in message
    assert deps_tags(client) == tags_before
    mine = client.containers.list(ignore_removed=True, all=True, filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={os.getpid()}"]})
    assert mine == []


@pytest.mark.docker
def test_an_unreachable_index_fails_the_run_before_any_container_or_tag(docker_backend, make_skill, monkeypatch,
                                                                       tmp_path):
    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID

    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-uv-cache"))
    client = docker_backend.client()
    skill = make_skill({"scripts/x.py": "# /// script\n# dependencies = [\"tabulate==0.8.10\"]\n# ///\nprint(1)\n"},
                       name="no-index")
    tags_before = deps_tags(client)
    with pytest.raises(SkillError) as caught:
        registry(skill).run("no-index", "scripts/x.py", backend="docker")
    message = str(caught.value)
    assert "no package index could be reached (http://127.0.0.1:9/simple" in message
    assert "UV_INDEX_URL" in message and "asked for by: tabulate (scripts/x.py:2)" in message
    assert deps_tags(client) == tags_before
    assert client.containers.list(ignore_removed=True, all=True,
                                  filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={os.getpid()}"]}) == []


def test_the_deps_setting_refuses_unknown_modes(make_skill):
    skill = make_skill({"scripts/x.py": "print(1)\n"}, name="modes")
    with pytest.raises(SkillError, match="auto, declared, off"):
        registry(skill).run("modes", "scripts/x.py", deps="sometimes")
    with pytest.raises(SkillError, match="IPYSKILLS_DEPS"):
        Settings.from_env({"IPYSKILLS_DEPS": "always"})
    assert Settings.from_env({"IPYSKILLS_DEPS": "declared"}).deps == "declared"


@pytest.fixture
def cache_dir(monkeypatch):
    """A cache every run uid can read (root's runs switch to other uids)."""
    path = tempfile.mkdtemp(prefix="ipyskills-cache-")
    os.chmod(path, 0o755)
    monkeypatch.setenv("IPYSKILLS_CACHE_DIR", path)
    yield Path(path)
    import shutil

    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_local_backend_gets_a_cached_site_folder_first_on_its_path(make_skill, cache_dir):
    import importlib.util

    assert importlib.util.find_spec("tabulate") is None, "tabulate installed on the host: pick another"
    skill = make_skill({"requirements.txt": "tabulate==0.9.0\n", "scripts/table.py": TABLE_SCRIPT},
                       name="table-local")
    reg = registry(skill)
    off = reg.run("table-local", "scripts/table.py", backend="local", deps="off")
    assert "No module named 'tabulate'" in off.stderr
    result = reg.run("table-local", "scripts/table.py", backend="local")
    assert result.exit_code == 0, result.stderr
    assert re.search(r"^a +1$", result.stdout, re.MULTILINE)
    sites = [p for p in (cache_dir / "sites").iterdir() if not p.name.startswith(".")]
    assert len(sites) == 1 and (sites[0] / "tabulate" / "__init__.py").is_file()
    assert str(sites[0]) in result.notice
    again = reg.run("table-local", "scripts/table.py", backend="local")
    assert again.exit_code == 0 and again.notice == ""
    other = make_skill({"requirements.txt": "tabulate==0.9.0\n", "scripts/t.py": TABLE_SCRIPT}, name="table-local-2")
    shared = registry(other).run("table-local-2", "scripts/t.py", backend="local")  # same set: same folder
    assert shared.exit_code == 0 and shared.notice == ""
    assert [p for p in (cache_dir / "sites").iterdir() if not p.name.startswith(".")] == sites
    assert not [p for p in (cache_dir / "sites").iterdir() if p.name.startswith(".partial-")]


@pytest.mark.docker
@pytest.mark.slow
def test_cleanup_images_removes_only_what_no_skill_in_view_needs(docker_backend, make_skill, tmp_path):
    import json as _json
    import subprocess
    import sys

    client = docker_backend.client()
    forget_images(client, "termcolor")
    skill = make_skill({"requirements.txt": "termcolor==2.4.0\n", "scripts/c.py": "import termcolor\n"},
                       name="colours")
    done = registry(skill).install_requirements("colours", backend="docker")
    assert done.built and done.installed == ["termcolor==2.4.0"]

    def cleanup(root) -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "ipyskills", "sandbox", "cleanup", "--images", "--json",
                               "--dir", str(root)], capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "IPYSKILLS_BUNDLED_SKILLS": "0"})
        assert proc.returncode == 0, proc.stderr
        return _json.loads(proc.stdout)["removed_images"]

    kept = cleanup(skill.parent)  # the skill is in view: its image stays
    assert done.image not in kept and client.images.get(done.image)
    empty = tmp_path / "no-skills"
    empty.mkdir()
    removed = cleanup(empty)  # nothing in view needs it any more
    assert done.image in removed
    import docker.errors

    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(done.image)


@pytest.mark.docker
@pytest.mark.slow
def test_a_dependency_image_removed_behind_the_process_is_rebuilt_not_reported_missing(docker_backend,
                                                                                      make_skill):
    from ipyskills.sandbox.docker.cleanup import flush_removals

    client = docker_backend.client()
    forget_images(client, "tabulate")
    skill = make_skill({"requirements.txt": "tabulate==0.9.0\n", "scripts/table.py": TABLE_SCRIPT},
                       name="table-removed")
    reg = registry(skill)
    assert reg.run("table-removed", "scripts/table.py", backend="docker").exit_code == 0
    flush_removals()
    from ipyskills.sandbox.provision import docker_image

    found_recently = dict(docker_image._hits)
    forget_images(client, "tabulate")  # as another process's `sandbox cleanup --images` would
    docker_image._hits.update(found_recently)  # this process still believes it is there
    again = reg.run("table-removed", "scripts/table.py", backend="docker")
    assert again.exit_code == 0, again.stderr
    assert "tabulate==0.9.0" in again.notice  # built again, and said so


# -- the sdist opt-in: docopt 0.6.2 (pure Python, setup.py with setuptools) publishes no wheel at all -------

GREET_SCRIPT = '''\
# /// script
# dependencies = ["docopt==0.6.2"]
# ///
"""Usage: greet.py NAME [--shout]"""
import docopt

args = docopt.docopt(__doc__)
text = "hello " + args["NAME"]
print(text.upper() if args["--shout"] else text, "docopt", docopt.__version__)
if args["--shout"]:
    import os
    print("bytecode compiled at build time:", os.path.exists(docopt.__cached__))
'''


@pytest.fixture
def private_tempdir(monkeypatch):
    """Temp files of this test go to a private folder that must end empty (other processes share /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="ipyskills-test-tmp-"))
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    yield path
    left = sorted(os.listdir(path))
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    assert left == [], f"temp files left behind: {left}"


def build_containers(client, wait: float = 15.0) -> list:
    """This process's sandbox containers, builds included (other processes may be building on the same
    engine), once their removal (which a build, like any run, hands to a background thread) is done."""
    import time

    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID

    deadline = time.monotonic() + wait
    while True:
        found = client.containers.list(ignore_removed=True, all=True,
                                       filters={"label": [LABEL, f"{LABEL_PID}={os.getpid()}"]})
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


@pytest.mark.docker
@pytest.mark.slow
def test_an_sdist_only_package_is_built_in_a_container_by_default_and_refused_when_turned_off(
        private_tempdir, docker_backend, make_skill):
    client = docker_backend.client()
    forget_images(client, "docopt", force=True)
    skill = make_skill({"scripts/greet.py": GREET_SCRIPT}, name="greeter")
    tags_before = deps_tags(client)
    with pytest.raises(SkillError) as refused:
        registry(skill, allow_sdist=False).run("greeter", "scripts/greet.py", args=["ada"], backend="docker")
    message = str(refused.value)
    assert "docopt has no wheel" in message and "scripts/greet.py:2" in message
    assert "--no-sdist" in message and "IPYSKILLS_ALLOW_SDIST=0" in message
    assert deps_tags(client) == tags_before

    lines: list[str] = []
    result = registry(skill).run("greeter", "scripts/greet.py", args=["ada", "--shout"],
                                 backend="docker", progress=lines.append)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["HELLO ADA docopt 0.6.2", "bytecode compiled at build time: True"]
    assert "docopt==0.6.2" in result.notice
    assert any("building docopt-0.6.2.tar.gz in ipyskills-sandbox-build:latest (network off, uid 1000" in line
               for line in lines), lines
    assert any("built docopt-0.6.2-py2.py3-none-any.whl" in line for line in lines)
    assert build_containers(client) == []
    from ipyskills.sandbox.provision import docker_image

    new_tags = deps_tags(client) - tags_before
    assert len(new_tags) == 2  # the image and its request tag
    image = client.images.get(next(iter(new_tags)))
    assert json.loads(image.labels[docker_image.LABEL_INSTALLED]) == ["docopt==0.6.2"]
    added = image.attrs["Size"] - client.images.get(docker_backend.image).attrs["Size"]
    assert added < 2 * 1024**2, f"the dependency layer adds {added:,} bytes for one small module"
    forget_images(client, "docopt", force=True)


def _sdist(path: Path, setup_py: str, name: str = "brokenpkg") -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        data = setup_py.encode()
        info = tarfile.TarInfo(f"{name}-1.0/setup.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.docker
@pytest.mark.slow
def test_a_failing_sdist_build_names_the_package_with_the_end_of_its_log(tmp_path, private_tempdir,
                                                                        docker_backend):
    from ipyskills.errors import ProvisionError
    from ipyskills.sandbox.provision.sdist import build_wheel

    marker = tmp_path / "build-code-ran-here"  # a host path: the build code must not be able to touch it
    sdist = _sdist(tmp_path / "brokenpkg-1.0.tar.gz", f"""\
import os, socket, sys
print("BUILD uid", os.getuid())
try:
    open({str(marker)!r}, "w").close()
except OSError:
    print("HOST PATH: not there")
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("NETWORK: reachable")
except OSError:
    print("NETWORK: blocked")
sys.exit("this build fails on purpose")
""")
    client = docker_backend.client()
    with pytest.raises(ProvisionError) as caught:
        build_wheel(client, docker_backend.image, sdist, "brokenpkg", tmp_path / "out", log=lambda _l: None)
    message = str(caught.value)
    assert message.startswith("building brokenpkg from its source distribution (brokenpkg-1.0.tar.gz) failed")
    assert "BUILD uid 1000" in message and "NETWORK: blocked" in message and "HOST PATH: not there" in message
    assert "this build fails on purpose" in message  # the end of the log, after the message
    assert message.rstrip().endswith("ERROR Backend subprocess exited when trying to invoke "
                                     "get_requires_for_build_wheel")
    assert not marker.exists() and not (tmp_path / "out").exists()
    assert build_containers(client) == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_build_that_outlives_its_deadline_is_stopped_and_removed(tmp_path, private_tempdir, docker_backend):
    import time

    from ipyskills.errors import ProvisionError
    from ipyskills.sandbox.provision.sdist import build_wheel

    sdist = _sdist(tmp_path / "slowpkg-1.0.tar.gz", "import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n",
                   name="slowpkg")
    client = docker_backend.client()
    t0 = time.monotonic()
    with pytest.raises(ProvisionError, match="slowpkg") as caught:
        build_wheel(client, docker_backend.image, sdist, "slowpkg", tmp_path / "out", log=lambda _l: None,
                    timeout=15)
    assert time.monotonic() - t0 < 90  # resolving the build tools, then at most the deadline
    assert str(caught.value).rstrip().endswith("[stopped: the build took longer than 15 s]")
    assert build_containers(client) == []


@pytest.mark.docker
@pytest.mark.slow
def test_local_backend_builds_sdists_in_a_container_and_caches_the_folder(docker_backend, make_skill,
                                                                                  cache_dir):
    import importlib.util

    assert importlib.util.find_spec("docopt") is None, "docopt installed on the host: pick another"
    skill = make_skill({"scripts/greet.py": GREET_SCRIPT}, name="greeter-local")
    with pytest.raises(SkillError, match="--no-sdist"):
        registry(skill, allow_sdist=False).run("greeter-local", "scripts/greet.py", args=["ada"], backend="local")
    reg = registry(skill)
    result = reg.run("greeter-local", "scripts/greet.py", args=["ada"], backend="local")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "hello ada docopt 0.6.2"
    sites = [p for p in (cache_dir / "sites").iterdir() if not p.name.startswith(".")]
    assert len(sites) == 1 and (sites[0] / "docopt.py").is_file()
    assert build_containers(docker_backend.client()) == []


def test_a_source_build_without_a_docker_engine_says_the_build_needs_one(tmp_path, monkeypatch):
    """The local backend builds sdists in a container too: with no engine answering, one clear error."""
    from ipyskills.errors import ProvisionError
    from ipyskills.sandbox.provision.sdist import engine_builder

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    build = engine_builder("ipyskills-sandbox:latest", log=lambda _line: None)
    with pytest.raises(ProvisionError) as caught:
        build(tmp_path / "docopt-0.6.2.tar.gz", "docopt", tmp_path / "out")
    message = str(caught.value)
    assert message.startswith("docopt has no wheel, and building it from its source distribution "
                              "needs a Docker engine, which does not answer")
    assert "allow_sdist=False" in message
    assert "never on this machine" in message and "DOCKER_HOST" in message
    assert not (tmp_path / "out").exists()


def test_allow_sdist_is_on_by_default_and_turning_it_off_reaches_the_run_request_from_each_place(make_skill):
    from ipyskills.notebook.config import IPySkillsConfig

    skill = make_skill({"scripts/x.py": "print(1)\n"}, name="opt-in")
    assert Settings().allow_sdist is True
    assert registry(skill).run_request("opt-in", "scripts/x.py").allow_sdist is True
    assert registry(skill, allow_sdist=False).run_request("opt-in", "scripts/x.py").allow_sdist is False
    assert Settings.from_env({"IPYSKILLS_ALLOW_SDIST": "0"}).allow_sdist is False
    with pytest.raises(SkillError, match="IPYSKILLS_ALLOW_SDIST"):
        Settings.from_env({"IPYSKILLS_ALLOW_SDIST": "sometimes"})
    config = IPySkillsConfig()
    assert config.settings().allow_sdist is True
    config.allow_sdist = False  # %config IPySkills.allow_sdist = False
    assert config.settings().allow_sdist is False

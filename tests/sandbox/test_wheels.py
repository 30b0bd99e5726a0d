"""wheels.py: real uv calls against the real index (PyPI) for small packages, and every failure message.

Network tests skip when no index answers (so an offline laptop reports skips, not failures)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest
from local_helpers import needs_index

from ipyskills.errors import ProvisionError, SandboxError
from ipyskills.sandbox import wheels
from ipyskills.sandbox.wheels import Target, compile_lock, install_target, lock_names, uv_bin


IMAGE = Target.for_image()


def quiet(_msg: str) -> None:
    pass


@pytest.fixture
def no_temp_left(tmp_path_factory, monkeypatch):
    """compile_lock/install_target leave nothing in the temp dir (a private one: other processes share /tmp)."""
    tmp = tmp_path_factory.mktemp("tempdir")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    yield
    assert list(tmp.iterdir()) == [], f"temp files left behind: {sorted(os.listdir(tmp))}"


# -- pure functions ----------------------------------------------------------------------------------------

def test_target_defaults_and_for_image():
    assert Target() == Target("3.11", "x86_64-manylinux_2_36")
    t = Target.for_image()
    assert t.python_version == "3.11"
    assert t.platform in ("x86_64-manylinux_2_36", "aarch64-manylinux_2_36")


def test_for_image_on_arm(monkeypatch):
    monkeypatch.setattr(wheels._platform, "machine", lambda: "arm64")
    assert Target.for_image().platform == "aarch64-manylinux_2_36"


def test_for_host_reads_the_interpreter():
    t = Target.for_host(sys.executable)
    assert t.platform is None and t.interpreter == sys.executable
    assert t.python_version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    if os.path.exists("/usr/bin/python3"):
        other = Target.for_host("/usr/bin/python3")
        real = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert other.python_version == real


def test_for_host_missing_interpreter():
    with pytest.raises(ProvisionError, match="cannot run the Python interpreter"):
        Target.for_host("/nonexistent/python3")


def test_provision_error_is_a_sandbox_error():
    assert issubclass(ProvisionError, SandboxError)


def test_lock_names_parses_pins_and_normalises():
    lock = (
        "Foo_Bar==1.2.3 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n    # via -r requirements.in\n"
        "six==1.17.0 \\\n    --hash=sha256:cc\n"
        "# comment==9\n"
        "zope.interface==7.0 ; python_version >= '3.8' \\\n    --hash=sha256:dd\n"
    )
    assert lock_names(lock) == {"foo-bar": "1.2.3", "six": "1.17.0", "zope-interface": "7.0"}
    assert lock_names("") == {}


def test_uv_bin_found():
    assert os.access(uv_bin(), os.X_OK)


def test_uv_bin_missing_says_pip_install_uv(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_uv(name, *args, **kwargs):
        if name == "uv":
            raise ImportError("no uv")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uv)
    monkeypatch.setattr(wheels.shutil, "which", lambda _name: None)
    with pytest.raises(SandboxError, match="pip install uv"):
        uv_bin()


def test_empty_specs_need_no_uv():
    assert compile_lock([], IMAGE, log=quiet) == ""


def test_pip_index_url_is_passed_to_uv(monkeypatch):
    monkeypatch.delenv("UV_INDEX_URL", raising=False)
    monkeypatch.delenv("UV_DEFAULT_INDEX", raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    assert wheels.uv_environment()["UV_INDEX_URL"] == "https://mirror.example/simple"
    monkeypatch.setenv("UV_INDEX_URL", "https://mine.example/simple")
    assert wheels.uv_environment()["UV_INDEX_URL"] == "https://mine.example/simple"


# -- real resolution ---------------------------------------------------------------------------------------

@needs_index
@pytest.mark.slow
def test_lock_and_install_small_packages(tmp_path, no_temp_left):
    messages: list[str] = []
    lock = compile_lock(["defusedxml", "six>=1.16"], IMAGE, log=messages.append)
    names = lock_names(lock)
    assert set(names) == {"defusedxml", "six"}
    for name, version in names.items():
        assert f"{name}=={version} \\" in lock  # exact pins
    assert lock.count("--hash=sha256:") >= 2
    assert "/tmp" not in lock and "scratch" not in lock  # reproducible text, no temp paths
    assert any("Resolved" in m for m in messages)

    dest = tmp_path / "site"
    install_target(lock, dest, IMAGE, log=messages.append)
    assert (dest / "defusedxml" / "__init__.py").is_file()
    assert (dest / "six.py").is_file()
    code = "import sys; sys.path.insert(0, sys.argv[1]); import defusedxml, six; print(defusedxml.__file__)"
    out = subprocess.run([sys.executable, "-I", "-c", code, str(dest)],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(str(dest))


@needs_index
@pytest.mark.slow
def test_constraints_pin_what_is_there(no_temp_left):
    base = compile_lock(["six==1.16.0"], IMAGE, log=quiet)
    lock = compile_lock(["six"], IMAGE, constraints=base, log=quiet)
    assert lock_names(lock) == {"six": "1.16.0"}


@needs_index
@pytest.mark.slow
def test_console_scripts_land_in_bin_with_the_image_python(tmp_path):
    lock = compile_lock(["tqdm"], IMAGE, log=quiet)
    install_target(lock, tmp_path / "site", IMAGE, log=quiet)
    script = tmp_path / "site" / "bin" / "tqdm"
    assert script.is_file()
    assert script.read_text().splitlines()[0] == "#!/usr/bin/python3"


@needs_index
@pytest.mark.slow
def test_host_target_installs_for_this_interpreter(tmp_path):
    host = Target.for_host(sys.executable)
    lock = compile_lock(["six"], host, log=quiet)
    install_target(lock, tmp_path / "site", host, log=quiet)
    assert (tmp_path / "site" / "six.py").is_file()


@needs_index
@pytest.mark.slow
def test_tampered_hash_is_refused(tmp_path, no_temp_left):
    lock = compile_lock(["six==1.16.0"], IMAGE, log=quiet)
    bad = "six==1.16.0 \\\n    --hash=sha256:" + "0" * 64 + "\n"
    assert "sha256" in lock
    with pytest.raises(ProvisionError) as exc:
        install_target(bad, tmp_path / "site", IMAGE, log=quiet)
    msg = str(exc.value)
    assert msg.startswith("six==1.16.0 does not match the hash in the lock") and "refusing it" in msg
    assert "Nothing was installed" in msg and "uv cache clean" in msg
    assert not (tmp_path / "site" / "six.py").exists()


# -- failures, each from a real uv call ---------------------------------------------------------------------

@needs_index
@pytest.mark.slow
def test_no_such_distribution(no_temp_left):
    with pytest.raises(ProvisionError) as exc:
        compile_lock(["ipyskills-no-such-dist-zz9"], IMAGE, log=quiet)
    msg = str(exc.value)
    assert "ipyskills-no-such-dist-zz9" in msg and "no distribution named" in msg and "spelling" in msg


@needs_index
@pytest.mark.slow
def test_sdist_only_is_refused_when_source_builds_are_off_with_how_to_allow_them(no_temp_left):
    # docopt publishes only a source distribution
    with pytest.raises(ProvisionError) as exc:
        compile_lock(["docopt"], IMAGE, log=quiet)
    msg = str(exc.value)
    assert "docopt" in msg and "no wheel" in msg
    assert isinstance(exc.value, wheels.NoWheel) and exc.value.name == "docopt"
    assert "building from source is turned off" in msg
    assert "--no-sdist" in msg and "IPYSKILLS_ALLOW_SDIST=0" in msg and "IPySkills.allow_sdist = True" in msg


@needs_index
@pytest.mark.slow
def test_no_wheel_for_the_target_python(no_temp_left):
    # numpy < 1.20 has no CPython 3.11 wheels
    with pytest.raises(ProvisionError) as exc:
        compile_lock(["numpy<1.20"], IMAGE, log=quiet)
    msg = str(exc.value)
    assert "numpy" in msg and "no wheel for CPython 3.11" in msg and "--no-sdist" in msg


@needs_index
@pytest.mark.slow
def test_conflict_quotes_uv(no_temp_left):
    with pytest.raises(ProvisionError) as exc:
        compile_lock(["pandas==2.2.3", "numpy<1.23"], IMAGE, log=quiet)
    msg = str(exc.value)
    assert "cannot be satisfied together" in msg
    assert "pandas==2.2.3 depends on numpy" in msg  # uv's own explanation, quoted
    assert len(msg) < 1200


def test_unreachable_index(monkeypatch, tmp_path, no_temp_left):
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    with pytest.raises(ProvisionError) as exc:
        compile_lock(["six"], IMAGE, log=quiet, cache_dir=str(tmp_path / "cache"))
    msg = str(exc.value)
    assert "no package index could be reached" in msg and "127.0.0.1:9" in msg
    assert "UV_INDEX_URL" in msg and "PIP_INDEX_URL" in msg


def test_offline_with_an_empty_cache(monkeypatch, tmp_path, no_temp_left):
    monkeypatch.setenv("UV_OFFLINE", "1")
    with pytest.raises(ProvisionError) as exc:
        compile_lock(["six"], IMAGE, log=quiet, cache_dir=str(tmp_path / "empty-cache"))
    msg = str(exc.value)
    assert "offline" in msg and "UV_INDEX_URL" in msg and "PyPI" in msg


def test_bad_requirement_is_reported():
    with pytest.raises(ProvisionError, match=r"refusing the requirement '\[\[ not a spec': not a requirement"):
        compile_lock(["[[ not a spec"], IMAGE, log=quiet)


def test_progress_is_throttled(monkeypatch, tmp_path):
    """A slow uv reports 'still resolving' lines, at most one per PROGRESS_EVERY seconds."""
    monkeypatch.setattr(wheels, "PROGRESS_EVERY", 0.5)
    fake = tmp_path / "uv"
    fake.write_text("#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8; do echo \"step $i\" >&2; sleep 0.25; done\n"
                    "echo 'Resolved 1 package in 2s' >&2\ntouch requirements.lock\n")
    fake.chmod(0o755)
    monkeypatch.setattr(wheels, "uv_bin", lambda: str(fake))
    messages: list[str] = []
    compile_lock(["six"], IMAGE, log=messages.append)
    still = [m for m in messages if "still resolving" in m]
    assert 2 <= len(still) <= 5
    assert messages[-1].strip() == "Resolved 1 package in 2s"


# -- the sdist opt-in, host side (provision/sdist.py): fetching and reading, nothing built or run -------------

def _sdist(path, files: dict[str, str], top: str = "pkg-1.0"):
    """A .tar.gz source distribution holding `files` under its top folder."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@needs_index
@pytest.mark.slow
def test_fetch_sdist_picks_the_newest_fitting_version_and_checks_its_hash(tmp_path):
    import hashlib

    from ipyskills.sandbox.provision.sdist import fetch_sdist

    newest = fetch_sdist("docopt", "", tmp_path, log=quiet)
    assert newest.name == "docopt-0.6.2.tar.gz"
    assert hashlib.sha256(newest.read_bytes()).hexdigest() == \
        "49b3a825280bd66b3aa83585ef59c4a8c82f2c8a522dbe754a8bc8d08c85c491"  # as on pypi.org
    assert fetch_sdist("docopt", "<0.6", tmp_path, log=quiet).name == "docopt-0.5.0.tar.gz"
    with pytest.raises(ProvisionError, match="no source distribution that fits >=9"):
        fetch_sdist("docopt", ">=9", tmp_path, log=quiet)


@needs_index
@pytest.mark.slow
def test_fetch_sdist_refuses_bytes_that_do_not_match_the_index_hash(tmp_path, monkeypatch):
    from ipyskills.sandbox.provision import sdist

    real = sdist._index_files

    def tampered(name):
        files = real(name)
        for f in files:
            f["hashes"] = {"sha256": "0" * 64}
        return files

    monkeypatch.setattr(sdist, "_index_files", tampered)
    with pytest.raises(ProvisionError, match="does not match the sha256"):
        sdist.fetch_sdist("docopt", "==0.6.2", tmp_path, log=quiet)
    assert list(tmp_path.iterdir()) == []  # nothing kept


def test_fetch_sdist_unreachable_index_says_what_to_do(tmp_path, monkeypatch):
    from ipyskills.sandbox.provision.sdist import fetch_sdist

    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    with pytest.raises(ProvisionError, match="could not be reached.*UV_INDEX_URL"):
        fetch_sdist("docopt", "", tmp_path, log=quiet)


def test_simple_html_index_pages_are_read_too():
    from ipyskills.sandbox.provision.sdist import _html_files

    files = _html_files('<a href="../../p/x-1.0.tar.gz#sha256=ab12" data-requires-python="&gt;=3.8">x-1.0.tar.gz'
                        '</a><a href="x-0.9.zip" data-yanked="">x-0.9.zip</a>')
    assert files[0] == {"url": "../../p/x-1.0.tar.gz", "hashes": {"sha256": "ab12"}, "requires-python": ">=3.8",
                        "yanked": False, "filename": "x-1.0.tar.gz"}
    assert files[1]["yanked"] is True and files[1]["hashes"] == {}


def test_build_requires_come_from_the_sdists_build_system(tmp_path):
    from ipyskills.sandbox.provision.sdist import DEFAULT_BUILD_REQUIRES, build_requires

    flit = _sdist(tmp_path / "a-1.0.tar.gz", {"pyproject.toml": '[build-system]\nrequires = ["flit_core >=3.2,<4"]\n'
                                              'build-backend = "flit_core.buildapi"\n'})
    assert build_requires(flit) == ["flit_core<4,>=3.2"]  # the normalised form, as passed on
    legacy = _sdist(tmp_path / "b-1.0.tar.gz", {"setup.py": "from setuptools import setup\nsetup()\n"})
    assert build_requires(legacy) == DEFAULT_BUILD_REQUIRES
    nested = _sdist(tmp_path / "c-1.0.tar.gz", {"vendor/pyproject.toml": '[build-system]\nrequires = ["x"]\n'})
    assert build_requires(nested) == DEFAULT_BUILD_REQUIRES  # only the top folder's file counts


def test_missing_build_dependencies_are_read_from_builds_report():
    from ipyskills.sandbox.provision.sdist import _missing_dependencies

    report = "* Getting build dependencies for wheel...\n\nERROR Missing dependencies:\n\tsetuptools_scm>=8\n" \
             "\thatch-vcs -> hatchling\n"
    assert _missing_dependencies(report) == ["setuptools_scm>=8", "hatch-vcs"]
    assert _missing_dependencies("ERROR Backend subprocess exited\n") == []


@needs_index
@pytest.mark.slow
def test_old_versions_without_wheels_and_new_ones_that_clash_is_a_conflict_not_a_missing_wheel(no_temp_left):
    # bioservices <= 1.11.2 publish only sdists; 1.12.0 has a wheel but needs wrapt < 2, which is pinned here
    # (as the sandbox image pins it): the cure is another pin, not building an old sdist.
    with pytest.raises(ProvisionError) as exc:
        compile_lock(["bioservices<=1.12.0"], IMAGE, constraints="wrapt==2.5.2\n", log=quiet)
    assert not isinstance(exc.value, wheels.NoWheel)
    msg = str(exc.value)
    assert msg.startswith("the requirements cannot be satisfied together (bioservices<=1.12.0) with what is "
                          "already pinned (wrapt==2.5.2)")
    assert "depends on wrapt" in msg


@needs_index
@pytest.mark.slow
def test_a_dependency_without_a_wheel_is_the_one_named(no_temp_left):
    # deeptools 3.5.6 publishes a wheel, but its dependency deeptoolsintervals publishes only an sdist
    with pytest.raises(wheels.NoWheel) as exc:
        compile_lock(["deeptools==3.5.6"], IMAGE, log=quiet)
    assert exc.value.name == "deeptoolsintervals"
    assert str(exc.value).startswith("deeptoolsintervals has no wheel for CPython 3.11")

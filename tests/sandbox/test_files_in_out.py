"""Files in, files out, live output and Ctrl-C, on both backends: a writable workspace as the working
directory, inputs staged into it, what the script writes there or in $IPYSKILLS_OUTPUT returned as
artifacts, saved to a host folder without overwriting; output handed over as it arrives; an interrupt
ends the run with what was printed so far and leaves no sandbox behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ipyskills import SkillRegistry
from ipyskills.errors import RunInterrupted, SandboxError
from ipyskills.sandbox.inputs import safe_relative, stage_inputs
from ipyskills.sandbox.result import Artifact
from ipyskills.settings import Settings

REPORT = """import os, sys
src = sys.argv[1]
text = open(src).read()
print("cwd", os.getcwd(), flush=True)
with open(src + ".report.md", "w") as fh:
    fh.write("# Report\\n\\n" + str(len(text)) + " chars\\n")
with open(os.path.join(os.environ["IPYSKILLS_OUTPUT"], "summary.txt"), "w") as fh:
    fh.write("done")
if len(sys.argv) > 2:
    with open(sys.argv[2], "a") as fh:
        fh.write("changed")
"""

TICKS = """import sys, time
for i in range(int(sys.argv[1])):
    print("tick", i, flush=True)
    time.sleep(0.2)
"""

BACKENDS = [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]


@pytest.fixture
def project(tmp_path, monkeypatch):
    skill = tmp_path / "skills" / "files-demo"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: files-demo\ndescription: Test files in and out. Use in tests.\n"
                                    "---\nRun scripts/report.py FILE.\n")
    (skill / "scripts" / "report.py").write_text(REPORT)
    (skill / "scripts" / "ticks.py").write_text(TICKS)
    data = tmp_path / "data"
    data.mkdir()
    (data / "table.csv").write_text("a,b\n1,2\n")
    (data / "notes.txt").write_text("keep")
    monkeypatch.chdir(tmp_path)
    reg = SkillRegistry([tmp_path / "skills"], settings=Settings(default_roots=False, bundled_skills=False,
                                                                 pool_size=0))
    return reg, tmp_path


def _backend(name, request):
    if name == "docker":
        request.getfixturevalue("docker_backend")
    return name


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_are_staged_and_new_files_come_back(project, backend, request):
    reg, tmp = project
    backend = _backend(backend, request)
    result = reg.run("files-demo", "scripts/report.py", args=["table.csv"], inputs=[tmp / "data" / "table.csv"],
                     backend=backend, guard=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("cwd ") and result.stdout.rstrip().endswith(("/work", "/workspace"))
    paths = {a.path: a for a in result.artifacts}
    assert set(paths) == {"summary.txt", "table.csv.report.md"}  # the unchanged input is not returned
    assert paths["table.csv.report.md"].data == b"# Report\n\n8 chars\n"
    assert result.inputs == ["table.csv"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_folder_input_and_a_changed_input_come_back(project, backend, request):
    reg, tmp = project
    backend = _backend(backend, request)
    result = reg.run("files-demo", "scripts/report.py", args=["data/table.csv", "data/notes.txt"],
                     inputs=[str(tmp / "data")], backend=backend, guard=False)
    assert result.exit_code == 0, result.stderr
    paths = {a.path: a.data for a in result.artifacts}
    assert paths["data/notes.txt"] == b"keepchanged"
    assert "data/table.csv" not in paths and "data/table.csv.report.md" in paths


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_to_writes_files_and_never_overwrites(project, backend, request):
    reg, tmp = project
    backend = _backend(backend, request)
    out = tmp / "results"
    out.mkdir()
    (out / "summary.txt").write_text("mine")
    result = reg.run("files-demo", "scripts/report.py", args=["table.csv"], inputs=["data/table.csv"],
                     backend=backend, guard=False, save_to=out)
    assert (out / "summary.txt").read_text() == "mine"
    assert (out / "summary (1).txt").read_text() == "done"
    assert (out / "table.csv.report.md").is_file()
    assert dict(result.saved)["summary.txt"] == str(out / "summary (1).txt")
    assert "summary.txt existed" in result.save_note and "saving:" in " ".join(result.artifact_notes())


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_arrives_live_and_ctrl_c_keeps_it(project, backend, request):
    reg, _tmp = project
    backend = _backend(backend, request)
    seen = []

    def on_output(stream, text):
        seen.append((stream, text))
        if "tick 2" in text:
            raise KeyboardInterrupt  # as Ctrl-C would land while the output is being read

    with pytest.raises(RunInterrupted) as caught:
        reg.run("files-demo", "scripts/ticks.py", args=["100"], backend=backend, guard=False,
                on_output=on_output, timeout=60)
    stop = caught.value
    assert isinstance(stop, KeyboardInterrupt)
    assert [s for s, _ in seen] == ["stdout"] * len(seen) and "tick 0" in seen[0][1]
    assert stop.result.interrupted and stop.result.exit_code is None
    assert "tick 0\ntick 1\ntick 2\n" in stop.result.stdout
    assert stop.removed and stop.line().startswith("interrupted after ") and stop.line().endswith(
        " s; sandbox removed")
    assert stop.result.skill == "files-demo"
    assert "INTERRUPTED" in stop.result.status_line()


@pytest.mark.parametrize("backend", BACKENDS)
def test_live_output_is_capped(project, backend, request):
    reg, tmp = project
    backend = _backend(backend, request)
    skill = tmp / "skills" / "files-demo" / "scripts" / "flood.py"
    skill.write_text("import sys\nsys.stdout.write('x' * 300000)\n")
    chunks = []
    result = reg.run("files-demo", "scripts/flood.py", backend=backend, guard=False, output_cap=100_000,
                     on_output=lambda s, t: chunks.append(t))
    live = "".join(chunks)
    assert live.count("x") == 100_000 and "output cap reached" in live
    assert result.stdout_truncated


def test_missing_input_and_over_cap_are_clear_errors(project):
    reg, tmp = project
    with pytest.raises(SandboxError, match="does not exist"):
        reg.run("files-demo", "scripts/report.py", inputs=["nope.csv"], backend="local")
    big = tmp / "big.bin"
    big.write_bytes(b"\0" * 5000)
    with pytest.raises(SandboxError, match="over|more than"):
        reg.run("files-demo", "scripts/report.py", inputs=[big], backend="local", input_cap=4096)
    with pytest.raises(SandboxError, match="both be staged"):
        reg.run("files-demo", "scripts/report.py", inputs=["data/table.csv", str(tmp / "data" / "table.csv")],
                backend="local")


def test_links_out_of_an_input_folder_are_not_followed(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "ok.txt").write_text("ok")
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    os.symlink(secret, folder / "leak.txt")
    os.symlink(tmp_path, folder / "up")
    os.symlink(folder / "ok.txt", folder / "inside.txt")
    staged = stage_inputs([folder], cap=1 << 20)
    rels = sorted(f.rel for f in staged.files if f.source is not None)
    assert rels == ["in/inside.txt", "in/ok.txt"] and staged.skipped == 2


def test_artifact_save_is_confined_and_does_not_overwrite(tmp_path):
    art = Artifact(path="sub/report.md", size=3, data=b"abc")
    written = art.save(tmp_path)
    assert written == tmp_path.resolve() / "sub" / "report.md" and written.read_bytes() == b"abc"
    with pytest.raises(SandboxError, match="exists"):
        art.save(tmp_path)
    assert art.save(tmp_path, overwrite=True) == written
    assert Artifact(path="x.txt", size=1, data=b"y").save(tmp_path / "named.txt").read_bytes() == b"y"
    with pytest.raises(SandboxError, match="over the return cap"):
        Artifact(path="big.bin", size=10**9, data=None).save(tmp_path)
    for bad in ("../escape.txt", "/etc/passwd", "a/../../b"):
        with pytest.raises(SandboxError):
            safe_relative(bad)
    assert not Path(tmp_path.parent / "escape.txt").exists()


def test_timed_out_status_says_124(project):
    reg, _tmp = project
    result = reg.run("files-demo", "scripts/ticks.py", args=["100"], backend="local", guard=False, timeout=0.5)
    assert result.timed_out and "exit=124 (timed out)" in result.status_line()
    assert "exit=None" not in result.status_line()

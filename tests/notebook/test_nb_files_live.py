"""%%skill_run with --input / --save (links in the result, Markdown previewed), live output, Ctrl-C with
the output so far, and display limits (head and tail; the plain text short next to the HTML)."""

from __future__ import annotations

import pytest

from ipyskills.notebook import live as live_mod
from ipyskills.notebook.display import RUN_HTML_CAP, RUN_PLAIN_CAP

REPORT = """import os, sys
src = sys.argv[1]
with open(src + ".report.md", "w") as fh:
    fh.write("# Report for " + src + "\\n\\n**bold**\\n\\n<script>alert(1)</script>\\n")
print("rows", len(open(src).read().splitlines()))
"""


@pytest.fixture
def report_skill(workdir):
    scripts = workdir / "skills" / "hello" / "scripts"
    (scripts / "report.py").write_text(REPORT)
    (scripts / "ticks.py").write_text("import sys, time\nfor i in range(int(sys.argv[1])):\n"
                                      "    print('tick', i, flush=True); time.sleep(0.1)\n")
    (scripts / "flood.py").write_text("import sys\nsys.stdout.write('A' * 150000 + 'MIDDLE' + 'Z' * 150000)\n")
    (workdir / "table.csv").write_text("a,b\n1,2\n3,4\n")
    return workdir


def test_input_save_and_links(ip, report_skill):
    result = ip.run_cell_magic("skill_run", "--backend local --input table.csv --save out hello scripts/report.py "
                                            "table.csv", "\n")
    assert result.ok, result.stderr
    assert result.stdout == "rows 3\n"
    saved = report_skill / "out" / "table.csv.report.md"
    assert saved.read_text().startswith("# Report for table.csv")
    bundle = ip.display_formatter.format(result)[0]
    html = bundle["text/html"]
    assert 'href="out/table.csv.report.md"' in html  # opens in JupyterLab's file browser
    assert "<h1>Report for table.csv</h1>" in html and "<strong>bold</strong>" in html  # previewed
    assert "<script>" not in html and "&lt;script&gt;" in html  # escaped, as SKILL.md is rendered
    assert "out/table.csv.report.md" in bundle["text/plain"]


def test_save_never_overwrites(ip, report_skill):
    (report_skill / "out").mkdir()
    (report_skill / "out" / "table.csv.report.md").write_text("mine")
    result = ip.run_line_magic("skill_run", "--backend local --input table.csv --save out hello scripts/report.py "
                                            "table.csv")
    assert (report_skill / "out" / "table.csv.report.md").read_text() == "mine"
    assert (report_skill / "out" / "table.csv.report (1).md").is_file()
    assert "existed" in ip.display_formatter.format(result)[0]["text/plain"]


def test_missing_input_is_one_line(ip, report_skill, cell):
    _, out = cell("%skill_run --backend local --input nope.csv hello scripts/report.py nope.csv")
    assert "does not exist" in out and "Traceback" not in out


def test_live_output_outside_a_kernel_is_written_through(ip, report_skill, capsys, monkeypatch):
    monkeypatch.setattr(live_mod, "LIVE_AFTER", 0.0)
    result = ip.run_line_magic("skill_run", "--backend local hello scripts/ticks.py 3")
    assert result.ok
    assert capsys.readouterr().out == "tick 0\ntick 1\ntick 2\n"


def test_live_display_in_a_kernel_updates_in_place_then_empties(monkeypatch):
    shown = []

    class Handle:
        def update(self, bundle, raw=True):
            shown.append(("update", bundle["text/plain"]))

    def fake_display(bundle, raw=True, display_id=False):
        shown.append(("display", bundle["text/plain"]))
        return Handle()

    import IPython.display

    monkeypatch.setattr(IPython.display, "display", fake_display)
    now = [0.0]
    live = live_mod.LiveOutput("hello/scripts/x.py", clock=lambda: now[0])
    live.kernel = True
    live("stdout", "early\n")  # before LIVE_AFTER: nothing shown yet
    assert shown == []
    now[0] = 1.0
    live("stderr", "warn\n")
    now[0] = 2.0
    live("stdout", "x" * 20000)
    assert shown[0][0] == "display" and "early\nwarn\n" in shown[0][1]
    assert shown[-1][0] == "update" and "characters not shown while running" in shown[-1][1]
    live.finish()
    assert shown[-1] == ("update", "")


def test_ctrl_c_shows_the_output_so_far_and_one_line(ip, report_skill, capsys, monkeypatch):
    original = live_mod.LiveOutput.__call__

    def interrupting(self, stream, text):
        original(self, stream, text)
        if "tick 2" in self.tail:
            raise KeyboardInterrupt

    monkeypatch.setattr(live_mod.LiveOutput, "__call__", interrupting)
    assert ip.run_line_magic("skill_run", "--backend local -o r hello scripts/ticks.py 100") is None
    captured = capsys.readouterr()
    assert "tick 0\ntick 1\ntick 2\n" in captured.out
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert lines[-1].startswith("interrupted after ") and lines[-1].endswith(" s; sandbox removed")
    assert "Traceback" not in captured.err and ip.user_ns["r"].interrupted


def test_long_output_head_and_tail_stored_once(ip, report_skill):
    result = ip.run_line_magic("skill_run", "--backend local hello scripts/flood.py")
    assert len(result.stdout) == 300006  # the object keeps everything
    bundle = ip.display_formatter.format(result)[0]
    assert "MIDDLE" not in bundle["text/html"] and "AAAA" in bundle["text/html"] and "ZZZZ" in bundle["text/html"]
    assert len(bundle["text/html"]) < RUN_HTML_CAP + 5000
    assert len(bundle["text/plain"]) < RUN_PLAIN_CAP + 1000  # short next to the HTML: stored once
    assert "the full text is in the result object" in bundle["text/plain"]


def test_small_items_of_point_9():
    from ipyskills.core.validate import check_frontmatter, suggest_name
    from ipyskills.notebook.display import report_parts
    from ipyskills.sandbox.docker.containers import isolation_line
    from ipyskills.sandbox.policy import Limits
    from ipyskills.sandbox.result import ExecuteResult

    assert suggest_name("Hello_World") == "hello-world"
    messages = " ".join(p.message for p in check_frontmatter({"name": "Hello_World", "description": "x"}, None))
    assert "use 'hello-world'" in messages

    class Report:
        path, problems = "skills/x", []

    _text, html = report_parts(Report())
    assert "Valid skill" in html and "valid Valid" not in html
    limits = Limits()
    assert isolation_line(limits, copy=False) == isolation_line(limits, copy=True)
    warm = isolation_line(limits, copy=True, pooled=True)
    assert warm == isolation_line(limits, copy=False).replace("docker:", "docker (warm pool):", 1)
    timed = ExecuteResult(exit_code=None, stdout="", stderr="", duration_ms=5.0, timed_out=True)
    assert "exit=124 (timed out)" in timed.status_line() and "None" not in timed.status_line()


def test_the_end_marker_holds_back_only_what_could_start_it():
    # Docker's stream ends stdout with a marker; only bytes that could begin it are held back, so live
    # output is not some 50 bytes (several short lines) behind the script.
    from ipyskills.sandbox.docker.stream import _MarkerSplitter
    from ipyskills.sandbox.result import OutputBuffer

    marker = b"\0\0ipyskills-end-" + b"ab" * 16 + b"\0\0"
    seen = []
    out = OutputBuffer(1 << 20, lambda piece: seen.append(piece))
    splitter = _MarkerSplitter(out, marker)
    assert splitter.feed(b"tick 0\n") is None and b"".join(seen) == b"tick 0\n"
    assert splitter.feed(b"tick 1\n\0") is None and b"".join(seen) == b"tick 0\ntick 1\n"  # '\0' may start it
    assert splitter.feed(b"x") is None and b"".join(seen).endswith(b"tick 1\n\0x")  # it did not
    whole = b"last" + marker + b"REPORT"
    for cut in range(1, len(whole)):  # the marker found wherever the stream is cut
        seen.clear()
        split = _MarkerSplitter(OutputBuffer(1 << 20, lambda piece: seen.append(piece)), marker)
        rest = split.feed(whole[:cut])
        rest = split.feed(whole[cut:]) if rest is None else rest + whole[cut:]  # after it: the report
        assert b"".join(seen) == b"last" and rest == b"REPORT", cut


@pytest.mark.docker
def test_docker_output_arrives_while_the_script_runs(report_skill):
    from ipyskills import SkillRegistry
    from ipyskills.sandbox.docker.backend import DockerBackend

    ready, reason = DockerBackend().readiness()
    if not ready:
        import os

        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker is required here but not ready: {reason}")
        pytest.skip(reason)
    import time

    (report_skill / "skills" / "hello" / "scripts" / "slow.py").write_text(
        "import time\nfor i in range(6):\n    print('tick', i, flush=True); time.sleep(0.4)\n")
    reg = SkillRegistry(["skills"])
    arrivals = []
    start = time.monotonic()
    result = reg.run("hello", "scripts/slow.py", backend="docker",
                     on_output=lambda stream, text: arrivals.append((time.monotonic() - start, text)))
    end = time.monotonic() - start
    assert result.ok and result.stdout.count("tick") == 6
    first = next(t for t, text in arrivals if "tick 0" in text)
    assert end - first > 1.5, (arrivals, end)  # tick 0 came about 2 s before the end, not with it

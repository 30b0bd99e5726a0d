"""The chart-maker example skill's bar_chart.py, run as a real subprocess."""

from __future__ import annotations

import csv
import json
import os
import shutil
import xml.etree.ElementTree as ET

import pytest

from .conftest import EXAMPLES, run_script

SKILL = EXAMPLES / "chart-maker"
SVG = "{http://www.w3.org/2000/svg}"


def chart(*args, stdin="", out=None, env_extra=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "IPYSKILLS_OUTPUT"}
    if out is not None:
        env["IPYSKILLS_OUTPUT"] = str(out)
    env.update(env_extra or {})
    script = str(SKILL / "scripts" / "bar_chart.py") if cwd else "scripts/bar_chart.py"
    return run_script(SKILL, script, *args, stdin=stdin, env=env, cwd=cwd)


def bars(svg_path):
    """(label, height, y) of every bar rect, from the rect's tooltip."""
    root = ET.parse(svg_path).getroot()
    found = []
    for rect in root.iter(f"{SVG}rect"):
        tip = rect.find(f"{SVG}title")
        if tip is not None:
            label = tip.text.rsplit(": ", 1)[0]
            found.append((label, float(rect.get("height")), float(rect.get("y"))))
    return found


def test_help_exits_zero():
    run = chart("--help")
    assert run.code == 0 and "IPYSKILLS_OUTPUT" in run.stdout


def test_sample_csv_summary_matches_the_data(tmp_path):
    with open(SKILL / "assets" / "sample.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    values = {r["city"]: float(r["visitors"]) for r in rows}
    summary = chart("--file", "assets/sample.csv", "--format", "svg", out=tmp_path).json()
    assert summary["count"] == len(rows)
    assert summary["max"] == {"label": max(values, key=values.get), "value": max(values.values())}
    assert summary["min"] == {"label": min(values, key=values.get), "value": min(values.values())}
    assert summary["total"] == sum(values.values())
    assert summary["file"] == str(tmp_path / "chart.svg")


def test_svg_bars_are_proportional_and_negative_values_hang_below_zero(tmp_path):
    data = {"a": 10, "b": 40, "c": -20, "d & <e>": 5}
    chart("--format", "svg", "--title", "Mixed <signs>", stdin=json.dumps(data), out=tmp_path).json()
    drawn = {label: (height, y) for label, height, y in bars(tmp_path / "chart.svg")}
    assert set(drawn) == set(data)  # escaped text parses back to the original labels
    assert drawn["b"][0] / drawn["a"][0] == pytest.approx(4, rel=0.01)
    assert drawn["c"][0] / drawn["a"][0] == pytest.approx(2, rel=0.01)
    zero_line = drawn["a"][1] + drawn["a"][0]  # bottom of a positive bar
    assert drawn["c"][1] == pytest.approx(zero_line, abs=0.2)  # negative bar starts at zero, goes down


def test_png_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    summary = chart("--file", "assets/sample.csv", "--title", "Visitors", out=tmp_path).json()
    assert summary["format"] == "png" and summary["renderer"] == "matplotlib"
    data = (tmp_path / "chart.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000


def test_falls_back_to_svg_when_matplotlib_cannot_be_imported(tmp_path):
    blocker = tmp_path / "block" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib disabled for this test')\n")
    hide = {"PYTHONPATH": str(tmp_path / "block")}
    out = tmp_path / "out"
    summary = chart("--file", "assets/sample.csv", out=out, env_extra=hide).json()
    assert summary["format"] == "svg" and (out / "chart.svg").exists() and not (out / "chart.png").exists()
    run = chart("--file", "assets/sample.csv", "--format", "png", out=out, env_extra=hide)
    assert run.code == 1 and "needs matplotlib" in run.stderr


@pytest.mark.parametrize("stdin,args,expected", [
    ('{"apples": 3, "pears": 5}', [], [("apples", 3), ("pears", 5)]),
    ('[["x", 1], ["y", 2.5]]', [], [("x", 1), ("y", 2.5)]),
    ('{"items": [{"name": "A", "count": 4}, {"name": "B", "count": 9}]}', [], [("A", 4), ("B", 9)]),
    ('[{"region": "N", "sales": "1,200"}, {"region": "S", "sales": 300}]', [], [("N", 1200), ("S", 300)]),
    ('[{"k": "a", "v1": 1, "v2": 7}]', ["--label-field", "k", "--value-field", "v2"], [("a", 7)]),
    ("Oslo,3\nBergen,2\n", [], [("Oslo", 3), ("Bergen", 2)]),
])
def test_input_shapes(tmp_path, stdin, args, expected):
    summary = chart("--format", "svg", *args, stdin=stdin, out=tmp_path).json()
    assert summary["count"] == len(expected)
    drawn = [label for label, _, _ in bars(tmp_path / "chart.svg")]
    assert drawn == [label for label, _ in expected]
    assert summary["max"]["value"] == max(v for _, v in expected)


def test_top_keeps_the_largest(tmp_path):
    data = {f"item{i}": i for i in range(100)}
    summary = chart("--format", "svg", "--top", "3", stdin=json.dumps(data), out=tmp_path).json()
    assert summary["count"] == 3 and summary["min"]["value"] == 97
    assert [label for label, _, _ in bars(tmp_path / "chart.svg")] == ["item99", "item98", "item97"]


@pytest.mark.parametrize("stdin,message", [
    ("", "empty"),
    ('{"a": "lots"}', "must be a finite number"),
    ('{"a": NaN}', "must be a finite number"),
    ('{"a": 1e999}', "must be a finite number"),
    (json.dumps({f"k{i}": i for i in range(61)}), "too many"),
    ("[1, 2", "invalid JSON"),
    ('[{"a": "x", "b": "y"}]', "--value-field"),
])
def test_bad_input_is_exit_one_with_a_message(tmp_path, stdin, message):
    run = chart(stdin=stdin, out=tmp_path)
    assert run.code == 1 and run.stdout == ""
    assert message in run.stderr
    assert list(tmp_path.iterdir()) == []


def test_without_ipyskills_output_writes_to_working_directory_output(tmp_path):
    summary = chart("--format", "svg", stdin='{"a": 1}', cwd=tmp_path).json()
    assert summary["file"] == os.path.join("output", "chart.svg")
    assert (tmp_path / "output" / "chart.svg").exists()


def test_unwritable_output_is_a_clear_error(tmp_path):
    (tmp_path / "output").write_text("a file where the folder should be")
    run = chart("--format", "svg", stdin='{"a": 1}', cwd=tmp_path)
    assert run.code == 1
    assert "IPYSKILLS_OUTPUT" in run.stderr and "Traceback" not in run.stderr


def test_skill_folder_is_left_untouched(tmp_path):
    skill = tmp_path / "chart-maker"
    shutil.copytree(SKILL, skill)
    before = sorted(p.relative_to(skill) for p in skill.rglob("*"))
    env = {**os.environ, "IPYSKILLS_OUTPUT": str(tmp_path / "out")}
    run = run_script(skill, "scripts/bar_chart.py", "--file", "assets/sample.csv", env=env)
    assert run.code == 0, run.stderr
    assert sorted(p.relative_to(skill) for p in skill.rglob("*")) == before

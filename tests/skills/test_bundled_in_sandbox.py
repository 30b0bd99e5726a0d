"""The bundled skills' scripts run through the registry on both backends, guard on, as an agent would run them."""

from __future__ import annotations

import json
import os

import pytest

from ipyskills import SkillRegistry

from .conftest import BUNDLED, EXAMPLES

MARKDOWN_TABLE = "| city | population |\n|---|---|\n| Lyon | 522969 |\n| Nantes | 320732 |\n"


def _docker_ready() -> tuple[bool, str]:
    from ipyskills.sandbox.docker.backend import DockerBackend

    return DockerBackend().readiness()


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request):
    if request.param == "docker":
        ready, reason = _docker_ready()
        if not ready:
            if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
                pytest.fail(f"IPYSKILLS_REQUIRE_DOCKER=1 but Docker is not ready: {reason}")
            pytest.skip(f"Docker not ready: {reason}")
    return request.param


@pytest.fixture(scope="module")
def reg():
    return SkillRegistry([BUNDLED, EXAMPLES])


def _ok(result):
    assert result.exit_code == 0, f"{result.status_line()}\n{result.stderr}"
    assert not [f for f in result.findings if f.severity == "block"]
    return result


def test_analyze_statistics_from_stdin(reg, backend):
    result = _ok(reg.run("data-processor", "scripts/analyze.py", stdin='{"items": [2, 4, 4, 4, 5, 5, 7, 9]}',
                         backend=backend))
    assert result.backend == backend
    stats = json.loads(result.stdout)["analysis"]
    assert stats["count"] == 8 and stats["mean"] == 5.0 and stats["median"] == 4.5


def test_markdown_table_through_stdin_converts(reg, backend):
    result = _ok(reg.run("data-processor", "scripts/format_converter.py", args=["--to", "json"],
                         stdin=MARKDOWN_TABLE, backend=backend))
    rows = json.loads(result.stdout)
    assert [r["city"] for r in rows] == ["Lyon", "Nantes"]


def test_extract_info_finds_emails_and_amounts(reg, backend):
    text = "Contact ana@example.org before March 5, 2024; the budget is $1,200.50 (up 12%)."
    result = _ok(reg.run("data-processor", "scripts/extract_info.py", stdin=text, backend=backend))
    extracted = json.loads(result.stdout)["extracted"]
    assert "ana@example.org" in json.dumps(extracted["emails"])
    assert "12" in json.dumps(extracted["percentages"])


def test_chart_maker_returns_an_image_artifact(reg, backend):
    result = _ok(reg.run("chart-maker", "scripts/bar_chart.py", args=["--file", "assets/sample.csv"],
                         backend=backend))
    images = [a for a in result.artifacts if a.mime.startswith("image/")]
    assert images and images[0].data, result.artifacts
    summary = json.loads(result.stdout)
    assert summary["count"] > 0

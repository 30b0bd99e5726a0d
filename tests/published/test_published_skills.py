"""Skills shaped like published ones (tests/published/README.md says which): what `requirements()` finds in
them, with where each came from; that a run with deps="auto" really works (artifacts checked on the host);
and that without provisioning the same scripts die on the missing module, so provisioning did the work."""

from __future__ import annotations

import io
import json
import random
import re
import string
import struct
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

FIXTURES = Path(__file__).resolve().parent / "skills"
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
RUN_TIMEOUT = 60  # seconds of the script itself; provisioning happens before and is not counted


def line_of(rel: str, needle: str, *, exact: bool = False) -> int:
    """1-based line of the first line of the fixture file `rel` ("skill/path") that contains `needle`
    (that is `needle`, stripped, with exact=True)."""
    lines = (FIXTURES / rel).read_text(encoding="utf-8").splitlines()
    found = [n for n, line in enumerate(lines, 1) if (line.strip() == needle if exact else needle in line)]
    assert found, f"{needle!r} is not in {rel}"
    return found[0]


def requirement(reqs, key: str):
    """The Requirement for distribution `key` (normalised name), from `python` or `provided`, checking it
    sits in the one the sandbox image's base set says."""
    from ipyskills.core.requirements import default_provided, normalise

    base = {normalise(name) for name in default_provided()}
    in_python = [r for r in reqs.python if r.key == key]
    in_provided = [r for r in reqs.provided if r.key == key]
    assert len(in_python) + len(in_provided) == 1, (key, reqs.to_dict())
    if key in base:
        assert in_provided, f"{key} is in the base image set but listed as to install: {reqs.to_dict()}"
    else:
        assert in_python, f"{key} is not in the base image set but listed as provided: {reqs.to_dict()}"
    return (in_python or in_provided)[0]


def words(count: int, rng: random.Random) -> list[str]:
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))) for _ in range(count)]


def artifact(result, path: str) -> bytes:
    found = {a.path: a for a in result.artifacts}
    assert path in found, f"no artifact {path}; got {sorted(found)}"
    assert found[path].data is not None, f"{path} was over the artifact cap"
    return found[path].data


def assert_module_missing(result, module: str) -> None:
    assert result.exit_code != 0, result.stdout
    assert "ModuleNotFoundError" in result.stderr, result.stderr[-800:]
    assert f"No module named '{module}'" in result.stderr, result.stderr[-800:]


def run(reg, name: str, script: str, **kw):
    kw.setdefault("timeout", RUN_TIMEOUT)
    return reg.run(name, script, backend="docker", **kw)


# --- what requirements() reports ---------------------------------------------------------------------


def test_docx_skill_declares_python_docx_in_skill_md_and_imports_defusedxml(published_registry):
    reqs = published_registry.requirements("pub-docx-report")
    docx = requirement(reqs, "python-docx")
    assert (docx.source, docx.file) == ("skill-md", "SKILL.md")
    assert docx.line == line_of("pub-docx-report/SKILL.md", "pip install python-docx")
    defused = requirement(reqs, "defusedxml")
    assert (defused.source, defused.file) == ("import", "scripts/make_report.py")
    assert defused.line == line_of("pub-docx-report/scripts/make_report.py", "import defusedxml")
    assert not defused.declared and docx.declared
    assert reqs.profile is None and not reqs.programs


def test_pdf_skill_reads_its_requirements_file_line_by_line(published_registry):
    reqs = published_registry.requirements("pub-pdf-roundtrip")
    for key, text in (("reportlab", "reportlab>=4"), ("pypdf", "pypdf"), ("pdfplumber", "pdfplumber")):
        req = requirement(reqs, key)
        assert (req.source, req.file) == ("requirements", "requirements.txt"), req
        assert req.line == line_of("pub-pdf-roundtrip/requirements.txt", text, exact=True)
    reportlab = requirement(reqs, "reportlab")
    assert reportlab.spec == "reportlab>=4"
    assert reqs.specs("declared") == reqs.specs("auto")  # everything it needs is declared
    assert "reportlab>=4" in reqs.specs("auto")


def test_xlsx_skill_declares_in_a_pep723_block(published_registry):
    reqs = published_registry.requirements("pub-xlsx-totals")
    for key, text in (("openpyxl", '"openpyxl>=3.1"'), ("pandas", '"pandas"')):
        req = requirement(reqs, key)
        assert (req.source, req.file) == ("pep723", "scripts/totals.py"), req
        assert req.line == line_of("pub-xlsx-totals/scripts/totals.py", text)
    assert requirement(reqs, "openpyxl").spec == "openpyxl>=3.1"


def test_scientific_skill_installs_with_uv_and_skips_the_optional_gpu_package(published_registry):
    reqs = published_registry.requirements("pub-networkx-facts")
    networkx = requirement(reqs, "networkx")
    assert (networkx.source, networkx.file) == ("skill-md", "SKILL.md")
    assert networkx.line == line_of("pub-networkx-facts/SKILL.md", "uv pip install networkx")
    gpu_line = line_of("pub-networkx-facts/SKILL.md", "nx-cugraph-cu12")
    assert not [r for r in reqs.python + reqs.provided if "cugraph" in r.name]
    skipped = [s for s in reqs.skipped if "nx-cugraph-cu12" in s[0]]
    assert skipped and skipped[0][1:3] == ("SKILL.md", gpu_line), reqs.skipped
    assert reqs.specs("auto") == [networkx.spec]


def test_undeclared_biopython_is_inferred_from_import_bio(published_registry):
    reqs = published_registry.requirements("pub-biopython-gc")
    bio = requirement(reqs, "biopython")  # the import name "Bio" is not the distribution name
    assert (bio.source, bio.file) == ("import", "scripts/gc_content.py")
    assert bio.line == line_of("pub-biopython-gc/scripts/gc_content.py", "from Bio import")
    assert not bio.declared
    assert "biopython" in [s.split("[")[0].split(">")[0].split("=")[0] for s in reqs.specs("auto")]
    assert reqs.specs("declared") == []


def test_office_skill_needs_the_office_profile_for_soffice_and_pdftoppm(published_registry):
    reqs = published_registry.requirements("pub-office-render")
    assert reqs.profile == "office"
    calls = {(p.program, p.file, p.line) for p in reqs.programs}
    script = "pub-office-render/scripts/render.py"
    assert ("soffice", "scripts/render.py", line_of(script, '"soffice"')) in calls
    assert ("pdftoppm", "scripts/render.py", line_of(script, '"pdftoppm"')) in calls
    assert reqs.to_dict()["profile"] == "office"


# --- runs in the sandbox ------------------------------------------------------------------------------


def docx_paragraphs(data: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        assert "word/document.xml" in package.namelist()
        root = ElementTree.fromstring(package.read("word/document.xml"))  # our own test's output
    return ["".join(t.text or "" for t in p.iter(W + "t")) for p in root.iter(W + "p")]


@pytest.mark.docker
@pytest.mark.parametrize("deps", ["auto", "off"])
def test_docx_report_is_a_real_word_file(docker_backend, published_registry, deps):
    """python-docx and defusedxml are in the base image: the run works with provisioning on or off."""
    rng = random.Random()
    title, paragraphs = " ".join(words(2, rng)), [" ".join(words(5, rng)) for _ in range(rng.randint(2, 4))]
    result = run(published_registry, "pub-docx-report", "scripts/make_report.py",
                 args=["--title", title, *paragraphs], deps=deps)
    assert result.exit_code == 0, result.stderr[-1500:]
    report = json.loads(result.stdout)
    assert report["text"] == [title, *paragraphs]
    assert docx_paragraphs(artifact(result, "report.docx")) == [title, *paragraphs]


@pytest.mark.docker
@pytest.mark.slow
def test_pdf_round_trip_needs_reportlab_provisioned(docker_backend, published_registry):
    rng = random.Random()
    title, lines = "Title " + words(1, rng)[0], [" ".join(words(3, rng)) for _ in range(rng.randint(2, 4))]
    stdin = "\n".join(lines) + "\n"
    result = run(published_registry, "pub-pdf-roundtrip", "scripts/roundtrip.py", args=["--title", title],
                 stdin=stdin, deps="auto")
    assert result.exit_code == 0, result.stderr[-1500:]
    report = json.loads(result.stdout)
    assert report["text"] == [title, *lines]
    assert report["title"] == title and report["pages"] == len(lines) + 1
    pdf = artifact(result, "roundtrip.pdf")
    assert pdf.startswith(b"%PDF-")
    assert len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf)) == len(lines) + 1
    assert f"({title})".encode() in pdf  # the /Title pypdf wrote

    off = run(published_registry, "pub-pdf-roundtrip", "scripts/roundtrip.py", args=["--title", title],
              stdin=stdin, deps="off")
    assert_module_missing(off, "reportlab")


@pytest.mark.docker
@pytest.mark.parametrize("deps", ["auto", "off"])
def test_xlsx_totals_are_formulas_and_the_data_reads_back(docker_backend, published_registry, deps):
    rng = random.Random()
    rows = [(w, rng.randint(1, 50), round(rng.uniform(0.5, 99.5), 2)) for w in words(rng.randint(2, 6), rng)]
    csv = "item,qty,price\n" + "".join(f"{w},{q},{p}\n" for w, q, p in rows)
    result = run(published_registry, "pub-xlsx-totals", "scripts/totals.py", stdin=csv, deps=deps)
    assert result.exit_code == 0, result.stderr[-1500:]
    report = json.loads(result.stdout)
    last = len(rows) + 1
    assert report["rows"] == len(rows)
    assert report["formulas"] == {"qty": f"=SUM(B2:B{last})", "price": f"=SUM(C2:C{last})"}
    assert report["sums"]["qty"] == sum(q for _, q, _ in rows)
    assert report["sums"]["price"] == pytest.approx(sum(p for _, _, p in rows))
    with zipfile.ZipFile(io.BytesIO(artifact(result, "totals.xlsx"))) as book:
        sheets = [n for n in book.namelist() if n.startswith("xl/worksheets/sheet")]
        assert sheets, book.namelist()
        xml = book.read(sheets[0]).decode("utf-8")
        text = "".join(book.read(n).decode("utf-8") for n in book.namelist() if n.endswith(".xml"))
    assert f"<f>SUM(B2:B{last})</f>" in xml and f"<f>SUM(C2:C{last})</f>" in xml
    assert all(word in text for word, _, _ in rows)  # the item names are in the workbook (shared strings)


@pytest.mark.docker
@pytest.mark.slow
def test_networkx_from_the_uv_line_answers_with_the_closed_forms(docker_backend, published_registry):
    rng = random.Random()
    n, rows, cols = rng.randint(3, 9), rng.randint(2, 7), rng.randint(2, 7)
    args = ["--complete", str(n), "--grid", f"{rows}x{cols}"]
    result = run(published_registry, "pub-networkx-facts", "scripts/graph_facts.py", args=args, deps="auto")
    assert result.exit_code == 0, result.stderr[-1500:]
    facts = json.loads(result.stdout)
    assert facts["spanning_trees"] == n ** (n - 2)  # Cayley's formula
    assert facts["grid_path"] == rows + cols - 2  # Manhattan distance between opposite corners
    assert "cugraph" not in result.stderr

    off = run(published_registry, "pub-networkx-facts", "scripts/graph_facts.py", args=args, deps="off")
    assert_module_missing(off, "networkx")


@pytest.mark.docker
@pytest.mark.slow
def test_inferred_biopython_is_installed_only_in_auto_mode(docker_backend, published_registry):
    rng = random.Random()
    seqs = {f"r{i}": "".join(rng.choices("ACGT", k=rng.randint(20, 80))) for i in range(3)}
    fasta = "".join(f">{name}\n{seq[:40]}\n{seq[40:]}\n" for name, seq in seqs.items())
    result = run(published_registry, "pub-biopython-gc", "scripts/gc_content.py", stdin=fasta, deps="auto")
    assert result.exit_code == 0, result.stderr[-1500:]
    got = [json.loads(line) for line in result.stdout.splitlines()]
    assert [g["id"] for g in got] == list(seqs)
    for g in got:
        seq = seqs[g["id"]]
        assert g["length"] == len(seq)
        assert g["gc"] == pytest.approx((seq.count("G") + seq.count("C")) / len(seq), abs=1e-6)

    for deps in ("declared", "off"):  # nothing declares it: only the inferred import brings it in
        missing = run(published_registry, "pub-biopython-gc", "scripts/gc_content.py", stdin=fasta, deps=deps)
        assert_module_missing(missing, "Bio")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.docker
@pytest.mark.slow
def test_office_skill_converts_with_soffice_and_renders_with_pdftoppm(docker_backend, office_image,
                                                                       published_registry):
    rng = random.Random()
    pages = [" ".join(words(3, rng)) for _ in range(rng.randint(2, 3))]
    args = [a for text in pages for a in ("--text", text)]
    result = run(published_registry, "pub-office-render", "scripts/render.py", args=args, deps="auto",
                 timeout=180, memory="1g")
    assert result.exit_code == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    pdf = artifact(result, "letter.pdf")
    assert pdf.startswith(b"%PDF-") and report["pdf_bytes"] == len(pdf)
    images = sorted(a.path for a in result.artifacts if a.path.endswith(".png"))
    assert images == report["images"] and len(images) == len(pages)  # one PNG a page: the page breaks held
    for path in images:
        width, height = png_size(artifact(result, path))
        assert 200 < width < height < 400  # a portrait page at 30 dpi (A4 or Letter)

"""Real file tasks from published skills, through the public interfaces.

Each task is one published skill's script run the way that skill's SKILL.md (or the script's own usage
text, where SKILL.md only names the script) tells an agent to run it, on inputs the task makes on the host
(a PDF with real AcroForm fields, a workbook with formulas, a DOCX with tracked changes, a deck, SMILES,
a crystal structure, a DICOM file, a BibTeX file, a skill folder ...), staged with `inputs=` / `--input`,
with `deps="auto"` provisioning as a user gets it. A task passes only when the run exits as expected and a
check on the returned files or output reads the content back (fields filled, pages counted, recalculated
values, slide count, molecular weights within tolerance, space group, ...). A failing task stays in the
suite and is shown with the first line of its reason.

    .venv/bin/python benchmarks/real_tasks.py [/tmp/published] [--json OUT] [--only NAME[,NAME]] [--list]
        [--interface run|cli|magic] [--vendored] [--backend docker|local]

The collections are exported commit trees under the given folder: `anthropics-skills` (anthropics/skills),
`openai-skills` (openai/skills), `k-dense-scientific-skills` (K-Dense-AI/claude-scientific-skills). With
`--vendored` the skills come from tests/published/vendored/ instead (the licence-allowed ones committed
for CI). Most tasks run through `SkillRegistry.run`; those marked `cli` through `ipyskills run` in a
subprocess, those marked `magic` through `%%skill_run` in a real IPython kernel (jupyter_client).

Host side, the task inputs and checks need pypdf, reportlab, openpyxl, python-docx, python-pptx, pydicom
and pillow (the `test` extra installs them); the sandbox needs Docker, the sandbox image, and the office
image for the tasks marked `office`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
VENDORED = HERE.parent / "tests" / "published" / "vendored"

# Collection folder name -> where it comes from (the exported tree's folder under the published root).
COLLECTIONS = {
    "anthropics-skills": "anthropics/skills",
    "openai-skills": "openai/skills",
    "k-dense-scientific-skills": "K-Dense-AI/claude-scientific-skills",
}


class CheckFailed(AssertionError):
    """A run that finished but whose output is not what the task asked for."""


def require(condition, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


@dataclass
class Outcome:
    """What a run gave back, the same from every interface: files are the returned artifacts by path."""

    exit_code: int | None
    stdout: str
    stderr: str
    files: dict[str, bytes]
    notice: str = ""
    seconds: float = 0.0

    def file(self, path: str) -> bytes:
        require(path in self.files, f"no output file {path!r}; got {sorted(self.files)[:12]}")
        return self.files[path]


@dataclass
class Task:
    name: str
    area: str  # pdf, docx, xlsx, pptx, developer, scientific
    skill: str  # collection/path inside it
    script: str
    args: list[str]
    make: Callable[[Path], list[str]]  # writes the inputs into a folder, returns the names to stage
    check: Callable[[Outcome], str]  # raises CheckFailed; returns what it verified
    usage: str  # where the command line comes from
    interface: str = "run"  # run (SkillRegistry.run), cli (ipyskills run), magic (%%skill_run in a kernel)
    timeout: float = 60
    memory: str | None = None
    exit_code: int = 0  # what the script is expected to exit with
    office: bool = False  # needs the office image (LibreOffice, poppler)
    # False only where the static guard blocks what the skill exists to do, and a user, told so by the
    # GuardBlocked message, runs it with --no-guard (the container stays the boundary).
    guard: bool = True
    stdin: str | None = None  # the script's standard input (the cell body of %%skill_run)
    # Why the task fails, once diagnosed and not fixed here; the table still shows it as FAIL with its
    # reason, the tests make it an xfail with this text.
    known_failure: str = ""
    # Host modules the task's inputs and check import, for the tasks of vendored skills (CI without them
    # skips those with the reason; every other task needs the whole set in tests/published HOST_LIBS).
    host_libs: tuple[str, ...] = ()

    @property
    def collection(self) -> str:
        return self.skill.split("/", 1)[0]

    def skill_dir(self, root: Path, vendored: bool = False) -> Path:
        if vendored:
            return VENDORED / self.collection / Path(self.skill).name
        return root / self.skill


# --- inputs ------------------------------------------------------------------------------------------


def _write(folder: Path, name: str, data: bytes | str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return name.split("/", 1)[0]


FORM_FIELDS = {"last_name": (1, "text"), "first_name": (1, "text"), "adult": (1, "checkbox"), "city": (2, "text")}


def fillable_form(folder: Path, name: str = "form.pdf") -> str:
    """A two-page PDF with real AcroForm fields (reportlab): three text fields and a checkbox."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.drawString(72, 720, "Last name:")
    c.acroForm.textfield(name="last_name", x=160, y=712, width=200, height=20)
    c.drawString(72, 690, "First name:")
    c.acroForm.textfield(name="first_name", x=160, y=682, width=200, height=20)
    c.drawString(72, 660, "18 or over:")
    c.acroForm.checkbox(name="adult", x=160, y=655, size=14)
    c.showPage()
    c.drawString(72, 720, "City:")
    c.acroForm.textfield(name="city", x=160, y=712, width=200, height=20)
    c.showPage()
    c.save()
    return _write(folder, name, buf.getvalue())


def plain_form(folder: Path, name: str = "paper-form.pdf") -> str:
    """A one-page form without fields: labels, two full-width rule lines, two 10 pt checkbox squares."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.drawString(72, 720, "Applicant Name")
    c.line(50, 710, 560, 710)
    c.drawString(72, 690, "Member Yes")
    c.rect(160, 688, 10, 10)
    c.drawString(190, 690, "No")
    c.rect(210, 688, 10, 10)
    c.line(50, 670, 560, 670)
    c.showPage()
    c.save()
    return _write(folder, name, buf.getvalue())


def text_pdf(folder: Path, name: str, pages: list[str]) -> str:
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    for text in pages:
        c.setFont("Helvetica", 28)
        c.drawString(72, 600, text)
        c.showPage()
    c.save()
    return _write(folder, name, buf.getvalue())


def pdf_fields(data: bytes) -> dict:
    from pypdf import PdfReader

    return {k: v.get("/V") for k, v in (PdfReader(io.BytesIO(data)).get_fields() or {}).items()}


def pdf_pages(data: bytes) -> int:
    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(data)).pages)


def docx_bytes(paragraphs: list[str], page_breaks: bool = False) -> bytes:
    import docx

    doc = docx.Document()
    for n, text in enumerate(paragraphs):
        if page_breaks and n:
            doc.add_page_break()
        doc.add_paragraph(text)
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def docx_text(data: bytes) -> list[str]:
    import docx

    return [p.text for p in docx.Document(io.BytesIO(data)).paragraphs if p.text]


W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def tracked_changes_docx() -> bytes:
    """A DOCX whose second paragraph holds a tracked insertion and a tracked deletion (w:ins, w:del)."""
    base = docx_bytes(["Contract terms", "PLACEHOLDER"])
    body = (f'<w:p><w:r><w:t xml:space="preserve">The fee is </w:t></w:r>'
            f'<w:del w:id="1" w:author="Ann" w:date="2026-01-01T00:00:00Z"><w:r>'
            f'<w:delText xml:space="preserve">100 </w:delText></w:r></w:del>'
            f'<w:ins w:id="2" w:author="Ann" w:date="2026-01-01T00:00:00Z"><w:r>'
            f'<w:t xml:space="preserve">250 </w:t></w:r></w:ins>'
            f'<w:r><w:t>euros.</w:t></w:r></w:p>')
    return _replace_in_zip(base, "word/document.xml",
                           lambda xml: re.sub(r"<w:p>(?:(?!<w:p>).)*?PLACEHOLDER.*?</w:p>", body, xml, flags=re.S))


def _replace_in_zip(data: bytes, member: str, edit: Callable[[str], str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            content = src.read(item.filename)
            if item.filename == member:
                content = edit(content.decode("utf-8")).encode("utf-8")
            dst.writestr(item, content)
    return out.getvalue()


def unzip_to(data: bytes, folder: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        zf.extractall(folder)


def pptx_bytes(titles: list[str]) -> bytes:
    from pptx import Presentation

    prs = Presentation()
    for title in titles:
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = f"Notes about {title.lower()}"
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


DECK = ["Quarterly results", "Revenue by region", "Costs", "Hiring plan", "Next steps"]


def workbook_with_formulas(folder: Path, name: str = "budget.xlsx") -> str:
    """Monthly figures with SUM/AVERAGE/product formulas and one deliberate #DIV/0!."""
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Month", "Units", "Price", "Revenue"])
    for n, (month, units, price) in enumerate(BUDGET, start=2):
        ws.append([month, units, price, f"=B{n}*C{n}"])
    last = len(BUDGET) + 1
    ws[f"A{last + 1}"] = "Total"
    ws[f"B{last + 1}"] = f"=SUM(B2:B{last})"
    ws[f"D{last + 1}"] = f"=SUM(D2:D{last})"
    ws[f"A{last + 2}"] = "Mean price"
    ws[f"C{last + 2}"] = f"=AVERAGE(C2:C{last})"
    ws[f"A{last + 3}"] = "Broken"
    ws[f"D{last + 3}"] = f"=D{last + 1}/0"
    buf = io.BytesIO()
    wb.save(buf)
    return _write(folder, name, buf.getvalue())


BUDGET = [("Jan", 12, 2.5), ("Feb", 7, 3.0), ("Mar", 20, 1.25), ("Apr", 3, 10.0)]
PRICES = {"apple": 0.5, "pear": 0.75, "plum": 1.2}
ORDERS = [("apple", 10), ("plum", 4), ("pear", 8), ("kiwi", 3)]  # kiwi has no price: VLOOKUP gives #N/A


def workbook_two_sheets(folder: Path, name: str = "orders.xlsx") -> str:
    """Orders priced by VLOOKUP from a second sheet, an IF, a cross-sheet SUM and an unknown function."""
    from openpyxl import Workbook

    wb = Workbook()
    prices = wb.active
    prices.title = "Prices"
    for item in PRICES.items():
        prices.append(list(item))
    orders = wb.create_sheet("Orders")
    orders.append(["Item", "Qty", "Price", "Amount", "Bulk"])
    for n, (item, qty) in enumerate(ORDERS, start=2):
        orders.append([item, qty, f"=VLOOKUP(A{n},Prices!A1:B{len(PRICES)},2,FALSE)", f"=B{n}*C{n}",
                       f'=IF(B{n}>=8,"bulk","single")'])
    last = len(ORDERS) + 1
    orders[f"F{last + 1}"] = f"=SUM(Prices!B1:B{len(PRICES)})"
    orders[f"F{last + 2}"] = "=NOSUCHFUNCTION(1)"
    buf = io.BytesIO()
    wb.save(buf)
    return _write(folder, name, buf.getvalue())


def check_recalc_two_sheets(out: Outcome) -> str:
    from openpyxl import load_workbook

    try:
        report = json.loads(out.stdout)
    except ValueError:
        raise CheckFailed(f"stdout is not JSON: {out.stdout.strip()[:200]}") from None
    require("error" not in report, f"recalc.py: {report.get('error')}")
    n = len(ORDERS)
    require(report.get("total_formulas") == 3 * n + 2, f"total_formulas {report.get('total_formulas')}")
    summary = report.get("error_summary", {})
    # kiwi: its price (#N/A) and its amount (#N/A propagated); the unknown function: #NAME?
    require(sorted(summary.get("#N/A", {}).get("locations", [])) == [f"Orders!C{n + 1}", f"Orders!D{n + 1}"],
            f"#N/A {summary.get('#N/A')}")
    require(summary.get("#NAME?", {}).get("locations") == [f"Orders!F{n + 3}"], f"#NAME? {summary.get('#NAME?')}")
    ws = load_workbook(io.BytesIO(out.file("orders.xlsx")), data_only=True)["Orders"]
    for row, (item, qty) in enumerate(ORDERS[:-1], start=2):
        require(near(ws[f"D{row}"].value or 0, qty * PRICES[item], 1e-9), f"D{row} = {ws[f'D{row}'].value}")
        require(ws[f"E{row}"].value == ("bulk" if qty >= 8 else "single"), f"E{row} = {ws[f'E{row}'].value}")
    require(near(ws[f"F{n + 2}"].value or 0, sum(PRICES.values()), 1e-9), f"F{n + 2} = {ws[f'F{n + 2}'].value}")
    return "VLOOKUP across sheets, IF and SUM recalculated; 2 #N/A and 1 #NAME? located"


def check_unpacked_xlsx(out: Outcome) -> str:
    sheets = sorted(p for p in out.files if re.fullmatch(r"unpacked/xl/worksheets/sheet\d+\.xml", p))
    require(len(sheets) == 2, f"sheets {sheets}")
    xml = out.files["unpacked/xl/worksheets/sheet2.xml"].decode()
    require("VLOOKUP(A2,Prices!A1:B3,2,FALSE)" in xml, "formula not in sheet2.xml")
    require("\n  " in xml, "sheet2.xml is not pretty-printed")
    return "2 worksheet parts, the VLOOKUP formula in the XML"


def dicom_file(folder: Path, name: str = "scan.dcm", rows: int = 32, cols: int = 48) -> str:
    """A small explicit-little-endian CT image with a patient name, a horizontal gradient as pixels."""
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(name, {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = CTImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = generate_uid()
    ds.SeriesInstanceUID = generate_uid()
    ds.PatientName = "Doe^Jane"
    ds.PatientID = "PAT-4711"
    ds.PatientBirthDate = "19700101"
    ds.StudyDate = "20260102"
    ds.Modality = "CT"
    ds.InstitutionName = "General Hospital"
    ds.Rows, ds.Columns = rows, cols
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = 16
    ds.HighBit = 15
    ds.PixelRepresentation = 0
    pixels = bytearray()
    for _r in range(rows):
        for c in range(cols):
            pixels += (c * 40).to_bytes(2, "little")
    ds.PixelData = bytes(pixels)
    buf = io.BytesIO()
    ds.save_as(buf, enforce_file_format=True)
    return _write(folder, name, buf.getvalue())


def png_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return img.size


SKILL_MD = ("---\nname: {name}\ndescription: Turns meeting notes into action items. Use when the user shares "
            "meeting notes and asks for follow-ups.\n---\n# {name}\n\nRead the notes and list each action item "
            "with its owner.\n")


def skill_folder(folder: Path, name: str = "notes-helper", text: str | None = None) -> str:
    _write(folder, f"{name}/SKILL.md", text if text is not None else SKILL_MD.format(name=name))
    _write(folder, f"{name}/references/style.md", "# Style\n\nOne line per action item.\n")
    return name


def eval_workspace(folder: Path) -> str:
    """A skill-creator iteration folder: 2 evals x (with_skill, without_skill) x 2 runs with grading.json."""
    for ev, prompt in enumerate(["Summarise the notes", "List the owners"]):
        base = f"iteration-1/eval-{ev}"
        _write(folder, f"{base}/eval_metadata.json", json.dumps({"eval_id": ev, "prompt": prompt}))
        for config in ("with_skill", "without_skill"):
            for run in (1, 2):
                passed = EVAL_PASSED[(ev, config, run)]
                grading = {"expectations": [{"text": f"check {i}", "passed": i < passed, "evidence": "seen"}
                                            for i in range(4)],
                           "summary": {"passed": passed, "failed": 4 - passed, "total": 4,
                                       "pass_rate": passed / 4},
                           "timing": {"total_duration_seconds": 10.0 + run}}
                rd = f"{base}/{config}/run-{run}"
                _write(folder, f"{rd}/grading.json", json.dumps(grading))
                _write(folder, f"{rd}/outputs/answer.md", f"Answer to {prompt!r} ({config} run {run})\n")
    return "iteration-1"


EVAL_PASSED = {(0, "with_skill", 1): 4, (0, "with_skill", 2): 3, (0, "without_skill", 1): 1,
               (0, "without_skill", 2): 2, (1, "with_skill", 1): 4, (1, "with_skill", 2): 4,
               (1, "without_skill", 1): 2, (1, "without_skill", 2): 0}


def mean_pass_rate(config: str) -> float:
    rates = [p / 4 for (ev, c, run), p in EVAL_PASSED.items() if c == config]
    return sum(rates) / len(rates)


MOLECULES = {  # name: (SMILES, average molecular weight from the standard atomic weights, g/mol)
    "ethanol": ("CCO", 46.069),
    "benzene": ("c1ccccc1", 78.114),
    "aspirin": ("CC(=O)Oc1ccccc1C(=O)O", 180.159),
    "caffeine": ("Cn1cnc2c1c(=O)n(C)c(=O)n2C", 194.194),
    "phenol": ("Oc1ccccc1", 94.113),
    "cyclohexane": ("C1CCCCC1", 84.162),
}


def smiles_file(folder: Path, name: str = "molecules.smi", names=None) -> str:
    names = names or list(MOLECULES)
    return _write(folder, name, "".join(f"{MOLECULES[n][0]} {n}\n" for n in names))


NACL_POSCAR = """NaCl rock salt
1.0
5.64 0.00 0.00
0.00 5.64 0.00
0.00 0.00 5.64
Na Cl
4 4
Direct
0.0 0.0 0.0
0.0 0.5 0.5
0.5 0.0 0.5
0.5 0.5 0.0
0.5 0.0 0.0
0.0 0.5 0.0
0.0 0.0 0.5
0.5 0.5 0.5
"""

BIBTEX = """@article{smith2020,
  author = {Smith, John and Doe, Jane},
  title = {A study of things},
  journal = {Journal of Studies},
  year = {2020},
  volume = {12},
  pages = {1--10},
  doi = {10.1000/xyz123}
}

@article{lee2023,
  author = {Lee, Kim},
  title = {Newer results},
  journal = {Letters},
  year = {2023},
  volume = {3},
  pages = {5--9}
}

@article{smith2020dup,
  author = {Smith, John and Doe, Jane},
  title = {A study of things},
  journal = {Journal of Studies},
  year = {2020},
  volume = {12},
  pages = {1--10},
  doi = {10.1000/xyz123}
}

@book{nobody,
  title = {A book without an author or year}
}
"""


def sales_csv(folder: Path, name: str = "sales.csv") -> str:
    rows = ["region,units,price,returned"]
    for n, units in enumerate(sales_units()):  # 4 missing values
        rows.append(f"{['north', 'south', 'east', 'west'][n % 4]},{'' if units is None else units},{1.5 + n % 5},"
                    f"{n % 3 == 0}")
    return _write(folder, name, "\n".join(rows) + "\n")


def counts_csv(folder: Path, name: str = "counts.csv") -> str:
    """Cells x genes counts: 30 cells, 300 genes (3 of them MT-). Cells 0-4 express 100 genes (under
    --min-genes 200), cells 5-9 have 150 of their 400 counts on MT- genes (over --mt-threshold 5), the other 20
    express 261 genes with under 1% mitochondrial counts."""
    genes = [f"MT-G{i}" for i in range(3)] + [f"GENE{i}" for i in range(297)]
    lines = ["cell," + ",".join(genes)]
    for c in range(30):
        if c < 5:  # few genes detected: removed by --min-genes 200
            values = [0, 0, 0] + [1 if g < 100 else 0 for g in range(297)]
        elif c < 10:  # high mitochondrial share: removed by --mt-threshold 5
            values = [50, 50, 50] + [1 if g < 250 else 0 for g in range(297)]
        else:
            values = [1, 0, 0] + [1 + (g + c) % 3 if g < 260 else 0 for g in range(297)]
        lines.append(f"cell{c}," + ",".join(map(str, values)))
    return _write(folder, name, "\n".join(lines) + "\n")


# --- checks ------------------------------------------------------------------------------------------


def near(value: float, expected: float, tol: float) -> bool:
    return abs(value - expected) <= tol


def json_file(out: Outcome, path: str):
    try:
        return json.loads(out.file(path))
    except ValueError as exc:
        raise CheckFailed(f"{path} is not JSON: {exc}") from None


def check_fillable_yes(out: Outcome) -> str:
    require("has fillable form fields" in out.stdout and "does not" not in out.stdout, out.stdout.strip()[:200])
    return "said the form has fillable fields"


def check_fillable_no(out: Outcome) -> str:
    require("does not have fillable form fields" in out.stdout, out.stdout.strip()[:200])
    return "said the plain PDF has no fillable fields"


def check_field_info(out: Outcome) -> str:
    info = {f["field_id"]: f for f in json_file(out, "field_info.json")}
    require(set(info) == set(FORM_FIELDS), f"fields {sorted(info)}")
    for fid, (page, kind) in FORM_FIELDS.items():
        require(info[fid]["page"] == page and info[fid]["type"] == kind, f"{fid}: {info[fid]}")
    require(info["adult"].get("checked_value") == "/Yes", f"adult: {info['adult']}")
    return f"{len(info)} fields with page, type and the checkbox's on value"


FILL = {"last_name": "Simpson", "first_name": "Homer", "adult": "/Yes", "city": "Springfield"}


def make_fill_values(folder: Path) -> list[str]:
    values = [{"field_id": k, "description": k, "page": FORM_FIELDS[k][0], "value": v} for k, v in FILL.items()]
    return [fillable_form(folder), _write(folder, "field_values.json", json.dumps(values, indent=1))]


def check_filled(out: Outcome) -> str:
    fields = pdf_fields(out.file("filled.pdf"))
    for k, v in FILL.items():
        require(str(fields.get(k)) == v, f"{k} = {fields.get(k)!r}, wanted {v!r}")
    require(pdf_pages(out.files["filled.pdf"]) == 2, "page count changed")
    return "4 fields read back with pypdf"


def make_bad_fill_values(folder: Path) -> list[str]:
    values = [{"field_id": "last_name", "page": 2, "value": "Simpson"},
              {"field_id": "adult", "page": 1, "value": "/On"}]
    return [fillable_form(folder), _write(folder, "field_values.json", json.dumps(values))]


def check_fill_refused(out: Outcome) -> str:
    require("Incorrect page number for `last_name`" in out.stdout, out.stdout[:300])
    require('Invalid value "/On" for checkbox' in out.stdout, out.stdout[:300])
    require("filled.pdf" not in out.files, "wrote a PDF despite the errors")
    return "both wrong values reported, no PDF written"


def check_structure(out: Outcome) -> str:
    s = json_file(out, "form_structure.json")
    words = {label["text"] for label in s["labels"]}
    require({"Applicant", "Name", "Member", "Yes", "No"} <= words, f"labels {sorted(words)}")
    require(len(s["checkboxes"]) == 2, f"{len(s['checkboxes'])} checkboxes")
    require(len(s["lines"]) == 2 and len(s["row_boundaries"]) == 1, f"lines {s['lines']}")
    return "labels, 2 checkboxes, 2 rule lines, 1 row"


ANNOTATION_FIELDS = {
    "pages": [{"page_number": 1, "pdf_width": 612, "pdf_height": 792}],
    "form_fields": [
        {"page_number": 1, "description": "name", "field_label": "Applicant Name",
         "label_bounding_box": [72, 62, 160, 76], "entry_bounding_box": [170, 60, 400, 80],
         "entry_text": {"text": "Ada Lovelace", "font_size": 10}},
        {"page_number": 1, "description": "member yes", "field_label": "Yes",
         "label_bounding_box": [72, 92, 130, 106], "entry_bounding_box": [160, 94, 170, 104],
         "entry_text": {"text": "X", "font_size": 8}},
    ],
}


def make_annotation_fill(folder: Path) -> list[str]:
    return [plain_form(folder), _write(folder, "fields.json", json.dumps(ANNOTATION_FIELDS))]


def check_annotations(out: Outcome) -> str:
    from pypdf import PdfReader

    page = PdfReader(io.BytesIO(out.file("filled.pdf"))).pages[0]
    texts = sorted(str(a.get_object().get("/Contents")) for a in page.get("/Annots", [])
                   if a.get_object().get("/Subtype") == "/FreeText")
    require(texts == ["Ada Lovelace", "X"], f"FreeText annotations {texts}")
    return "2 FreeText annotations with the entry texts"


def make_overlapping_boxes(folder: Path) -> list[str]:
    fields = json.loads(json.dumps(ANNOTATION_FIELDS))
    fields["form_fields"][1]["entry_bounding_box"] = [300, 70, 320, 90]  # overlaps the name entry
    fields["form_fields"][0]["entry_text"]["font_size"] = 30  # taller than its 20 pt box
    return [_write(folder, "fields.json", json.dumps(fields))]


def check_boxes(out: Outcome) -> str:
    require("Read 2 fields" in out.stdout, out.stdout[:200])
    require("FAILURE: intersection between entry bounding box for `name`" in out.stdout, out.stdout[:400])
    require("too short for the text content (font size: 30)" in out.stdout, out.stdout[:400])
    require("SUCCESS" not in out.stdout, "reported success")
    return "the overlap and the too-small box reported"


def check_page_images(out: Outcome) -> str:
    pages = sorted(p for p in out.files if re.fullmatch(r"page_\d+\.png", p))
    require(pages == ["page_1.png", "page_2.png", "page_3.png"], f"images {pages}")
    sizes = {png_size(out.files[p]) for p in pages}
    # Letter (8.5 x 11 in) at 200 dpi is 1700 x 2200 px; the script scales the longer side to 1000 px.
    expected = (int(1700 * 1000 / 2200), 1000)
    require(sizes == {expected}, f"sizes {sizes}, expected {expected}")
    return f"3 pages as {expected[0]}x{expected[1]} PNGs"


def make_validation_image(folder: Path) -> list[str]:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (612, 792), "white").save(buf, "PNG")
    fields = json.loads(json.dumps(ANNOTATION_FIELDS))
    return [_write(folder, "fields.json", json.dumps(fields)), _write(folder, "page_1.png", buf.getvalue())]


def check_validation_image(out: Outcome) -> str:
    from PIL import Image

    with Image.open(io.BytesIO(out.file("validation.png"))) as img:
        rgb = img.convert("RGB")
        require(img.size == (612, 792), f"size {img.size}")
        require(rgb.getpixel((170, 70)) == (255, 0, 0), f"entry box edge {rgb.getpixel((170, 70))}")
        require(rgb.getpixel((72, 70)) == (0, 0, 255), f"label box edge {rgb.getpixel((72, 70))}")
    require("with 4 bounding boxes" in out.stdout, out.stdout[:200])
    return "red entry and blue label boxes drawn"


DOC_PARAGRAPHS = ["Project charter", "Status: draft", "Owner: Team Blue"]


def make_docx(folder: Path) -> list[str]:
    return [_write(folder, "document.docx", docx_bytes(DOC_PARAGRAPHS))]


def check_unpacked_docx(out: Outcome) -> str:
    xml = out.file("unpacked/word/document.xml").decode()
    for text in DOC_PARAGRAPHS:
        require(text in xml, f"{text!r} not in document.xml")
    require("\n  " in xml, "document.xml is not pretty-printed")
    require("unpacked/[Content_Types].xml" in out.files, "no [Content_Types].xml")
    return "document.xml pretty-printed with every paragraph"


def make_unpacked_docx(folder: Path) -> list[str]:
    data = docx_bytes(DOC_PARAGRAPHS)
    _write(folder, "document.docx", data)
    unzip_to(data, folder / "unpacked")
    xml_path = folder / "unpacked" / "word" / "document.xml"
    xml_path.write_text(xml_path.read_text().replace("Status: draft", "Status: approved"))
    return ["unpacked", "document.docx"]


def check_packed_docx(out: Outcome) -> str:
    text = docx_text(out.file("output.docx"))
    require(text == ["Project charter", "Status: approved", "Owner: Team Blue"], f"paragraphs {text}")
    return "python-docx reads the edited paragraphs"


def make_unpacked_for_comment(folder: Path) -> list[str]:
    unzip_to(docx_bytes(DOC_PARAGRAPHS), folder / "unpacked")
    return ["unpacked"]


def check_comment(out: Outcome) -> str:
    comments = out.file("unpacked/word/comments.xml").decode()
    require("Needs a source" in comments and 'w:author="Claude"' in comments, comments[:300])
    types = out.file("unpacked/[Content_Types].xml").decode()
    require("comments+xml" in types, "comments part not registered in [Content_Types].xml")
    rels = out.file("unpacked/word/_rels/document.xml.rels").decode()
    require("comments.xml" in rels, "comments part not related to the document")
    return "comments.xml written and registered"


def schema_valid_docx(folder: Path) -> list[str]:
    """python-docx's document with its one schema slip fixed: the default template's `<w:zoom
    w:val="bestFit"/>` lacks the `w:percent` the OOXML schema requires (the validator reports it)."""
    data = _replace_in_zip(docx_bytes(DOC_PARAGRAPHS), "word/settings.xml",
                           lambda xml: re.sub(r"<w:zoom ([^>]*?)/>", r'<w:zoom \1 w:percent="100"/>', xml))
    return [_write(folder, "document.docx", data)]


def check_validate_docx(out: Outcome) -> str:
    require("All validations PASSED" in out.stdout, (out.stdout + out.stderr).strip()[-300:])
    return "All validations PASSED"


def check_validate_docx_error(out: Outcome) -> str:
    require("FAILED" in out.stdout and "word/settings.xml: 1 new error" in out.stdout, out.stdout.strip()[:300])
    require("zoom" in out.stdout and "percent" in out.stdout, out.stdout.strip()[:300])
    return "the missing w:zoom/@w:percent in settings.xml reported"


def make_tracked(folder: Path) -> list[str]:
    return [_write(folder, "tracked.docx", tracked_changes_docx())]


def check_accepted(out: Outcome) -> str:
    data = out.file("accepted.docx")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        xml = zf.read("word/document.xml").decode()
    require("<w:ins " not in xml and "<w:del " not in xml, "tracked changes still present")
    text = docx_text(data)
    require("The fee is 250 euros." in text, f"paragraphs {text}")
    return "no w:ins/w:del left; the accepted text reads back"


def make_paged_docx(folder: Path) -> list[str]:
    return [_write(folder, "report.docx", docx_bytes(["Page one", "Page two", "Page three"], page_breaks=True))]


def check_docx_pdf(out: Outcome) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(out.file("report.pdf")))
    require(len(reader.pages) == 3, f"{len(reader.pages)} pages")
    words = [reader.pages[i].extract_text().strip() for i in range(3)]
    require(words == ["Page one", "Page two", "Page three"], f"page texts {words}")
    return "3 pages with their text"


def check_recalc(out: Outcome) -> str:
    from openpyxl import load_workbook

    try:
        report = json.loads(out.stdout)
    except ValueError:
        raise CheckFailed(f"stdout is not JSON: {out.stdout.strip()[:200]}") from None
    require("error" not in report, f"recalc.py: {report.get('error')}")
    n = len(BUDGET)
    require(report.get("total_formulas") == n + 4, f"total_formulas {report.get('total_formulas')}")
    require(report.get("total_errors") == 1 and report.get("status") == "errors_found", f"report {report}")
    require(report["error_summary"].get("#DIV/0!", {}).get("locations") == [f"Budget!D{n + 4}"], str(report))
    ws = load_workbook(io.BytesIO(out.file("budget.xlsx")), data_only=True)["Budget"]
    revenue = [u * p for _, u, p in BUDGET]
    for row, value in enumerate(revenue, start=2):
        require(near(ws[f"D{row}"].value or 0, value, 1e-9), f"D{row} = {ws[f'D{row}'].value}")
    require(near(ws[f"D{n + 2}"].value or 0, sum(revenue), 1e-9), f"total {ws[f'D{n + 2}'].value}")
    require(ws[f"B{n + 2}"].value == sum(u for _, u, _ in BUDGET), f"units {ws[f'B{n + 2}'].value}")
    mean_price = sum(p for *_, p in BUDGET) / n
    require(near(ws[f"C{n + 3}"].value or 0, mean_price, 1e-9), f"mean {ws[f'C{n + 3}'].value}")
    return f"{n + 4} formulas, 1 #DIV/0! located, cached values read back with data_only"


def make_deck(folder: Path) -> list[str]:
    return [_write(folder, "deck.pptx", pptx_bytes(DECK))]


def check_thumbnails(out: Outcome) -> str:
    from PIL import Image

    with Image.open(io.BytesIO(out.file("thumbnails.jpg"))) as img:
        width, height = img.size
        rgb = img.convert("L")
        cols, thumb_w, pad = 3, 300, 20
        require(width == cols * thumb_w + (cols + 1) * pad, f"width {width}")
        rows = 2  # 5 slides in 3 columns
        cell_h = (height - (rows + 1) * pad) / rows
        thumb_h = int(thumb_w * 0.75)  # the default 4:3 slide
        require(cell_h > thumb_h, f"height {height} does not hold {rows} rows of {thumb_h} px thumbnails")
        # A slide was drawn in each of the 5 cells (a border and a title: not all white), the 6th is empty.
        def ink(col: int, row: int) -> int:
            x0 = pad + col * (thumb_w + pad)
            y0 = int(pad + row * (cell_h + pad) + cell_h - thumb_h)
            box = rgb.crop((x0, y0, x0 + thumb_w, y0 + thumb_h))
            return sum(box.histogram()[:200])  # pixels darker than light grey
        inked = [ink(n % cols, n // cols) > 50 for n in range(6)]
    require(inked == [True] * 5 + [False], f"cells drawn {inked}")
    return "one 3x2 grid, 5 thumbnails drawn, the 6th cell empty"


def check_unpacked_pptx(out: Outcome) -> str:
    slides = sorted(p for p in out.files if re.fullmatch(r"unpacked/ppt/slides/slide\d+\.xml", p))
    require(len(slides) == len(DECK), f"slides {slides}")
    require(DECK[1] in out.files["unpacked/ppt/slides/slide2.xml"].decode(), "slide 2 title missing")
    return f"{len(slides)} slide XML files"


def make_unpacked_deck(folder: Path) -> list[str]:
    unzip_to(pptx_bytes(DECK), folder / "unpacked")
    return ["unpacked"]


def check_added_slide(out: Outcome) -> str:
    new = out.file(f"unpacked/ppt/slides/slide{len(DECK) + 1}.xml").decode()
    require(DECK[1] in new, "the new slide is not a copy of slide 2")
    require(re.search(r"<p:sldId [^>]*r:id=\"rId\d+\"", out.stdout), f"stdout {out.stdout[:200]}")
    rels = out.file("unpacked/ppt/_rels/presentation.xml.rels").decode()
    require(f"slides/slide{len(DECK) + 1}.xml" in rels, "new slide not related to the presentation")
    return "slide6.xml duplicates slide 2, relationship added, <p:sldId> printed"


def make_orphan_deck(folder: Path) -> list[str]:
    unzip_to(pptx_bytes(DECK), folder / "unpacked")
    pres = folder / "unpacked" / "ppt" / "presentation.xml"
    xml = pres.read_text()
    ids = re.findall(r"<p:sldId [^>]*/>", xml)
    pres.write_text(xml.replace(ids[-1], ""))  # the last slide is no longer in the deck
    return ["unpacked"]


def check_cleaned(out: Outcome) -> str:
    types = out.file("unpacked/[Content_Types].xml").decode()
    require(f"/ppt/slides/slide{len(DECK)}.xml" not in types, "orphan slide still in [Content_Types].xml")
    require("/ppt/slides/slide1.xml" in types, "slide 1 removed too")
    require(f"slide{len(DECK)}.xml" in out.stdout, f"stdout {out.stdout[:300]}")
    return "orphan slide dropped from [Content_Types].xml and reported"


def make_deck_to_pack(folder: Path) -> list[str]:
    data = pptx_bytes(DECK)
    _write(folder, "deck.pptx", data)
    unzip_to(data, folder / "unpacked")
    slide = folder / "unpacked" / "ppt" / "slides" / "slide3.xml"
    slide.write_text(slide.read_text().replace(">Costs<", ">Costs and savings<"))
    return ["unpacked", "deck.pptx"]


def check_packed_pptx(out: Outcome) -> str:
    from pptx import Presentation

    prs = Presentation(io.BytesIO(out.file("output.pptx")))
    titles = [s.shapes.title.text for s in prs.slides]
    require(titles == [DECK[0], DECK[1], "Costs and savings", *DECK[3:]], f"titles {titles}")
    return "python-pptx reads 5 slides with the edited title"


def check_valid_skill(out: Outcome) -> str:
    require("Skill is valid" in out.stdout, out.stdout.strip()[:200])
    return "reported valid"


def make_bad_skill(folder: Path) -> list[str]:
    return [skill_folder(folder, "bad-skill", "---\nname: Bad_Skill\ndescription: Does <things>.\n---\nBody\n")]


def check_invalid_skill(out: Outcome) -> str:
    text = out.stdout + out.stderr
    require(re.search(r"(?i)name.*(hyphen|lowercase|kebab)", text), f"no name complaint: {text.strip()[:200]}")
    return "the bad name reported, exit 1"


def skill_zip(out: Outcome, path: str) -> str:
    with zipfile.ZipFile(io.BytesIO(out.file(path))) as zf:
        names = sorted(zf.namelist())
        require("notes-helper/SKILL.md" in names and "notes-helper/references/style.md" in names, str(names))
        require(b"Turns meeting notes" in zf.read("notes-helper/SKILL.md"), "SKILL.md content differs")
    return f"{path} holds SKILL.md and references/style.md"


def check_aggregate(out: Outcome) -> str:
    bench = json_file(out, "iteration-1/benchmark.json")
    summary = bench["run_summary"]
    for config in ("with_skill", "without_skill"):
        got = summary[config]["pass_rate"]["mean"]
        require(near(got, round(mean_pass_rate(config), 4), 1e-4), f"{config} mean {got}")
    require(len(bench["runs"]) == 8, f"{len(bench['runs'])} runs")
    md = out.file("iteration-1/benchmark.md").decode()
    require("# Skill Benchmark: notes-helper" in md, md[:200])
    return "pass-rate means of both configurations, 8 runs, benchmark.md"


def make_review_workspace(folder: Path) -> list[str]:
    return [eval_workspace(folder)]


def check_review(out: Outcome) -> str:
    html = out.file("review.html").decode()
    for needle in ("Summarise the notes", "List the owners", "notes-helper"):
        require(needle in html, f"{needle!r} not in review.html")
    require(html.count("with_skill") >= 4, "runs missing from the page")
    return "static viewer embeds both prompts and every run"


LOOP_OUTPUT = {  # what run_loop.py writes: two description attempts over three train queries
    "holdout": 0, "best_train_score": "3/3",
    "history": [
        {"iteration": 1, "description": "Helps with notes.", "train_passed": 1, "train_total": 3,
         "train_results": [
             {"query": "Turn these meeting notes into action items", "should_trigger": True, "pass": False,
              "triggers": 1, "runs": 3},
             {"query": "Who owns the follow-ups from today's standup?", "should_trigger": True, "pass": False,
              "triggers": 0, "runs": 3},
             {"query": "Translate this paragraph to French", "should_trigger": False, "pass": True,
              "triggers": 0, "runs": 3}]},
        {"iteration": 2, "description": "Turns meeting notes into action items with owners.", "train_passed": 3,
         "train_total": 3,
         "train_results": [
             {"query": "Turn these meeting notes into action items", "should_trigger": True, "pass": True,
              "triggers": 3, "runs": 3},
             {"query": "Who owns the follow-ups from today's standup?", "should_trigger": True, "pass": True,
              "triggers": 2, "runs": 3},
             {"query": "Translate this paragraph to French", "should_trigger": False, "pass": True,
              "triggers": 0, "runs": 3}]},
    ],
}


def check_loop_report(out: Outcome) -> str:
    import html as html_mod

    page = out.file("report.html").decode()
    for q in LOOP_OUTPUT["history"][0]["train_results"]:
        require(html_mod.escape(q["query"]) in page, f"query {q['query']!r} missing")
    passes = sum(r["pass"] for h in LOOP_OUTPUT["history"] for r in h["train_results"])
    cells = re.findall(r'<td class="result (pass|fail)">', page)
    require(cells.count("pass") == passes and cells.count("fail") == 6 - passes, f"cells {cells}")
    require("notes-helper" in page and "Turns meeting notes into action items with owners." in page, "title/desc")
    require(re.search(r'<tr class="best-row">', page), "best iteration not highlighted")
    return f"3 queries x 2 iterations, {passes} passes marked, best row highlighted"


def check_init_skill(out: Outcome) -> str:
    md = out.file("report-writer/SKILL.md").decode()
    require(md.startswith("---\nname: report-writer\n"), md[:100])
    made = {p.split("/")[1] for p in out.files if p.startswith("report-writer/") and p.count("/") >= 2}
    require({"scripts", "references"} <= made, f"folders {made}")
    return "SKILL.md with the name, scripts/ and references/ examples"


SERVED_PAGE = "<html><head><title>Inventory dashboard</title></head><body><h1>Stock: 42</h1></body></html>"
FETCH_PAGE = """import urllib.request
html = urllib.request.urlopen("http://localhost:8765/index.html", timeout=5).read().decode()
open("page.txt", "w").write(html)
print("fetched", len(html), "bytes")
"""


def make_site(folder: Path) -> list[str]:
    return [_write(folder, "site/index.html", SERVED_PAGE), _write(folder, "fetch_page.py", FETCH_PAGE)]


def check_served(out: Outcome) -> str:
    require(out.file("page.txt").decode() == SERVED_PAGE, "page differs")
    return "the automation fetched the page from the managed server"


def check_mw_single(out: Outcome) -> str:
    m = re.search(r"\bMW\b[^0-9]*([0-9]+\.[0-9]+)", out.stdout)
    require(m, f"no MW in output: {out.stdout.strip()[:200]}")
    require(near(float(m.group(1)), MOLECULES["aspirin"][1], 0.05), f"MW {m.group(1)}")
    return f"aspirin MW {m.group(1)} (expected {MOLECULES['aspirin'][1]})"


def read_csv(data: bytes) -> list[dict]:
    import csv

    return list(csv.DictReader(io.StringIO(data.decode())))


def check_mw_file(out: Outcome) -> str:
    rows = read_csv(out.file("properties.csv"))
    require(len(rows) == len(MOLECULES), f"{len(rows)} rows")
    for row, (name, (smiles, mw)) in zip(rows, MOLECULES.items()):
        require(near(float(row["MW"]), mw, 0.05), f"{name}: MW {row['MW']} vs {mw}")
    return f"MW of {len(rows)} molecules within 0.05 g/mol"


def check_substructure(out: Outcome) -> str:
    text = out.file("aromatic.smi").decode()
    found = {line.split()[1] for line in text.splitlines() if line.strip() and len(line.split()) > 1}
    require(found == {"benzene", "aspirin", "phenol"}, f"kept {sorted(found)}")
    return "kept exactly the benzene-ring molecules"


def check_similarity(out: Outcome) -> str:
    rows = read_csv(out.file("hits.csv"))
    names = [r.get("Name") or r.get("name") or r.get("ID") or "" for r in rows]
    require(rows and names[0] == "phenol", f"hits {names} / {rows[:2]}")
    require("cyclohexane" not in names and "ethanol" not in names, f"hits {names}")
    return f"phenol first, dissimilar ones left out ({len(rows)} hits)"


def check_medchem(out: Outcome) -> str:
    rows = read_csv(out.file("filtered.csv"))
    require(len(rows) == len(MOLECULES) + 1, f"{len(rows)} rows")
    flag = next((k for k in rows[0] if "rule_of_five" in k.lower()), None)
    require(flag, f"no rule_of_five column in {list(rows[0])}")
    verdict = {r.get("name", r.get("smiles")): r[flag].strip().lower() in ("true", "1") for r in rows}
    require(verdict.get("big") is False and all(verdict[n] for n in MOLECULES), f"{flag}: {verdict}")
    return "small molecules pass Lipinski, the 60-carbon chain fails"


def make_medchem(folder: Path) -> list[str]:
    rows = ["name,smiles"] + [f"{n},{s}" for n, (s, _) in MOLECULES.items()] + ["big," + "C" * 60 + "O" * 0]
    return [_write(folder, "input.csv", "\n".join(rows) + "\n")]


def check_cif(out: Outcome, path: str = "structure.cif") -> str:
    cif = out.file(path).decode()
    require(re.search(r"_cell_length_a\s+5\.64", cif), "a != 5.64")
    require(len(re.findall(r"^\s*Na\s", cif, re.M)) == 4 and len(re.findall(r"^\s*Cl\s", cif, re.M)) == 4,
            "not 4 Na + 4 Cl sites")
    return "CIF with a = 5.64 Å and 4 Na + 4 Cl sites"


def check_symmetry(out: Outcome) -> str:
    text = out.stdout
    exports = [p for p in out.files if p.endswith(".json")]
    blob = text + "".join(out.files[p].decode() for p in exports)
    require("Fm-3m" in blob and "225" in blob, f"no Fm-3m / 225 in output: {text.strip()[:300]}")
    require(exports, f"no JSON export; files {sorted(out.files)}")
    return f"space group Fm-3m (225) in stdout and {exports[0]}"


def check_dicom_meta(out: Outcome) -> str:
    text = out.file("metadata.txt").decode()
    for needle in ("Doe^Jane", "PAT-4711", "19700101", "20260102", "CT"):
        require(needle in text, f"{needle!r} not in metadata.txt")
    require(re.search(r"Rows\s+32\b", text) and re.search(r"Columns\s+48\b", text), "image size not listed")
    return "patient, study date, modality and image size listed"


def check_anonymized(out: Outcome) -> str:
    import pydicom

    ds = pydicom.dcmread(io.BytesIO(out.file("anonymous.dcm")))
    require(str(ds.PatientName) == "ANONYMOUS" and ds.PatientID == "ANONYMOUS", f"{ds.PatientName} {ds.PatientID}")
    require("InstitutionName" not in ds or ds.InstitutionName != "General Hospital", "institution kept")
    require(ds.Rows == 32 and len(ds.PixelData) == 32 * 48 * 2, "pixels changed")
    return "patient name and id replaced, institution removed, pixels kept"


def check_dicom_png(out: Outcome) -> str:
    from PIL import Image

    with Image.open(io.BytesIO(out.file("scan.png"))) as img:
        require(img.size == (48, 32), f"size {img.size}")
        gray = img.convert("L")
        left, right = gray.getpixel((0, 10)), gray.getpixel((47, 10))
    require(left < right, f"gradient lost: {left} .. {right}")
    return "48x32 PNG, the gradient rising left to right"


def check_qc(out: Outcome) -> str:
    m = re.search(r"Cells: (\d+) -> (\d+)", out.stdout)
    require(m, f"no filtering result: {out.stdout.strip()[-300:]}")
    require((int(m.group(1)), int(m.group(2))) == (30, 20), f"cells {m.group(1)} -> {m.group(2)}")
    require(out.file("filtered.h5ad")[:8] == b"\x89HDF\r\n\x1a\n", "filtered.h5ad is not HDF5")
    return "30 -> 20 cells (5 with few genes, 5 mitochondrial removed), filtered.h5ad written"


def sales_units() -> list[int | None]:
    """The units column sales_csv writes (None where the value is missing)."""
    return [None if n % 10 == 3 else 5 + (n * 7) % 23 for n in range(40)]


def check_eda(out: Outcome) -> str:
    report = out.file("report.md").decode()
    m = re.search(r"### Summary Statistics\s*```json\s*(\{.*?\})\s*```", report, re.S)
    require(m, f"no summary statistics block in report.md: {report[:200]}")
    stats = json.loads(m.group(1))
    require(stats["shape"] == [40, 4] and stats["columns"] == ["region", "units", "price", "returned"],
            f"shape {stats['shape']} columns {stats['columns']}")
    require(stats["missing_values"] == {"region": 0, "units": 4, "price": 0, "returned": 0},
            f"missing {stats['missing_values']}")
    units = [u for u in sales_units() if u is not None]
    got = stats["summary_statistics"]["units"]
    require(got["count"] == len(units) and near(got["mean"], sum(units) / len(units), 1e-9), f"units {got}")
    return "shape, columns, the 4 missing units and their mean in report.md"


def check_bibtex_format(out: Outcome) -> str:
    bib = out.file("clean.bib").decode()
    keys = re.findall(r"@\w+\{([^,]+),", bib)
    require(len(keys) == 3 and "smith2020dup" not in keys, f"entries {keys}")
    years = re.findall(r"year\s*=\s*\{?(\d{4})", bib)
    require(years[:2] == ["2023", "2020"], f"years in order {years}")
    return "duplicate removed, newest first"


def check_bibtex_validate(out: Outcome) -> str:
    report = json_file(out, "validation_report.json")
    require(report["total_entries"] == 4, f"entries {report['total_entries']}")
    require(report["duplicates"], "duplicate not found")
    errors = json.dumps(report["errors"])
    require("nobody" in errors, f"missing fields of 'nobody' not reported: {errors[:300]}")
    return "4 entries, the duplicate and the incomplete book reported"


def check_resources(out: Outcome) -> str:
    res = json_file(out, ".claude_resources.json")
    require(res["cpu"]["logical_cores"] >= 1 and res["gpu"]["total_gpus"] == 0, str(res["cpu"]))
    require(res["memory"]["total_gb"] > 0, str(res["memory"]))
    return f"{res['cpu']['logical_cores']} cores, {res['memory']['total_gb']} GB, no GPU"


AE_ROWS = [  # treatment_arm, any_ae, related, serious, fatal, discontinuation
    ("Drug", "yes", "yes", "no", "no", "no"), ("Drug", "yes", "no", "yes", "no", "yes"),
    ("Drug", "no", "no", "no", "no", "no"), ("Drug", "yes", "yes", "yes", "yes", "no"),
    ("Placebo", "yes", "no", "no", "no", "no"), ("Placebo", "no", "no", "no", "no", "no"),
]


def make_ae(folder: Path) -> list[str]:
    lines = ["subject,treatment_arm,any_ae,related,serious,fatal,discontinuation"]
    lines += [f"S{n:03d},{','.join(row)}" for n, row in enumerate(AE_ROWS)]
    return [_write(folder, "adverse_events.csv", "\n".join(lines) + "\n")]


def check_ae(out: Outcome) -> str:
    table = out.file("ae_table.md").decode()
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Category")}
    header = [c.strip() for c in table.splitlines()[0].split("|")[2:-1]]
    require(header == ["Drug", "Placebo"], f"arms {header}")
    require(rows["Total N"] == ["4", "2"], f"totals {rows['Total N']}")
    require(rows["Any AE"] == ["3 (75.0%)", "1 (50.0%)"], f"any AE {rows['Any AE']}")
    require(rows["Serious AE"] == ["2 (50.0%)", "0 (0.0%)"], f"serious {rows['Serious AE']}")
    require(rows["Deaths"] == ["1 (25.0%)", "0 (0.0%)"], f"deaths {rows['Deaths']}")
    return "counts and percentages per arm"


CLINICAL_NOTE = """Case report
Patient: Smith, John was seen by Dr. Alvarez on 03/14/2025.
Phone 555-123-4567, email john.smith@example.org, SSN 123-45-6789.
A 93 year old relative was also present.
"""


def check_deid(out: Outcome) -> str:
    report = json_file(out, "deid.json")
    require(report["status"] != "COMPLIANT", f"status {report['status']}")
    found = set(report["identifier_violations"]["violations"])
    wanted = {"1_names", "3_dates", "4_telephone", "6_email", "7_ssn"}
    require(wanted <= found, f"found {sorted(found)}")
    require(report["age_compliance"]["ages_over_89"] >= 1, str(report["age_compliance"]))
    return "names, date, phone, email, SSN and the age over 89 flagged, exit 1"


def make_office_folder(folder: Path) -> list[str]:
    _write(folder, "docs/deck.pptx", pptx_bytes(DECK))
    _write(folder, "docs/charter.docx", docx_bytes(DOC_PARAGRAPHS))
    return ["docs"]


def check_markdown(out: Outcome) -> str:
    md = {p: out.files[p].decode() for p in out.files if p.startswith("markdown/") and p.endswith(".md")}
    require(set(md) == {"markdown/deck.md", "markdown/charter.md"}, f"files {sorted(out.files)[:10]}")
    for title in DECK:
        require(title in md["markdown/deck.md"], f"{title!r} not in deck.md")
    for text in DOC_PARAGRAPHS:
        require(text in md["markdown/charter.md"], f"{text!r} not in charter.md")
    return "deck.md with the 5 slide titles, charter.md with the 3 paragraphs"


DE_GENES = [f"gene{i}" for i in range(5)]  # 8x higher in the treated samples


def make_deseq(folder: Path) -> list[str]:
    samples = [f"s{i}" for i in range(8)]
    condition = ["control"] * 4 + ["treated"] * 4
    lines = ["gene," + ",".join(samples)]  # genes x samples: the script transposes it unless --no-transpose
    for g in range(60):
        counts = []
        for n in range(len(samples)):
            base = 100 + 13 * g + (7 * n * (g % 5)) % 23  # steady across conditions, a little noise
            counts.append(base * 8 if (g < 5 and condition[n] == "treated") else base)
        lines.append(f"gene{g}," + ",".join(map(str, counts)))
    meta = ["sample,condition"] + [f"{s},{c}" for s, c in zip(samples, condition)]
    return [_write(folder, "counts.csv", "\n".join(lines) + "\n"),
            _write(folder, "metadata.csv", "\n".join(meta) + "\n")]


def check_deseq(out: Outcome) -> str:
    sig = read_csv(out.file("results/significant_genes.csv"))
    genes = {next(iter(r.values())) for r in sig}
    require(set(DE_GENES) <= genes, f"significant {sorted(genes)[:10]}")
    require(len(genes - set(DE_GENES)) <= 2, f"{len(genes) - 5} other genes called significant")
    for r in sig:
        if next(iter(r.values())) in DE_GENES:
            require(near(float(r["log2FoldChange"]), 3.0, 0.5), f"log2FC {r['log2FoldChange']}")
    return "the 5 eightfold genes significant with log2FC about 3"


SLIDE_COLOURS = [(200, 30, 30), (30, 160, 60), (40, 70, 200)]


def make_slide_images(folder: Path) -> list[str]:
    """Three 1600x900 slide images, each one colour, named so their sort order is the slide order."""
    from PIL import Image

    for n, colour in enumerate(SLIDE_COLOURS, start=1):
        buf = io.BytesIO()
        Image.new("RGB", (1600, 900), colour).save(buf, "PNG")
        _write(folder, f"slides/slide_{n:02d}.png", buf.getvalue())
    return ["slides"]


def check_slides_pdf(out: Outcome) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(out.file("presentation.pdf")))
    require(len(reader.pages) == 3, f"{len(reader.pages)} pages")
    ratios = {round(float(p.mediabox.width) / float(p.mediabox.height), 3) for p in reader.pages}
    require(ratios == {round(16 / 9, 3)}, f"page aspect ratios {ratios}")
    return "3 pages at 16:9, one per image"


def make_deck_pdf(folder: Path) -> list[str]:
    return [text_pdf(folder, "presentation.pdf", ["Intro", "Method", "Results", "Thanks"])]


def check_split_pages(out: Outcome) -> str:
    pages = sorted(p for p in out.files if re.fullmatch(r"review/slide-\d{3}\.jpg", p))
    require(pages == [f"review/slide-{n:03d}.jpg" for n in range(1, 5)], f"images {sorted(out.files)[:8]}")
    sizes = {png_size(out.files[p]) for p in pages}
    require(sizes == {(round(8.5 * 150), round(11 * 150))}, f"sizes {sizes}")  # letter at --dpi 150
    return "4 pages as 1275x1650 JPEGs"


def make_talk(folder: Path) -> list[str]:
    return [_write(folder, "talk.pptx", pptx_bytes([f"Slide {n}" for n in range(1, 4)]))]


def check_talk(out: Outcome) -> str:
    require("Number of slides: 3" in out.stdout, out.stdout[:400])
    require(re.search(r"Fewer slides \(3\) than recommended", out.stdout), out.stdout[-600:])
    require("Validation PASSED" in out.stdout, out.stdout[-300:])
    return "3 slides counted, too few for a 15-minute talk (a warning), no issue"


# --- the tasks -----------------------------------------------------------------------------------------

RDKIT_RENAME = ("the script calls Descriptors.FractionCsp3; current RDKit (2026.09.1 resolved here) has only "
                "FractionCSP3, and the skill pins no version (SKILL.md: `uv pip install rdkit`)")

A_PDF = "anthropics-skills/skills/pdf"
A_DOCX = "anthropics-skills/skills/docx"
A_PPTX = "anthropics-skills/skills/pptx"
A_XLSX = "anthropics-skills/skills/xlsx"
A_CREATOR = "anthropics-skills/skills/skill-creator"
O_CREATOR = "openai-skills/skills/.system/skill-creator"
K = "k-dense-scientific-skills/scientific-skills/"

TASKS = [
    Task("pdf-check-fillable", "pdf", A_PDF, "scripts/check_fillable_fields.py", ["form.pdf"],
         lambda d: [fillable_form(d)], check_fillable_yes, "forms.md:4"),
    Task("pdf-check-not-fillable", "pdf", A_PDF, "scripts/check_fillable_fields.py", ["paper-form.pdf"],
         lambda d: [plain_form(d)], check_fillable_no, "forms.md:4", interface="cli"),
    Task("pdf-extract-fields", "pdf", A_PDF, "scripts/extract_form_field_info.py", ["form.pdf", "field_info.json"],
         lambda d: [fillable_form(d)], check_field_info, "forms.md:8"),
    Task("pdf-fill-fields", "pdf", A_PDF, "scripts/fill_fillable_fields.py",
         ["form.pdf", "field_values.json", "filled.pdf"], make_fill_values, check_filled, "forms.md:75"),
    Task("pdf-fill-fields-cli", "pdf", A_PDF, "scripts/fill_fillable_fields.py",
         ["form.pdf", "field_values.json", "filled.pdf"], make_fill_values, check_filled, "forms.md:75",
         interface="cli"),
    Task("pdf-fill-refuses-bad-values", "pdf", A_PDF, "scripts/fill_fillable_fields.py",
         ["form.pdf", "field_values.json", "filled.pdf"], make_bad_fill_values, check_fill_refused,
         "forms.md:75-76", exit_code=1),
    Task("pdf-form-structure", "pdf", A_PDF, "scripts/extract_form_structure.py",
         ["paper-form.pdf", "form_structure.json"], lambda d: [plain_form(d)], check_structure, "forms.md:84"),
    Task("pdf-check-bounding-boxes", "pdf", A_PDF, "scripts/check_bounding_boxes.py", ["fields.json"],
         make_overlapping_boxes, check_boxes, "forms.md:166"),
    Task("pdf-fill-annotations", "pdf", A_PDF, "scripts/fill_pdf_form_with_annotations.py",
         ["paper-form.pdf", "fields.json", "filled.pdf"], make_annotation_fill, check_annotations, "forms.md:284",
         interface="magic"),
    Task("pdf-validation-image", "pdf", A_PDF, "scripts/create_validation_image.py",
         ["1", "fields.json", "page_1.png", "validation.png"], make_validation_image, check_validation_image,
         "script usage (forms.md names the step)"),
    Task("pdf-pages-to-png", "pdf", A_PDF, "scripts/convert_pdf_to_images.py", ["report.pdf", "."],
         lambda d: [text_pdf(d, "report.pdf", ["One", "Two", "Three"])], check_page_images, "forms.md:54",
         timeout=120, memory="1g", office=True),
    Task("docx-unpack", "docx", A_DOCX, "scripts/office/unpack.py", ["document.docx", "unpacked/"], make_docx,
         check_unpacked_docx, "SKILL.md:36"),
    Task("docx-pack", "docx", A_DOCX, "scripts/office/pack.py",
         ["unpacked/", "output.docx", "--original", "document.docx"], make_unpacked_docx, check_packed_docx,
         "SKILL.md:438", timeout=120),
    Task("docx-comment", "docx", A_DOCX, "scripts/comment.py", ["unpacked/", "0", "Needs a source"],
         make_unpacked_for_comment, check_comment, "SKILL.md:430", interface="magic"),
    Task("docx-validate", "docx", A_DOCX, "scripts/office/validate.py", ["document.docx"], schema_valid_docx,
         check_validate_docx, "SKILL.md:77", timeout=120),
    Task("docx-validate-finds-error", "docx", A_DOCX, "scripts/office/validate.py", ["document.docx"], make_docx,
         check_validate_docx_error, "SKILL.md:77", timeout=120, exit_code=1),
    Task("docx-accept-changes", "docx", A_DOCX, "scripts/accept_changes.py", ["tracked.docx", "accepted.docx"],
         make_tracked, check_accepted, "SKILL.md:51", timeout=120, memory="1g", office=True),
    Task("docx-to-pdf", "docx", A_DOCX, "scripts/office/soffice.py",
         ["--headless", "--convert-to", "pdf", "report.docx"], make_paged_docx, check_docx_pdf, "SKILL.md:42",
         timeout=120, memory="1g", office=True, interface="cli"),
    Task("xlsx-recalc", "xlsx", A_XLSX, "scripts/recalc.py", ["budget.xlsx", "30"],
         lambda d: [workbook_with_formulas(d)], check_recalc, "SKILL.md:217", timeout=120, memory="1g",
         office=True),
    Task("xlsx-recalc-two-sheets", "xlsx", A_XLSX, "scripts/recalc.py", ["orders.xlsx"],
         lambda d: [workbook_two_sheets(d)], check_recalc_two_sheets, "SKILL.md:139", timeout=120, memory="1g",
         office=True, interface="magic"),
    Task("xlsx-unpack", "xlsx", A_XLSX, "scripts/office/unpack.py", ["orders.xlsx", "unpacked/"],
         lambda d: [workbook_two_sheets(d)], check_unpacked_xlsx, "scripts/office/unpack.py usage"),
    Task("pptx-thumbnails", "pptx", A_PPTX, "scripts/thumbnail.py", ["deck.pptx"], make_deck, check_thumbnails,
         "SKILL.md:26", timeout=120, memory="1g", office=True),
    Task("pptx-unpack", "pptx", A_PPTX, "scripts/office/unpack.py", ["deck.pptx", "unpacked/"], make_deck,
         check_unpacked_pptx, "SKILL.md:29"),
    Task("pptx-add-slide", "pptx", A_PPTX, "scripts/add_slide.py", ["unpacked/", "slide2.xml"],
         make_unpacked_deck, check_added_slide, "editing.md:67"),
    Task("pptx-clean", "pptx", A_PPTX, "scripts/clean.py", ["unpacked/"], make_orphan_deck, check_cleaned,
         "editing.md:76"),
    Task("pptx-pack", "pptx", A_PPTX, "scripts/office/pack.py",
         ["unpacked/", "output.pptx", "--original", "deck.pptx"], make_deck_to_pack, check_packed_pptx,
         "editing.md:84", timeout=120),
    Task("anthropic-skill-validate", "developer", A_CREATOR, "scripts/quick_validate.py", ["notes-helper"],
         lambda d: [skill_folder(d)], check_valid_skill, "script usage (SKILL.md names it)"),
    Task("anthropic-skill-package", "developer", A_CREATOR, "scripts/package_skill.py", ["notes-helper"],
         lambda d: [skill_folder(d)], lambda o: skill_zip(o, "notes-helper.skill"), "SKILL.md:413",
         interface="cli"),
    Task("anthropic-aggregate-benchmark", "developer", A_CREATOR, "scripts/aggregate_benchmark.py",
         ["iteration-1", "--skill-name", "notes-helper"], make_review_workspace, check_aggregate, "SKILL.md:229"),
    Task("anthropic-eval-viewer", "developer", A_CREATOR, "eval-viewer/generate_review.py",
         ["iteration-1", "--skill-name", "notes-helper", "--static", "review.html"], make_review_workspace,
         check_review, "SKILL.md:238,245"),
    Task("anthropic-loop-report", "developer", A_CREATOR, "scripts/generate_report.py",
         ["-", "-o", "report.html", "--skill-name", "notes-helper"], lambda d: [], check_loop_report,
         "script usage (input: run_loop.py's JSON, `-` for stdin)", interface="magic",
         stdin=json.dumps(LOOP_OUTPUT)),
    Task("openai-skill-init", "developer", O_CREATOR, "scripts/init_skill.py",
         ["report-writer", "--path", ".", "--resources", "scripts,references", "--examples"], lambda d: [],
         check_init_skill, "SKILL.md:284", interface="magic"),
    Task("openai-skill-validate-bad", "developer", O_CREATOR, "scripts/quick_validate.py", ["bad-skill"],
         make_bad_skill, check_invalid_skill, "script usage", exit_code=1),
    Task("openai-skill-package", "developer", O_CREATOR, "scripts/package_skill.py", ["notes-helper", "./dist"],
         lambda d: [skill_folder(d)], lambda o: skill_zip(o, "dist/notes-helper.skill"), "SKILL.md:348"),
    Task("webapp-with-server", "developer", "anthropics-skills/skills/webapp-testing", "scripts/with_server.py",
         ["--server", "python3 -m http.server 8765 --directory site", "--port", "8765", "--", "python3",
          "fetch_page.py"], make_site, check_served, "SKILL.md:41", guard=False),
    Task("rdkit-properties", "scientific", K + "rdkit", "scripts/molecular_properties.py",
         [MOLECULES["aspirin"][0]], lambda d: [], check_mw_single, "script usage", timeout=90,
         known_failure=RDKIT_RENAME),
    Task("rdkit-properties-file", "scientific", K + "rdkit", "scripts/molecular_properties.py",
         ["--file", "molecules.smi", "--output", "properties.csv"], lambda d: [smiles_file(d)], check_mw_file,
         "script usage", timeout=90, interface="magic", known_failure=RDKIT_RENAME),
    Task("rdkit-substructure", "scientific", K + "rdkit", "scripts/substructure_filter.py",
         ["molecules.smi", "--pattern", "c1ccccc1", "--output", "aromatic.smi"], lambda d: [smiles_file(d)],
         check_substructure, "script usage", timeout=90),
    Task("rdkit-similarity", "scientific", K + "rdkit", "scripts/similarity_search.py",
         ["Oc1ccccc1C", "molecules.smi", "--threshold", "0.3", "--output", "hits.csv"],
         lambda d: [smiles_file(d)], check_similarity, "script usage", timeout=90),
    Task("medchem-rule-of-five", "scientific", K + "medchem", "scripts/filter_molecules.py",
         ["input.csv", "--rules", "rule_of_five", "--output", "filtered.csv"], make_medchem, check_medchem,
         "SKILL.md:397", timeout=180, memory="1g"),
    Task("pymatgen-convert", "scientific", K + "pymatgen", "scripts/structure_converter.py",
         ["POSCAR", "structure.cif"], lambda d: [_write(d, "POSCAR", NACL_POSCAR)], check_cif, "SKILL.md:161",
         timeout=120, memory="1g",
         known_failure="the script's argparse takes `input` as nargs='+' before the optional `output`, so "
                       "structure.cif is swallowed as a second input (then dropped: no such file)"),
    Task("pymatgen-convert-format", "scientific", K + "pymatgen", "scripts/structure_converter.py",
         ["POSCAR", "--format", "cif"], lambda d: [_write(d, "POSCAR", NACL_POSCAR)],
         lambda o: check_cif(o, "POSCAR.cif"), "SKILL.md:164 (--format)", timeout=120, memory="1g"),
    Task("pymatgen-symmetry", "scientific", K + "pymatgen", "scripts/structure_analyzer.py",
         ["POSCAR", "--symmetry", "--export", "json"], lambda d: [_write(d, "POSCAR", NACL_POSCAR)],
         check_symmetry, "SKILL.md:208", timeout=120, memory="1g", interface="cli"),
    Task("dicom-metadata", "scientific", K + "pydicom", "scripts/extract_metadata.py",
         ["scan.dcm", "--output", "metadata.txt"], lambda d: [dicom_file(d)], check_dicom_meta, "SKILL.md:390"),
    Task("dicom-anonymize", "scientific", K + "pydicom", "scripts/anonymize_dicom.py",
         ["scan.dcm", "anonymous.dcm"], lambda d: [dicom_file(d)], check_anonymized, "SKILL.md:374",
         interface="cli"),
    Task("dicom-to-png", "scientific", K + "pydicom", "scripts/dicom_to_image.py", ["scan.dcm", "scan.png"],
         lambda d: [dicom_file(d)], check_dicom_png, "SKILL.md:381"),
    Task("scanpy-qc", "scientific", K + "scanpy", "scripts/qc_analysis.py",
         ["counts.csv", "--output", "filtered.h5ad", "--mt-threshold", "5", "--min-genes", "200", "--min-cells",
          "3"], lambda d: [counts_csv(d)], check_qc, "SKILL.md:314", timeout=240, memory="2g"),
    Task("eda-report", "scientific", K + "exploratory-data-analysis", "scripts/eda_analyzer.py",
         ["sales.csv", "report.md"], lambda d: [sales_csv(d)], check_eda, "SKILL.md:390", timeout=90,
         memory="1g"),
    Task("bibtex-format", "scientific", K + "citation-management", "scripts/format_bibtex.py",
         ["references.bib", "--deduplicate", "--sort", "year", "--descending", "--output", "clean.bib"],
         lambda d: [_write(d, "references.bib", BIBTEX)], check_bibtex_format, "SKILL.md:268-288"),
    Task("bibtex-validate", "scientific", K + "citation-management", "scripts/validate_citations.py",
         ["references.bib", "--report", "validation_report.json", "--verbose"],
         lambda d: [_write(d, "references.bib", BIBTEX)], check_bibtex_validate, "SKILL.md:318",
         interface="cli", exit_code=1),  # exit 1: the file has errors (on purpose)
    Task("clinical-ae-table", "scientific", K + "clinical-reports", "scripts/format_adverse_events.py",
         ["adverse_events.csv", "--output", "ae_table.md"], make_ae, check_ae, "SKILL.md:1070 (script usage)"),
    Task("clinical-deidentification", "scientific", K + "clinical-reports", "scripts/check_deidentification.py",
         ["note.txt", "--output", "deid.json"], lambda d: [_write(d, "note.txt", CLINICAL_NOTE)], check_deid,
         "SKILL.md:1069 (script usage)", exit_code=1, interface="cli"),  # exit 1: identifiers found
    Task("markitdown-batch", "docx", K + "markitdown", "scripts/batch_convert.py", ["docs", "markdown"],
         make_office_folder, check_markdown, "SKILL.md:475 (script usage)", timeout=120, memory="1g"),
    Task("pydeseq2-contrast", "scientific", K + "pydeseq2", "scripts/run_deseq2_analysis.py",
         ["--counts", "counts.csv", "--metadata", "metadata.csv", "--design", "~condition", "--contrast",
          "condition", "treated", "control", "--output", "results/"], make_deseq, check_deseq, "SKILL.md:287",
         timeout=240, memory="1g",
         known_failure="the script calls DeseqStats.lfc_shrink() without the `coeff` argument current pydeseq2 "
                       "requires (the skill pins no pydeseq2 version)"),
    Task("pydeseq2-contrast-no-shrink", "scientific", K + "pydeseq2", "scripts/run_deseq2_analysis.py",
         ["--counts", "counts.csv", "--metadata", "metadata.csv", "--design", "~condition", "--contrast",
          "condition", "treated", "control", "--output", "results/", "--no-shrink"], make_deseq, check_deseq,
         "SKILL.md:287 plus the script's --no-shrink", timeout=240, memory="1g"),
    Task("slides-images-to-pdf", "pdf", K + "scientific-slides", "scripts/slides_to_pdf.py",
         ["slides/", "-o", "presentation.pdf"], make_slide_images, check_slides_pdf, "SKILL.md:252",
         host_libs=("PIL", "pypdf")),
    Task("slides-pdf-to-images", "pdf", K + "scientific-slides", "scripts/pdf_to_images.py",
         ["presentation.pdf", "review/slide", "--dpi", "150"], make_deck_pdf, check_split_pages, "SKILL.md:567",
         timeout=120, memory="1g", interface="cli", host_libs=("reportlab", "PIL")),
    Task("slides-validate-pptx", "pptx", K + "scientific-slides", "scripts/validate_presentation.py",
         ["talk.pptx", "--duration", "15"], make_talk, check_talk, "SKILL.md:650 (a .pptx: the script takes PDF, "
         "PPTX or TEX)", host_libs=("pptx",)),
    Task("detect-resources", "scientific", K + "get-available-resources", "scripts/detect_resources.py", [],
         lambda d: [], check_resources, "SKILL.md:156"),
]


# --- running -------------------------------------------------------------------------------------------


BACKEND = "docker"  # --backend local runs the same tasks on the local backend


def _settings():
    from ipyskills.settings import Settings

    # Only the task's skill in view; no warm pool, so nothing is started ahead of time and left over.
    return Settings(default_roots=False, bundled_skills=False, pool_size=0, backend=BACKEND)


def skill_name(skill_dir: Path) -> str:
    from ipyskills import SkillRegistry

    metas = SkillRegistry([skill_dir], settings=_settings()).list()
    if not metas:
        raise CheckFailed(f"no skill found in {skill_dir}")
    return metas[0].name


def run_api(task: Task, skill_dir: Path, work: Path, inputs: list[str]) -> Outcome:
    from ipyskills import SkillRegistry

    reg = SkillRegistry([skill_dir], settings=_settings())
    start = time.monotonic()
    result = reg.run(skill_name(skill_dir), task.script, args=task.args, inputs=[work / i for i in inputs],
                     stdin=task.stdin, timeout=task.timeout, memory=task.memory, deps="auto", guard=task.guard)
    files = {a.path: a.data for a in result.artifacts if a.data is not None}
    return Outcome(result.exit_code, result.stdout, result.stderr, files, result.notice,
                   time.monotonic() - start)


def _read_saved(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_cli(task: Task, skill_dir: Path, work: Path, inputs: list[str]) -> Outcome:
    saved = work.parent / "saved"
    cmd = [sys.executable, "-m", "ipyskills", "run", "--dir", str(skill_dir), "--backend", BACKEND,
           "--timeout", str(task.timeout), "--deps", "auto", "--save", str(saved), "--json"]
    if task.stdin is None:
        cmd.append("--no-stdin")
    if task.memory:
        cmd += ["--memory", task.memory]
    if not task.guard:
        cmd.append("--no-guard")
    for name in inputs:
        cmd += ["--input", str(work / name)]
    cmd += [skill_name(skill_dir), task.script, *task.args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    env["IPYSKILLS_POOL_SIZE"] = "0"
    start = time.monotonic()
    proc = subprocess.run(cmd, input=task.stdin or "", capture_output=True, text=True, env=env, cwd=work.parent,
                          timeout=task.timeout + 900)
    seconds = time.monotonic() - start
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        first = (proc.stderr.strip().splitlines() or [proc.stdout.strip()[:200]])[-1]
        raise CheckFailed(f"ipyskills run exited {proc.returncode} without a JSON result: {first}") from None
    return Outcome(data["exit_code"], data["stdout"], data["stderr"], _read_saved(saved) if saved.is_dir() else {},
                   data.get("notice", ""), seconds)


class Kernel:
    """A real IPython kernel (jupyter_client) with `%load_ext ipyskills`, for `%%skill_run` tasks."""

    def __init__(self, folder: Path):
        from jupyter_client.manager import start_new_kernel

        env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
        env.update(HOME=str(folder), IPYTHONDIR=str(folder / ".ipython"), IPYSKILLS_POOL_SIZE="0")
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(folder), env=env, startup_timeout=120,
                                            stderr=subprocess.DEVNULL)  # its transport warning
        self.execute("%load_ext ipyskills\n%config IPySkills.bundled_skills = False\n"
                     "%config IPySkills.default_roots = False")

    def execute(self, code: str, timeout: float = 900) -> tuple[str, str]:
        """Run a cell; (its stream text, the first error line or '')."""
        msg_id = self.kc.execute(code)
        text, error = [], ""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                text.append(content["text"])
                if content["text"].startswith("UsageError"):  # magics report usage errors on stderr
                    error = error or content["text"].strip().splitlines()[0]
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(text), error

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)


def run_magic(task: Task, skill_dir: Path, work: Path, inputs: list[str], kernel: Kernel) -> Outcome:
    import shlex

    saved = work.parent / "saved"
    _, error = kernel.execute(f"%skills add {shlex.quote(str(skill_dir))}")
    if error:
        raise CheckFailed(f"%skills add: {error}")
    options = [f"--timeout {task.timeout:g}", "--deps auto", f"--backend {BACKEND}",
               f"--save {shlex.quote(str(saved))}"]
    if task.memory:
        options.append(f"--memory {task.memory}")
    if not task.guard:
        options.append("--no-guard")
    options += [f"--input {shlex.quote(str(work / name))}" for name in inputs]
    line = " ".join([*options, skill_name(skill_dir), task.script, *map(shlex.quote, task.args)])
    # The cell magic when the script reads standard input (the cell body is its stdin), else the line magic.
    magic = f"%%skill_run -o _task_result {line}\n{task.stdin}" if task.stdin is not None else \
        f"%skill_run -o _task_result {line}"
    start = time.monotonic()
    _, error = kernel.execute(magic)
    seconds = time.monotonic() - start
    if error:
        raise CheckFailed(f"{magic.split()[0]}: {error}")
    text, error = kernel.execute("import json as _j; print(_j.dumps({k: getattr(_task_result, k) for k in "
                                 "('exit_code', 'stdout', 'stderr', 'notice')}))")
    if error:
        raise CheckFailed(f"reading the result: {error}")
    data = json.loads(text.strip().splitlines()[-1])
    return Outcome(data["exit_code"], data["stdout"], data["stderr"], _read_saved(saved) if saved.is_dir() else {},
                   data["notice"], seconds)


def first_error_line(text: str) -> str:
    """The line that says what went wrong: the last exception line of a traceback (`ValueError: ...`), else
    the last line that looks like an error, else the last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for pattern in (r"[A-Za-z_][\w.]*(Error|Exception|Exit): ", r"[A-Za-z_.]*(Error|Exception)\b|Error:|ERROR"):
        for line in reversed(lines):
            if re.match(pattern, line):
                return line[:200]
    return (lines[-1] if lines else "")[:200]


def run_task(task: Task, root: Path, vendored: bool = False, kernel_factory=None) -> dict:
    """Run one task through its interface; a row for the table (never raises for a task's failure)."""
    skill_dir = task.skill_dir(root, vendored)
    row = {"task": task.name, "area": task.area, "interface": task.interface, "guard": task.guard, "skill": task.skill,
           "script": task.script, "args": task.args, "usage": task.usage, "ok": False, "seconds": 0.0,
           "exit_code": None, "detail": ""}
    if not (skill_dir / task.script).is_file():
        row["detail"] = f"not found: {skill_dir / task.script}"
        return row
    scratch = Path(tempfile.mkdtemp(prefix=f"real-task-{task.name}-"))
    os.chmod(scratch, 0o755)
    work = scratch / "inputs"
    work.mkdir()
    start = time.monotonic()
    kernel = None
    try:
        inputs = task.make(work)
        if task.interface == "cli":
            out = run_cli(task, skill_dir, work, inputs)
        elif task.interface == "magic":
            kernel = (kernel_factory or Kernel)(scratch)
            out = run_magic(task, skill_dir, work, inputs, kernel)
        else:
            out = run_api(task, skill_dir, work, inputs)
        row["exit_code"] = out.exit_code
        row["run_seconds"] = round(out.seconds, 1)  # the call itself; `seconds` also counts inputs and a kernel
        row["provisioned"] = "installed" in out.notice
        if out.exit_code != task.exit_code:
            raise CheckFailed(f"exit {out.exit_code} (expected {task.exit_code}): "
                              f"{first_error_line(out.stderr) or first_error_line(out.stdout)}")
        row["verified"] = task.check(out)
        row["ok"] = True
    except CheckFailed as exc:
        row["detail"] = str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - every failure is a row with its reason
        row["detail"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
    finally:
        if kernel is not None and kernel_factory is None:
            kernel.close()
        row["seconds"] = round(time.monotonic() - start, 1)
        shutil.rmtree(scratch, ignore_errors=True)
    return row


def print_table(rows: list[dict], out=sys.stdout) -> None:
    print(f"{'task':<30} {'interface':<9} {'result':<6} {'seconds':>7}  detail", file=out)
    for r in rows:
        detail = r.get("verified", "") if r["ok"] else r["detail"]
        print(f"{r['task']:<30} {r['interface']:<9} {'ok' if r['ok'] else 'FAIL':<6} {r['seconds']:>7.1f}  "
              f"{detail}", file=out)
    ok = sum(r["ok"] for r in rows)
    by = {}
    for r in rows:
        by.setdefault(r["interface"], [0, 0])
        by[r["interface"]][0] += r["ok"]
        by[r["interface"]][1] += 1
    print(f"\n{ok} of {len(rows)} tasks passed; " + ", ".join(f"{k} {a}/{b}" for k, (a, b) in sorted(by.items())),
          file=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("published", nargs="?", type=Path, default=Path("/tmp/published"),
                        help="folder holding the exported collections (default /tmp/published)")
    parser.add_argument("--json", metavar="OUT", help="write every row as JSON")
    parser.add_argument("--only", default="", help="comma-separated task names (or prefixes ending in *)")
    parser.add_argument("--interface", choices=("run", "cli", "magic"), help="only the tasks using it")
    parser.add_argument("--vendored", action="store_true", help="use the skills in tests/published/vendored")
    parser.add_argument("--backend", choices=("docker", "local"), default="docker",
                        help="where the scripts run (default docker; the office tasks need its office image)")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    args = parser.parse_args(argv)
    global BACKEND
    BACKEND = args.backend
    tasks = select(TASKS, args.only, args.interface)
    if args.vendored:
        tasks = [t for t in tasks if t.skill_dir(args.published, True).is_dir()]
    if args.list:
        for t in tasks:
            print(f"{t.name:<30} {t.interface:<6} {t.skill}/{t.script} {' '.join(t.args)}  [{t.usage}]")
        return 0
    if not args.vendored and not args.published.is_dir():
        parser.error(f"not a folder: {args.published} (export the collections there first; see the docstring)")
    if not tasks:
        parser.error("no task matches")
    rows = []
    for task in tasks:
        row = run_task(task, args.published, args.vendored)
        rows.append(row)
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {row['seconds']:6.1f}s {task.interface:<5} {task.name}  "
              f"{row.get('verified', '') if row['ok'] else row['detail']}", flush=True)
    print()
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


def select(tasks: list[Task], only: str, interface: str | None = None) -> list[Task]:
    wanted = [w.strip() for w in only.split(",") if w.strip()]

    def matches(t: Task) -> bool:
        return not wanted or any(t.name == w or (w.endswith("*") and t.name.startswith(w[:-1])) for w in wanted)

    return [t for t in tasks if matches(t) and (interface is None or t.interface == interface)]


if __name__ == "__main__":
    sys.exit(main())

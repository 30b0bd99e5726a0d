"""Draw one PDF page per stdin line (reportlab), add a cover (pypdf), extract every page's text (pdfplumber)."""

import argparse
import io
import json
import os
import sys

import pdfplumber
from pypdf import PdfReader, PdfWriter
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas


def draw(lines):
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    for line in lines:
        pdf.setFont("Helvetica", 14)
        pdf.drawString(72, 760, line)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--title", default="Document")
    args = parser.parse_args()
    lines = [line.strip() for line in sys.stdin if line.strip()]
    if not lines:
        parser.error("give the page texts on stdin, one line a page")

    cover = PdfReader(io.BytesIO(draw([args.title])))
    body = PdfReader(io.BytesIO(draw(lines)))
    writer = PdfWriter()
    for page in [*cover.pages, *body.pages]:
        writer.add_page(page)
    writer.add_metadata({"/Title": args.title})
    path = os.path.join(os.environ.get("IPYSKILLS_OUTPUT", "."), "roundtrip.pdf")
    with open(path, "wb") as fh:
        writer.write(fh)

    with pdfplumber.open(path) as pdf:
        texts = [(page.extract_text() or "").strip() for page in pdf.pages]
    title = PdfReader(path).metadata.title
    print(json.dumps({"file": "roundtrip.pdf", "title": title, "pages": len(texts), "text": texts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

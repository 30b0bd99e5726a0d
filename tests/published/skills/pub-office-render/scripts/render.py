"""Two-page .docx (python-docx) -> PDF (soffice --headless --convert-to pdf) -> one PNG a page (pdftoppm)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from docx import Document
from docx.enum.text import WD_BREAK


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--text", action="append", default=[], help="one page's text (repeatable)")
    parser.add_argument("--dpi", type=int, default=30)
    args = parser.parse_args()
    pages = args.text or ["Page one", "Page two"]
    out = os.environ.get("IPYSKILLS_OUTPUT", ".")
    work = tempfile.mkdtemp(prefix="render-")
    docx_path = os.path.join(work, "letter.docx")

    document = Document()
    for index, text in enumerate(pages):
        paragraph = document.add_paragraph(text)
        if index < len(pages) - 1:
            paragraph.add_run().add_break(WD_BREAK.PAGE)
    document.save(docx_path)

    profile = "file://" + os.path.join(work, "lo-profile")  # LibreOffice needs a writable user profile
    subprocess.run(["soffice", "--headless", f"-env:UserInstallation={profile}", "--convert-to", "pdf",
                    "--outdir", out, docx_path], check=True, capture_output=True, timeout=120)
    pdf_path = os.path.join(out, "letter.pdf")
    subprocess.run(["pdftoppm", "-png", "-r", str(args.dpi), pdf_path, os.path.join(out, "page")],
                   check=True, capture_output=True, timeout=60)
    images = sorted(name for name in os.listdir(out) if name.startswith("page") and name.endswith(".png"))
    print(json.dumps({"pdf": "letter.pdf", "pdf_bytes": os.path.getsize(pdf_path), "pages": len(pages),
                      "images": images}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

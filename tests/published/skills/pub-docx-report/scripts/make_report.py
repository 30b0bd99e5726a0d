"""Write a .docx with a heading and paragraphs, then read its document.xml back with defusedxml."""

import argparse
import json
import os
import sys
import zipfile

import defusedxml.ElementTree as ET
from docx import Document

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--title", default="Report")
    parser.add_argument("paragraphs", nargs="*", help="paragraph texts (default: lines of stdin)")
    args = parser.parse_args()
    paragraphs = args.paragraphs or [line.strip() for line in sys.stdin if line.strip()]
    out_dir = os.environ.get("IPYSKILLS_OUTPUT", ".")
    path = os.path.join(out_dir, "report.docx")

    document = Document()
    document.add_heading(args.title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(path)

    with zipfile.ZipFile(path) as package:
        root = ET.fromstring(package.read("word/document.xml"))
    texts = ["".join(t.text or "" for t in p.iter(W + "t")) for p in root.iter(W + "p")]
    print(json.dumps({"file": "report.docx", "paragraphs": len(texts), "text": texts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

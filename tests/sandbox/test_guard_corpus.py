"""Real-world scripts must almost never be blocked: every script shipped in this repository, plus a
corpus of typical skill scripts (document tools, data processing, setup scripts) written for this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipyskills.sandbox.guard import check_file, check_source, script_files

REPO = Path(__file__).resolve().parents[2]
SHIPPED = [p for folder in ("skills", "examples") if (REPO / folder).is_dir() for p in script_files(REPO / folder)]


def test_every_shipped_script_is_in_the_corpus():
    # Found without script_files, so a walk that finds nothing cannot turn the test below into no tests.
    scripts = {p for folder in ("skills", "examples/skills") for p in (REPO / folder).glob("*/scripts/*")
               if p.is_file() and p.suffix in (".py", ".sh", ".js")}
    assert len(scripts) >= 4 and scripts <= set(SHIPPED)


@pytest.mark.parametrize("script", SHIPPED, ids=[str(p.relative_to(REPO)) for p in SHIPPED])
def test_shipped_scripts_are_not_blocked(script):
    report = check_file(script, display_path=str(script.relative_to(REPO)))
    assert not report.blocked, [str(f) for f in report.findings]


def test_the_shipped_corpus_is_found():
    # If skills ship scripts but the walk finds none, the test above would silently check nothing.
    shipped_by_glob = list((REPO / "skills").glob("*/scripts/*.py")) + list((REPO / "examples").glob("**/*.py"))
    assert set(shipped_by_glob) <= set(SHIPPED)


TYPICAL = {
    "office_convert.py": ("python", '''\
"""Convert a document to PDF with LibreOffice, then count its pages."""
import argparse, json, shutil, subprocess, sys, tempfile
from pathlib import Path

def convert(src: Path, outdir: Path) -> Path:
    soffice = shutil.which("soffice") or shutil.which("libreoffice")
    if soffice is None:
        sys.exit("LibreOffice is not installed")
    subprocess.run([soffice, "--headless", "--convert-to", "pdf", "--outdir", str(outdir), str(src)],
                   check=True, capture_output=True, timeout=120)
    return outdir / (src.stem + ".pdf")

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("input")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pdf = convert(Path(args.input), Path(tmp))
        out = subprocess.check_output(["pdfinfo", str(pdf)], text=True)
        pages = next(int(l.split()[-1]) for l in out.splitlines() if l.startswith("Pages:"))
        print(json.dumps({"pages": pages}))
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    main()
'''),
    "analyze.py": ("python", '''\
import json, sys, statistics, re, yaml, pickle
from collections import Counter

def load(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return yaml.safe_load(text)

data = load(sys.stdin.read())
numbers = [x for x in data if isinstance(x, (int, float))]
words = Counter(re.findall(r"\\w+", " ".join(map(str, data))))
print(json.dumps({"mean": statistics.mean(numbers) if numbers else None, "top": words.most_common(3)}))
with open("cache.pkl", "wb") as fh:
    pickle.dump(words, fh)  # writing is fine; only loading untrusted pickles is dangerous
'''),
    "model_eval.py": ("python", '''\
import torch
model = torch.nn.Linear(2, 1)
model.eval()
with torch.no_grad():
    print(model(torch.zeros(1, 2)))
'''),
    "fetch_data.py": ("python", '''\
import os, requests
API = os.environ.get("API_URL", "https://api.example.com")
resp = requests.get(f"{API}/items", timeout=10)
resp.raise_for_status()
print(resp.json())
'''),
    "setup.sh": ("shell", '''\
#!/usr/bin/env bash
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/out}"
mkdir -p "$OUT"
if ! command -v jq >/dev/null 2>&1; then
  echo "jq is required" >&2
  exit 1
fi
for f in "$HERE"/data/*.json; do
  name="$(basename "$f" .json)"
  jq -r '.items[] | "\\(.id)\\t\\(.name)"' "$f" > "$OUT/$name.tsv"
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/report.md" <<END_OF_REPORT
# Report for $(date +%F)
Files: $(ls "$OUT" | wc -l)
END_OF_REPORT
python3 "$HERE/scripts/render.py" --input "$tmp/report.md" --output "$OUT/report.html"
echo "done: $OUT"
'''),
    "build_docx.js": ("javascript", '''\
const fs = require("fs");
const path = require("path");
const { Document, Packer, Paragraph, TextRun } = require("docx");

// Build a document from a JSON outline; eval() is never used here.
const outline = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const doc = new Document({
  sections: [{ children: outline.items.map((t) => new Paragraph({ children: [new TextRun(`${t}`)] })) }],
});
const match = /^(\\w+)\\.json$/.exec(path.basename(process.argv[2]));
Packer.toBuffer(doc).then((buf) => fs.writeFileSync(`${match ? match[1] : "out"}.docx`, buf));
'''),
}


@pytest.mark.parametrize("name", sorted(TYPICAL))
def test_typical_skill_scripts_are_not_blocked(name):
    language, source = TYPICAL[name]
    report = check_source(source, language, display_path=name)
    assert not report.blocked, [str(f) for f in report.findings]

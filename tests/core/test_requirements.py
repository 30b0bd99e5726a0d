"""core.requirements: what a skill needs, from each source, with file and line; skips with reasons."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from ipyskills.core import requirements as rq
from ipyskills.core.requirements import ProgramUse, Requirement, SkillRequirements, analyze

FRONT = "name: demo\ndescription: A demo skill. Use when testing.\n"


@pytest.fixture
def skill(make_skill):
    """skill(body, files={rel: text}) -> the skill folder."""

    def make(body: str = "# Demo\n", files: dict[str, str] | None = None, folder: str = "demo") -> Path:
        path = make_skill(folder, FRONT, body)
        for rel, text in (files or {}).items():
            target = path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return path

    return make


def by_name(reqs: list[Requirement]) -> dict[str, Requirement]:
    return {r.name: r for r in reqs}


def skipped_texts(result: SkillRequirements) -> dict[str, str]:
    return {text: why for text, _file, _line, why in result.skipped}


# --- PEP 723 ----------------------------------------------------------------------------------------------

PEP723 = """\
#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = [
#   "markitdown[pptx]>=0.1",
#   'pandas>=2',
# ]
# ///
print("hi")
"""


def test_pep723_dependencies_with_file_line_and_spec(skill):
    result = analyze(skill(files={"scripts/conv.py": PEP723}))
    found = by_name(result.python)
    assert found["markitdown"].spec == "markitdown[pptx]>=0.1"
    assert (found["markitdown"].source, found["markitdown"].file, found["markitdown"].line) == \
        ("pep723", "scripts/conv.py", 5)
    assert (found["pandas"].spec, found["pandas"].line) == ("pandas>=2", 6)
    assert all(r.declared for r in result.python)


def test_malformed_pep723_block_is_skipped_with_why(skill):
    bad = "# /// script\n# dependencies = [\"requests\"\n# ///\n"
    result = analyze(skill(files={"scripts/bad.py": bad}))
    assert result.python == []
    [(_text, file, line, why)] = result.skipped
    assert (file, line) == ("scripts/bad.py", 1)
    assert "malformed PEP 723 block" in why


# --- requirements files and pyproject.toml ------------------------------------------------------------------

def test_requirements_txt_lines_comments_markers_and_options(skill):
    text = ("# comment\n\nrequests>=2.31  # http\n"
            "tomli>=2; python_version < \"3.11\"\n"
            "--index-url https://example.org/simple\n"
            "-e ./local\n"
            "git+https://github.com/x/y.git\n"
            "pkg @ https://example.org/pkg.whl\n"
            "numpy==1.26 --hash=sha256:abc\n")
    result = analyze(skill(files={"scripts/requirements.txt": text}))
    found = by_name(result.python)
    assert (found["requests"].spec, found["requests"].file, found["requests"].line) == \
        ("requests>=2.31", "scripts/requirements.txt", 3)
    assert found["tomli"].spec == 'tomli>=2; python_version < "3.11"'
    assert found["numpy"].spec == "numpy==1.26"
    assert set(found) == {"requests", "tomli", "numpy"}
    why = skipped_texts(result)
    assert "pip option" in why["--index-url https://example.org/simple"]
    assert "not installable from the registry as wheels" in why["-e ./local"]
    assert "URL" in why["git+https://github.com/x/y.git"]
    assert "direct URL" in why["pkg @ https://example.org/pkg.whl"]


def test_requirements_variants_and_include_inside_the_skill(skill):
    files = {"requirements-dev.txt": "-r base/common.in\npytest\n", "base/common.in": "attrs>=23\n"}
    result = analyze(skill(files=files))
    found = by_name(result.python)
    assert (found["attrs"].file, found["attrs"].line, found["attrs"].source) == \
        ("base/common.in", 1, "requirements")
    assert "requirements-dev.txt" in found["attrs"].detail
    assert found["pytest"].file == "requirements-dev.txt"


def test_requirements_include_outside_the_skill_is_refused(skill, tmp_path):
    (tmp_path / "secret.txt").write_text("leaked-package\n")
    result = analyze(skill(files={"requirements.txt": "-r ../secret.txt\nok-package\n"}))
    assert [r.name for r in result.python] == ["ok-package"]
    [(text, file, line, why)] = result.skipped
    assert (text, file, line) == ("-r ../secret.txt", "requirements.txt", 1)
    assert "outside the skill" in why


def test_pyproject_project_dependencies(skill):
    toml = ('[build-system]\nrequires = ["hatchling"]\n\n[project]\nname = "x"\n'
            'dependencies = [\n  "httpx>=0.27",\n  "rich",\n]\n')
    result = analyze(skill(files={"pyproject.toml": toml}))
    found = by_name(result.python)
    assert set(found) == {"httpx", "rich"}  # build requirements are not run-time requirements
    assert (found["httpx"].source, found["httpx"].line, found["httpx"].spec) == ("pyproject", 7, "httpx>=0.27")


# --- SKILL.md install lines -------------------------------------------------------------------------------

SKILL_MD = """\
# Demo

## Installation

```bash
uv pip install spikeinterface[full] "pandas>=2" -U --system
pip3 install --upgrade -q --user --break-system-packages 'markitdown[pptx]'
pip install torch  # optional, for speed
# Optional: OCR support
pip install pytesseract
python -m pip install -r requirements.txt
pip install -e . git+https://github.com/a/b.git ./vendor/pkg
pip install cupy-cuda12x
pip install torch --index-url https://download.pytorch.org/whl/cu121
```

Or just `uv add httpx` and `pip install "rich>=13"`.

## Optional extras

```bash
pip install seaborn
```
"""


def test_skill_md_install_lines_keep_specifiers_and_drop_flags(skill):
    result = analyze(skill(SKILL_MD))
    found = by_name(result.python)
    assert set(found) == {"spikeinterface", "pandas", "markitdown", "httpx", "rich"}
    assert found["spikeinterface"].spec == "spikeinterface[full]"
    assert found["pandas"].spec == "pandas>=2"
    assert found["markitdown"].spec == "markitdown[pptx]"
    assert found["rich"].spec == "rich>=13"
    # frontmatter is 3 lines + '---' lines: the body's first line is line 5
    assert (found["spikeinterface"].file, found["spikeinterface"].line) == ("SKILL.md", 10)
    assert found["spikeinterface"].detail == "uv pip install line"
    assert (found["markitdown"].line, found["markitdown"].detail) == (11, "pip3 install line")
    assert (found["httpx"].line, found["httpx"].detail) == (21, "uv add line")
    assert all(r.source == "skill-md" for r in result.python)


def test_skill_md_optional_lines_are_skipped(skill):
    result = analyze(skill(SKILL_MD))
    marked = {text: line for text, _f, line, why in result.skipped if why == "marked optional"}
    assert marked == {"pip install torch": 12, "pip install pytesseract": 14, "pip install seaborn": 26}


def test_skill_md_urls_paths_gpu_and_missing_requirements_file_skipped(skill):
    result = analyze(skill(SKILL_MD))
    why = skipped_texts(result)
    assert "editable" in why["-e ."] and "wheels" in why["-e ."]
    assert "URL" in why["git+https://github.com/a/b.git"]
    assert "local path" in why["./vendor/pkg"]
    assert "GPU" in why["cupy-cuda12x"]
    assert "GPU" in why["torch"]
    assert "does not have" in why["-r requirements.txt"]


def test_skill_md_requirements_file_is_read_when_the_skill_has_it(skill):
    body = "```bash\npip install -r deps/extra.txt\n```\n"
    result = analyze(skill(body, files={"deps/extra.txt": "lxml>=5\n"}))
    [req] = result.python
    assert (req.name, req.source, req.file, req.line) == ("lxml", "requirements", "deps/extra.txt", 1)


def test_comment_above_only_counts_directly_above(skill):
    body = "```bash\n# optional\n\npip install tqdm\n```\n"
    result = analyze(skill(body))
    assert [r.name for r in result.python] == ["tqdm"]


# --- imports ----------------------------------------------------------------------------------------------

MAPPED = {
    "docx": "python-docx", "pptx": "python-pptx", "fitz": "PyMuPDF", "PIL": "pillow", "yaml": "PyYAML",
    "sklearn": "scikit-learn", "cv2": "opencv-python-headless", "Bio": "biopython", "dotenv": "python-dotenv",
    "skimage": "scikit-image", "mpl_toolkits": "matplotlib", "bs4": "beautifulsoup4",
}


def test_import_names_map_to_their_distribution(skill):
    source = "\n".join(f"import {name}.sub" if i % 2 else f"from {name} import thing"
                       for i, name in enumerate(MAPPED)) + "\n"
    result = analyze(skill(files={"scripts/use.py": source}))
    found = {r.detail.split()[1].split(".")[0]: r for r in result.python}
    assert {module: r.name for module, r in found.items()} == MAPPED
    assert all(r.source == "import" and not r.declared for r in result.python)
    assert found["docx"].line == 1 and found["pptx"].line == 2
    assert found["docx"].detail == "from docx import" and found["pptx"].detail == "import pptx.sub"


def test_generated_map_and_identity_fallback(skill):
    result = analyze(skill(files={"a.py": "import jwt_not_real_zz\nimport numpy\nimport typing_extensions\n"
                                          "import google.protobuf\n"}))
    assert sorted(r.name for r in result.python) == ["numpy", "typing-extensions"]
    why = skipped_texts(result)
    assert why["jwt_not_real_zz"] == "unknown import name jwt_not_real_zz: declare it (PEP 723 or requirements.txt)"
    assert "ambiguous" in why["google"]


def test_generated_map_is_used_for_names_not_in_the_curated_table(skill):
    assert "OpenSSL" in rq.imports.IMPORT_NAMES and "websocket" not in rq.imports.IMPORT_NAMES
    result = analyze(skill(files={"a.py": "import websocket\n"}))
    assert [r.name for r in result.python] == ["websocket-client"]


def test_stdlib_future_relative_and_skill_local_imports_are_excluded(skill):
    files = {
        "scripts/main.py": ("from __future__ import annotations\nimport os, json, sys\nimport helpers\n"
                            "from scripts import helpers as h\nfrom . import sibling\nfrom .pkg import x\n"
                            "import mylib.core\nimport requests\n"),
        "scripts/helpers.py": "",
        "lib/mylib/__init__.py": "",
    }
    result = analyze(skill(files=files))
    assert [r.name for r in result.python] == ["requests"]
    assert result.skipped == []


def test_optional_import_stays_with_a_note(skill):
    source = "try:\n    import yaml\nexcept ImportError:\n    yaml = None\ntry:\n    import lxml\nfinally:\n    pass\n"
    result = analyze(skill(files={"a.py": source}))
    found = by_name(result.python)
    assert found["PyYAML"].detail == "import yaml (optional import)"
    assert found["lxml"].detail == "import lxml"


def test_imports_inside_functions_count(skill):
    result = analyze(skill(files={"a.py": "def f():\n    import pptx\n    return pptx\n"}))
    assert [(r.name, r.line) for r in result.python] == [("python-pptx", 2)]


def test_declared_wins_over_inferred(skill):
    files = {"requirements.txt": "pyyaml>=6\n", "scripts/a.py": "import yaml\nimport docx\n"}
    result = analyze(skill(files=files))
    found = {r.key: r for r in result.python}
    assert set(found) == {"pyyaml", "python-docx"}
    assert (found["pyyaml"].source, found["pyyaml"].spec, found["pyyaml"].file) == \
        ("requirements", "pyyaml>=6", "requirements.txt")


def test_declared_precedence_pep723_first(skill):
    files = {"requirements.txt": "pandas>=1\n",
             "a.py": "# /// script\n# dependencies = ['pandas>=2']\n# ///\n"}
    result = analyze(skill("`pip install pandas`\n", files=files))
    [req] = result.python
    assert (req.source, req.spec) == ("pep723", "pandas>=2")


def test_undeclared_unknown_import_matches_a_declared_name(skill):
    files = {"requirements.txt": "zz-private-lib==1\n", "a.py": "import zz_private_lib\n"}
    result = analyze(skill(files=files))
    assert [(r.name, r.source) for r in result.python] == [("zz-private-lib", "requirements")]
    assert result.skipped == []


def test_provided_distributions_are_not_to_be_installed(skill):
    files = {"a.py": "import PIL\nimport numpy\n", "requirements.txt": "Pillow>=10\n"}
    result = analyze(skill(files=files), provided=["pillow", "NumPy"])
    assert result.python == []
    assert sorted(r.key for r in result.provided) == ["numpy", "pillow"]
    assert by_name(result.provided)["Pillow"].source == "requirements"


def test_syntax_error_file_is_skipped_with_why(skill):
    result = analyze(skill(files={"scripts/broken.py": "import docx\ndef f(:\n"}))
    assert result.python == []
    [(_text, file, line, why)] = result.skipped
    assert (file, line) == ("scripts/broken.py", 2) and "not valid Python" in why


def test_symlink_leaving_the_skill_is_not_read(skill, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("import docx\n")
    path = skill()
    (path / "scripts").mkdir()
    os.symlink(outside, path / "scripts" / "link.py")
    os.symlink(tmp_path / "outside-req.txt", path / "requirements.txt")
    (tmp_path / "outside-req.txt").write_text("leaked\n")
    result = analyze(path)
    assert result.python == []
    assert {(f, why) for _t, f, _l, why in result.skipped} == {
        ("requirements.txt", "the file is a link that leaves the skill: not read"),
        ("scripts/link.py", "the file is a link that leaves the skill: not read")}


def test_unreadable_bytes_are_noted_not_raised(skill):
    path = skill()
    (path / "bad.py").write_bytes(b"import docx\n\xff\xfe\n")
    result = analyze(path)
    assert result.python == [] and "not UTF-8" in result.skipped[0][3]


# --- programs and profile ---------------------------------------------------------------------------------

def test_programs_from_python_shell_and_skill_md(skill):
    files = {
        "scripts/convert.py": ("import subprocess, shutil, os\n"
                               "subprocess.run(['soffice', '--headless', 'x.docx'], check=True)\n"
                               "cmd = ['/usr/bin/pandoc', 'a.md']\nsubprocess.check_output(cmd)\n"
                               "os.system(f'qpdf --check {1}')\nshutil.which('node')\n"
                               "subprocess.run(['python3', 'x.py'])\n"),
        "scripts/pages.sh": "#!/bin/sh\nset -e\n# pdftotext here is a comment\nX=1 pdftoppm -png a.pdf out && echo ok\n",
    }
    result = analyze(skill("```bash\nsudo tesseract img.png out\n```\n", files=files))
    got = {(p.program, p.file, p.line) for p in result.programs}
    assert got == {("soffice", "scripts/convert.py", 2), ("pandoc", "scripts/convert.py", 4),
                   ("qpdf", "scripts/convert.py", 5), ("node", "scripts/convert.py", 6),
                   ("pdftoppm", "scripts/pages.sh", 4), ("tesseract", "SKILL.md", 6)}
    assert result.profile == "office"


def test_profile_from_a_shell_script(skill):
    result = analyze(skill(files={"run.sh": "pdftoppm -png in.pdf out\n"}))
    assert [(p.program, p.file, p.line) for p in result.programs] == [("pdftoppm", "run.sh", 1)]
    assert result.profile == "office"


def test_profile_from_compatibility_text_and_none_otherwise(skill):
    path = skill(files={"a.py": "import subprocess\nsubprocess.run(['ffmpeg', '-i', 'x'])\n"})
    assert analyze(path).profile is None  # ffmpeg is known, but not an office program
    assert [p.program for p in analyze(path).programs] == ["ffmpeg"]
    assert analyze(path, compatibility="Requires LibreOffice and Python 3.10+").profile == "office"
    assert analyze(path, compatibility="Needs network access").profile is None


def test_office_program_named_only_in_skill_md_does_not_set_the_profile(skill):
    result = analyze(skill("```bash\nsoffice --headless --convert-to pdf a.docx\n```\n"))
    assert [p.program for p in result.programs] == ["soffice"]
    assert result.profile is None


# --- results ----------------------------------------------------------------------------------------------

def test_specs_modes(skill):
    files = {"requirements.txt": "requests>=2\n", "a.py": "import docx\n"}
    result = analyze(skill(files=files))
    assert result.specs() == result.specs("auto") == ["requests>=2", "python-docx"]
    assert result.specs("declared") == ["requests>=2"]
    assert result.specs("off") == []
    with pytest.raises(ValueError):
        result.specs("everything")


def test_to_dict_json_round_trip(skill):
    files = {"requirements.txt": "requests>=2\n", "a.py": "import subprocess\nimport zzz_nope\n"
                                                          "subprocess.run(['pandoc'])\n"}
    result = analyze(skill(files=files), skill_name="demo", provided=["x"])
    data = result.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert list(data) == ["skill", "profile", "python", "provided", "skipped", "programs"]
    assert data["python"][0] == {"name": "requests", "spec": "requests>=2", "source": "requirements",
                                 "file": "requirements.txt", "line": 1, "detail": "", "declared": True,
                                 "key": "requests"}
    assert data["skipped"][0]["text"] == "zzz_nope" and data["skipped"][0]["line"] == 2
    assert data["programs"] == [{"program": "pandoc", "file": "a.py", "line": 3, "via": ""}]
    assert data["profile"] == "office" and data["skill"] == "demo"


def test_requirement_and_program_values():
    req = Requirement("Python_Docx", "Python_Docx>=1", "import", "a.py", 1)
    assert req.key == "python-docx" and not req.declared
    assert Requirement("x", "x", "skill-md", "SKILL.md", 3).declared
    assert ProgramUse("qpdf", "a.sh", 2).to_dict() == {"program": "qpdf", "file": "a.sh", "line": 2, "via": ""}


def test_threads_get_identical_results(skill):
    files = {f"scripts/s{i}.py": f"import docx\nimport yaml\nimport mod{i}_unknown\n" for i in range(40)}
    files["requirements.txt"] = "requests\n"
    path = skill(SKILL_MD, files=files)
    expected = analyze(path).to_dict()
    results, errors = [], []

    def work():
        try:
            results.append(analyze(path).to_dict())
        except Exception as exc:  # noqa: BLE001 - any failure in a thread is reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 8
    assert all(r == expected for r in results)


def test_walk_is_bounded(skill, monkeypatch):
    path = skill()
    scripts = path / "scripts"
    scripts.mkdir()
    for i in range(3000):
        (scripts / f"m{i:04d}.py").write_text(f"import zz_unknown_{i}\n")
    read = []
    original = rq._Scan.read

    def counting(self, rel):
        read.append(rel)
        return original(self, rel)

    monkeypatch.setattr(rq._Scan, "read", counting)
    result = analyze(path)
    assert len(read) <= rq.MAX_FILES
    cut = [why for text, file, line, why in result.skipped if file == "."]
    assert cut == [f"the skill has more than {rq.MAX_FILES} files: only the first {rq.MAX_FILES} were looked at"]


def test_default_provided_reads_the_base_file(tmp_path, monkeypatch):
    base = tmp_path / "base-requirements.txt"
    base.write_text("# base image\nnumpy==1.26.4\npandas>=2  # data\n\n--only-binary :all:\nPyYAML\n")
    monkeypatch.setattr(rq.records, "BASE_REQUIREMENTS", base)
    assert rq.default_provided() == frozenset({"numpy", "pandas", "PyYAML"})
    monkeypatch.setattr(rq.records, "BASE_REQUIREMENTS", tmp_path / "missing.txt")
    assert rq.default_provided() == frozenset()


def test_registry_requirements_passes_compatibility_and_provided(make_skill, tmp_path):
    from ipyskills.core.registry import SkillRegistry

    folder = make_skill("skills/office-demo", "name: office-demo\ndescription: Converts. Use for docs.\n"
                        "compatibility: Requires LibreOffice\n")
    (folder / "requirements.txt").write_text("pyyaml\nrequests\n")
    reg = SkillRegistry([tmp_path / "skills"])
    result = reg.requirements("office-demo", provided=["PyYAML"])
    assert result.skill == "office-demo" and result.profile == "office"
    assert [r.name for r in result.python] == ["requests"]
    assert [r.name for r in result.provided] == ["pyyaml"]


def test_import_map_json_is_small_and_has_its_notice():
    data = json.loads(rq.IMPORT_MAP.read_text())
    assert rq.IMPORT_MAP.stat().st_size < 300_000
    assert "MIT" in data["license"] and data["version"]
    assert data["modules"]["bs4"] == "beautifulsoup4"
    assert all(rq.normalise(k) != rq.normalise(v) for k, v in data["modules"].items())
    assert "numpy" in data["identity"] and "tests" not in data["identity"]


def test_without_tomllib_the_fallback_reads_dependencies(skill, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tomllib", None)  # `import tomllib` fails as on Python 3.10
    toml = '[project]\nname = "x"\ndependencies = [\n  "httpx>=0.27",  # client\n]\n[tool.x]\ndependencies = ["no"]\n'
    files = {"scripts/conv.py": PEP723, "pyproject.toml": toml}
    result = analyze(skill(files=files))
    assert sorted(r.spec for r in result.python) == ["httpx>=0.27", "markitdown[pptx]>=0.1", "pandas>=2"]
    assert by_name(result.python)["httpx"].line == 4


def test_cached_analysis_is_reused_until_a_file_changes(skill, monkeypatch):
    folder = skill(files={"scripts/x.py": "import tabulate\n"})
    first = rq.analyze_cached(folder, skill_name="demo")
    calls = []
    real = rq.analyze
    monkeypatch.setattr(rq.scan, "analyze", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert rq.analyze_cached(folder, skill_name="demo") is first and calls == []
    script = folder / "scripts" / "x.py"
    script.write_text("import tabulate\nimport humanize\n")
    os.utime(script, ns=(1, 1))  # even a restored old mtime: the size changed
    again = rq.analyze_cached(folder, skill_name="demo")
    assert calls == [1] and sorted(r.name for r in again.python) == ["humanize", "tabulate"]
    (folder / "scripts" / "y.py").write_text("import toolz\n")  # a new file
    assert "toolz" in [r.name for r in rq.analyze_cached(folder, skill_name="demo").python]


def test_a_package_that_runs_a_program_counts_as_calling_it(tmp_path):
    """pdf2image runs poppler's pdftoppm/pdfinfo: a script importing it needs the office image, and the
    report says which package runs the program."""
    from ipyskills.core.requirements import analyze
    from ipyskills.core.requirements_report import requirements_text

    root = tmp_path / "pdf-pages"
    (root / "scripts").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: pdf-pages\ndescription: Renders PDF pages.\n---\n# x\n")
    (root / "scripts" / "render.py").write_text("import sys\nfrom pdf2image import convert_from_path\n"
                                                "import pypandoc\n")
    reqs = analyze(root)
    assert reqs.profile == "office"
    uses = {(p.program, p.line, p.via) for p in reqs.programs}
    assert uses == {("pdftoppm", 2, "pdf2image"), ("pdfinfo", 2, "pdf2image"), ("pandoc", 3, "pypandoc")}
    assert "pdftoppm (scripts/render.py:2, via pdf2image)" in requirements_text(reqs, "auto")
    plain = tmp_path / "plain"
    (plain / "scripts").mkdir(parents=True)
    (plain / "SKILL.md").write_text("---\nname: plain\ndescription: No programs.\n---\n# x\n")
    (plain / "scripts" / "x.py").write_text("import pdfplumber\n")
    assert analyze(plain).profile is None and analyze(plain).programs == []


def test_pkg_resources_is_setuptools_which_the_image_provides(tmp_path):
    from ipyskills.core.requirements import analyze, default_provided

    root = tmp_path / "legacy"
    (root / "scripts").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: legacy\ndescription: Old-style plugin lookup.\n---\n# x\n")
    (root / "scripts" / "x.py").write_text("import pkg_resources\n")
    assert {"setuptools", "pip"} <= default_provided()
    reqs = analyze(root, provided=default_provided())
    assert [r.name for r in reqs.provided] == ["setuptools"] and reqs.python == [] and reqs.skipped == []


def test_ocr_and_ghostscript_users_get_the_office_image_which_now_has_them(tmp_path):
    """pytesseract runs tesseract and camelot runs ghostscript: both programs are in the office image now,
    so a script importing either is given that image."""
    from ipyskills.core.requirements import analyze

    root = tmp_path / "ocr"
    (root / "scripts").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: ocr\ndescription: Reads scanned pages.\n---\n# x\n")
    (root / "scripts" / "read.py").write_text("import pytesseract\n")
    reqs = analyze(root)
    assert reqs.profile == "office"
    assert {(p.program, p.via) for p in reqs.programs} == {("tesseract", "pytesseract")}
    (root / "scripts" / "read.py").write_text("import camelot\n")
    reqs = analyze(root)
    assert reqs.profile == "office" and {p.program for p in reqs.programs} == {"gs"}

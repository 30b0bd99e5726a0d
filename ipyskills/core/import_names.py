"""Import name -> PyPI distribution, for the imports skills' scripts use most, checked by hand.

What this covers: the top-level modules whose distribution has a different name (docx -> python-docx,
fitz -> PyMuPDF, PIL -> pillow, cv2 -> opencv-python-headless, ...), chosen from the document, PDF,
data-science, web and crypto libraries that published skills import. Where several distributions provide
one module, the entry names the one a headless sandbox wants (opencv-python-headless, faiss-cpu). A value
of None means the name is ambiguous (`google` is protobuf, google-auth, google-cloud-* ...): the import is
reported as skipped and the skill has to declare what it means.

Everything else goes to the generated map, `data/import_map.json`, made by `scripts/gen_import_map.py`
from pyimport2pkg's database of the top ~15,000 PyPI distributions (MIT License): module names that differ
from their distribution's name with one clear winner, plus the top ~5000 distributions whose import name
is their own name. An import found in neither is not guessed, and neither is one of GENERIC_IMPORT_NAMES
below (`base`, `utils`, `web`, ...): names that many distributions install by accident, which in a skill
are nearly always its own module or a mistake (the generated map once sent `base` to cvxopt, `exceptions`
to kestra, `web` to sqlmesh).
"""

from __future__ import annotations

IMPORT_NAMES: dict[str, str | None] = {
    # documents and PDF
    "docx": "python-docx",
    "pptx": "python-pptx",
    "fitz": "PyMuPDF",
    "pymupdf": "PyMuPDF",
    "pdfminer": "pdfminer.six",
    "pdf2image": "pdf2image",
    "pytesseract": "pytesseract",
    "markitdown": "markitdown",
    "openpyxl": "openpyxl",
    "xlsxwriter": "XlsxWriter",
    "lxml": "lxml",
    "defusedxml": "defusedxml",
    "pypdf": "pypdf",
    "PyPDF2": "PyPDF2",
    "pdfplumber": "pdfplumber",
    "docx2txt": "docx2txt",
    "reportlab": "reportlab",
    "bs4": "beautifulsoup4",
    # images and science
    "PIL": "pillow",
    "cv2": "opencv-python-headless",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "mpl_toolkits": "matplotlib",
    "Bio": "biopython",
    "rdkit": "rdkit",
    "umap": "umap-learn",
    "igraph": "igraph",
    "community": "python-louvain",
    "faiss": "faiss-cpu",
    "tensorflow": "tensorflow",
    "torch": "torch",
    "sentence_transformers": "sentence-transformers",
    "Levenshtein": "python-Levenshtein",
    # general purpose
    "yaml": "PyYAML",
    "dotenv": "python-dotenv",
    "dateutil": "python-dateutil",
    "attr": "attrs",
    "pkg_resources": "setuptools",  # below 82; in the sandbox image and every fresh Python 3.11 venv
    "jwt": "PyJWT",
    "jose": "python-jose",
    "slugify": "python-slugify",
    "multipart": "python-multipart",
    "magic": "python-magic",
    "OpenSSL": "pyOpenSSL",
    "Crypto": "pycryptodome",
    "dns": "dnspython",
    "serial": "pyserial",
    "usb": "pyusb",
    "zmq": "pyzmq",
    "gi": "PyGObject",
    "ldap": "python-ldap",
    "win32api": "pywin32",
    "telegram": "python-telegram-bot",
    "discord": "discord.py",
    # ambiguous: several unrelated distributions install this top-level name
    "google": None,
}


# The deny list: never mapped to a distribution unless the curated table above or the skill itself names
# one. scripts/gen_import_map.py leaves them out of the generated map as well.
GENERIC_IMPORT_NAMES: frozenset[str] = frozenset("""
    account accounts api app assets auth backend base benchmark benchmarks bin build cache cli client
    commands common components config configs conftest constants context core data database demo demos
    doc docs engine env environment errors example examples exceptions extras fields file files filters
    fixtures frontend handlers helper helpers images input interface internal lib libs log logger main
    manager misc model models modules output package parser path paths plugins project report reports
    resources results routes runner sample samples schemas script scripts server service services
    session setup shared src state static storage store task tasks templates test testing tests tools
    tutorials types ui user users util utils vendor version views web widgets worker
""".split())

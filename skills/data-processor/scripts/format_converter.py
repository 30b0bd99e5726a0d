#!/usr/bin/env python3
"""Convert tables between JSON (a list of objects), CSV and Markdown (GitHub pipe tables).

Reads stdin or --file and prints the converted text on stdout.
Exit codes: 0 ok, 1 bad input data (message on stderr), 2 usage error.
Standard library only; reads nothing but the input and writes nothing but stdout/stderr.
"""

import argparse
import csv
import io
import json
import math
import re
import sys

MAX_INPUT_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_ROWS = 1000
CONTAINER_KEYS = ("items", "data", "results")
FORMATS = ("json", "csv", "markdown")

SEPARATOR_CELL_RE = re.compile(r":?-+:?")
INT_RE = re.compile(r"-?(0|[1-9][0-9]*)")
FLOAT_RE = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
BR_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)

EPILOG = """examples:
  echo '[{"name": "A", "value": 1}]' | python3 scripts/format_converter.py --to csv
  printf 'name,value\\nA,1\\n' | python3 scripts/format_converter.py --to markdown
  printf '| name | value |\\n|---|---|\\n| A | 1 |\\n' | python3 scripts/format_converter.py --to json

JSON input: an array of objects, or an object whose "items", "data" or "results" key holds one
(a single object is one row; a non-object item becomes a row with a "value" column).
Columns are the union of all keys in first-seen order. Details: references/output-formats.md
"""


class InputError(Exception):
    """Bad input data; reported on stderr with exit code 1."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="format_converter.py",
        description="Convert a table between JSON, CSV and Markdown, in any direction.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="source", choices=("auto",) + FORMATS, default="auto",
                        help="input format (default: auto-detect)")
    parser.add_argument("--to", "-t", dest="target", choices=FORMATS, required=True, help="output format")
    parser.add_argument("--file", "-f", metavar="PATH", help="read from this file instead of stdin")
    parser.add_argument("--delimiter", "-d", metavar="CHAR",
                        help="CSV field delimiter for input and output (default: comma; tab is detected)")
    parser.add_argument("--strings", action="store_true",
                        help="keep CSV/Markdown cells as strings in JSON output (default: infer numbers, "
                             "true/false, and null for empty cells)")
    parser.add_argument("--max-rows", type=int, default=DEFAULT_MAX_ROWS, metavar="N",
                        help=f"convert at most N rows (default {DEFAULT_MAX_ROWS}; 0 = no limit)")
    parser.add_argument("--pretty", "-p", action="store_true", help="indent JSON output")
    args = parser.parse_args(argv)
    if args.delimiter is not None:
        args.delimiter = args.delimiter.replace("\\t", "\t")
        if len(args.delimiter) != 1 or args.delimiter in "\"\r\n":
            parser.error("--delimiter must be one character other than a quote or newline, e.g. ';' or '\\t'")
    if args.max_rows < 0:
        parser.error("--max-rows must be 0 (no limit) or a positive number")
    if args.file is None and sys.stdin.isatty():
        parser.error("no input: pipe the table on stdin or pass --file PATH")
    try:
        text = read_input(args.file)
        source = args.source if args.source != "auto" else detect_format(text)
        try:
            columns, rows = read_table(text, source, args.delimiter)
        except InputError as exc:
            if args.source == "auto":
                raise InputError(f"{exc} (input read as {source}; pass --from to choose the format)") from None
            raise
        if args.max_rows and len(rows) > args.max_rows:
            note(f"converted the first {args.max_rows} of {len(rows)} rows; pass --max-rows 0 for all")
            rows = rows[: args.max_rows]
        if source != "json" and args.target == "json" and not args.strings:
            rows = [{k: infer(v) for k, v in row.items()} for row in rows]
        output = write_table(columns, rows, args.target, args.delimiter, args.pretty)
    except InputError as exc:
        fail(str(exc))
        return 1
    sys.stdout.buffer.write(output.encode("utf-8"))
    return 0


def read_input(path):
    if path:
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
        except FileNotFoundError:
            raise InputError(f"file not found: {path} (paths are relative to the skill folder)") from None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
    else:
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"input is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; split it first")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"input is not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise InputError("input is empty: pass a JSON, CSV or Markdown table on stdin or with --file")
    return text


def detect_format(text):
    stripped = text.lstrip()
    if stripped[0] in "[{":
        return "json"
    if find_markdown_table(text.splitlines()) is not None:
        return "markdown"
    return "csv"


# ---------- reading ----------

def read_table(text, source, delimiter):
    """(columns in first-seen order, rows as dicts) from text in the given format."""
    if source == "json":
        return rows_from_json(text)
    if source == "markdown":
        return rows_from_markdown(text)
    return rows_from_csv(text, delimiter)


def rows_from_json(text):
    try:
        document = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError("JSON is nested too deeply") from None
    if isinstance(document, dict):
        items = next((document[k] for k in CONTAINER_KEYS if isinstance(document.get(k), list)), [document])
    elif isinstance(document, list):
        items = document
    else:
        raise InputError("JSON input must be an array of objects or an object; got a single value")
    rows = [item if isinstance(item, dict) else {"value": item} for item in items]
    return union_of_keys(rows), rows


def _reject_constant(name):
    raise InputError(f"{name} is not valid JSON; use null or a number")


def _finite_float(literal):
    value = float(literal)
    if not math.isfinite(value):
        raise InputError(f"number {literal[:40]} is too large for double precision")
    return value


def union_of_keys(rows):
    columns = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, None)
    return list(columns)


def rows_from_csv(text, delimiter):
    if delimiter is None:
        first_line = text.lstrip("\r\n").split("\n", 1)[0]
        delimiter = "\t" if "\t" in first_line and "," not in first_line else ","
    try:
        records = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True) if r]
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}") from None
    header = unique_names(records[0])
    rows = []
    for line_no, record in enumerate(records[1:], start=2):
        if len(record) > len(header):
            raise InputError(
                f"CSV row {line_no} has {len(record)} fields but the header has {len(header)}; "
                "quote values that contain the delimiter"
            )
        record = record + [""] * (len(header) - len(record))
        rows.append(dict(zip(header, record)))
    return header, rows


def unique_names(names):
    """Header cells as column names: blanks get a position name, repeats get a suffix."""
    seen = {}
    result = []
    for position, raw in enumerate(names, start=1):
        name = raw.strip() or f"column_{position}"
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        seen.setdefault(name, 1)
        result.append(name)
    return result


def find_markdown_table(lines):
    """Index of the header line of the first pipe table (header row, then separator row), or None."""
    for i in range(len(lines) - 1):
        if "|" in lines[i] and is_separator(lines[i + 1]):
            return i
    return None


def is_separator(line):
    if "|" not in line and "-" not in line:
        return False
    cells = split_row(line)
    return bool(cells) and all(SEPARATOR_CELL_RE.fullmatch(c.replace(" ", "")) for c in cells)


def split_row(line):
    """Cells of one pipe-table row: outer pipes optional, '\\|' is a literal pipe, '\\\\' a backslash."""
    cells, current, i = [], [], 0
    line = line.strip()
    last_pipe = -1
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in "|\\":
            current.append(line[i + 1])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(current))
            current = []
            last_pipe = i
        else:
            current.append(ch)
        i += 1
    cells.append("".join(current))
    if line.startswith("|"):
        cells = cells[1:]
    if last_pipe == len(line) - 1 and cells:
        cells = cells[:-1]  # the closing pipe, not an empty last cell
    return [BR_RE.sub("\n", c.strip()) for c in cells]


def rows_from_markdown(text):
    lines = text.splitlines()
    start = find_markdown_table(lines)
    if start is None:
        raise InputError("no Markdown table found: expected a header row, then a separator row like |---|---|")
    header = unique_names(split_row(lines[start]))
    if len(split_row(lines[start + 1])) != len(header):
        raise InputError("the Markdown separator row must have one cell per header cell")
    rows = []
    line_no = start + 2
    for line_no in range(start + 2, len(lines)):
        line = lines[line_no]
        if not line.strip() or "|" not in line:
            break  # a blank or pipe-less line ends the table
        cells = split_row(line)
        if len(cells) > len(header):
            note(f"line {line_no + 1}: {len(cells) - len(header)} extra cell(s) ignored")
            cells = cells[: len(header)]
        cells += [""] * (len(header) - len(cells))
        rows.append(dict(zip(header, cells)))
    if find_markdown_table(lines[line_no + 1:]) is not None:
        note("the input holds more than one table; converted the first")
    return header, rows


def infer(cell):
    """Cell text as a JSON value: integers, decimals, true/false, empty -> null; anything else stays text.
    Integers with leading zeros (codes, ZIPs) stay text."""
    if not isinstance(cell, str):
        return cell
    text = cell.strip()
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    if INT_RE.fullmatch(text):
        return int(text)
    if FLOAT_RE.fullmatch(text):
        value = float(text)
        return value if math.isfinite(value) else cell
    return cell


# ---------- writing ----------

def write_table(columns, rows, target, delimiter, pretty):
    if target == "json":
        return json.dumps(rows, ensure_ascii=False, indent=2 if pretty else None) + "\n"
    if not columns:
        raise InputError(f"nothing to write as {target}: the input has no columns")
    if target == "csv":
        out = io.StringIO()
        writer = csv.writer(out, delimiter=delimiter or ",", lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([cell_text(row.get(c)) for c in columns])
        return out.getvalue()
    return markdown_table(columns, rows)


def cell_text(value):
    """JSON values as table cells: null -> empty, booleans as true/false, nested values as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def markdown_cell(value):
    text = cell_text(value).replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def markdown_table(columns, rows):
    header = [markdown_cell(c) or " " for c in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(markdown_cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def note(message):
    sys.stderr.buffer.write(f"format_converter.py: note: {message}\n".encode("utf-8", "replace"))


def fail(message):
    sys.stderr.buffer.write(f"format_converter.py: error: {message}\n".encode("utf-8", "replace"))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Descriptive statistics for a JSON collection: numbers, text, records (objects) or a mix.

Reads JSON from stdin or --file and prints one JSON object on stdout.
Exit codes: 0 ok, 1 bad input data (message on stderr), 2 usage error.
Standard library only; reads nothing but the input and writes nothing but stdout/stderr.
"""

import argparse
import json
import math
import re
import statistics
import sys
import unicodedata
from collections import Counter

MAX_INPUT_BYTES = 32 * 1024 * 1024
MAX_FIELDS = 100  # per-field report is cut here so the output stays small
TOP_WORDS = 10
TOP_VALUES = 5
CONTAINER_KEYS = ("items", "data", "results")
ANALYSIS_TYPES = ("auto", "numeric", "text", "records", "mixed")

# Left out of top_words so the list shows content words; unique_words still counts them.
STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "has", "have",
    "he", "her", "his", "i", "in", "is", "it", "its", "of", "on", "or", "our", "she", "so", "that",
    "the", "their", "them", "there", "they", "this", "to", "was", "we", "were", "what", "when",
    "which", "who", "will", "with", "you", "your",
})
WORD_RE = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
NUMERIC_STRING_RE = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")

EPILOG = """examples:
  echo '{"items": [1, 2, 3, 4, 5]}' | python3 scripts/analyze.py
  echo '["red apple", "green apple"]' | python3 scripts/analyze.py --type text
  python3 scripts/analyze.py --file data.json --pretty

input: a JSON array, or an object whose "items", "data" or "results" key holds an array,
or any other object (analysed as one record). Output shapes: references/output-formats.md
"""


class InputError(Exception):
    """Bad input data; reported on stderr with exit code 1."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="analyze.py",
        description="Statistics over JSON items: numeric, text, per-field (records) or mixed.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--file", "-f", metavar="PATH", help="read JSON from this file instead of stdin")
    parser.add_argument(
        "--type",
        "-t",
        choices=ANALYSIS_TYPES,
        default="auto",
        help="analysis to run (default: auto, chosen from the item types)",
    )
    parser.add_argument("--pretty", "-p", action="store_true", help="indent the JSON output")
    args = parser.parse_args(argv)
    if args.file is None and sys.stdin.isatty():
        parser.error("no input: pipe JSON on stdin or pass --file PATH")
    try:
        raw = read_input(args.file)
        document = parse_json(raw)
        container, items = unwrap(document)
        result = analyze(items, args.type)
    except InputError as exc:
        fail(str(exc))
        return 1
    result["input"] = {
        "source": "file" if args.file else "stdin",
        "container": container,
        "item_count": len(items),
    }
    emit(result, args.pretty)
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
        raise InputError("input is empty: pass a JSON array or object on stdin or with --file")
    return text


def _reject_constant(name):
    raise InputError(f"{name} is not valid JSON; use null or a finite number")


def _finite_float(literal):
    value = float(literal)
    if not math.isfinite(value):
        raise InputError(f"number {clip(literal, 40)} is too large for double precision")
    return value


def parse_json(text):
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError("JSON is nested too deeply") from None


def unwrap(document):
    """(container name, list of items) from the accepted input shapes."""
    if isinstance(document, list):
        return "array", document
    if isinstance(document, dict):
        for key in CONTAINER_KEYS:
            if isinstance(document.get(key), list):
                return key, document[key]
        return "object", [document]
    raise InputError(
        f"expected a JSON array or object, got a {kind(document)}; wrap values in a list, e.g. [1, 2, 3]"
    )


def kind(value):
    """JSON type name of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def analyze(items, requested):
    kinds = Counter(kind(v) for v in items)
    if requested == "auto":
        requested = auto_type(kinds, len(items))
    if requested == "empty":
        return {"analysis_type": "empty", "analysis": {"count": 0}}
    if requested == "numeric":
        numbers, skipped = coerce_numbers(items)
        if not numbers:
            raise InputError("no numeric values found; numbers or numeric strings are needed for --type numeric")
        stats = numeric_stats(numbers)
        stats["skipped"] = skipped
        return {"analysis_type": "numeric", "analysis": stats}
    if requested == "text":
        texts = [v for v in items if isinstance(v, str)]
        if not texts:
            raise InputError("no string values found; --type text needs strings")
        stats = text_stats(texts)
        stats["skipped"] = len(items) - len(texts)
        return {"analysis_type": "text", "analysis": stats}
    if requested == "records":
        records = [v for v in items if isinstance(v, dict)]
        if not records:
            raise InputError("no objects found; --type records needs a list of JSON objects")
        stats = record_stats(records)
        stats["skipped"] = len(items) - len(records)
        return {"analysis_type": "records", "analysis": stats}
    return {"analysis_type": "mixed", "analysis": mixed_stats(items, kinds)}


def auto_type(kinds, total):
    if total == 0:
        return "empty"
    if kinds["object"] == total:
        return "records"
    if kinds["number"] == total:
        return "numeric"
    if kinds["string"] == total:
        return "text"
    return "mixed"


def coerce_numbers(items):
    """Numbers, plus strings that spell a number; (values, count of items skipped)."""
    numbers = []
    for value in items:
        if kind(value) == "number":
            numbers.append(value)
        elif isinstance(value, str) and NUMERIC_STRING_RE.fullmatch(value.strip()):
            number = float(value)
            if math.isfinite(number):
                numbers.append(number)
    return numbers, len(items) - len(numbers)


def finite(value):
    """JSON has no NaN or infinity: overflowing results become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def numeric_stats(numbers):
    try:
        floats = [float(n) for n in numbers]
    except OverflowError:
        raise InputError("a number is too large to analyse (beyond double precision)") from None
    count = len(floats)
    total = sum(numbers) if all(isinstance(n, int) for n in numbers) else math.fsum(floats)
    stats = {
        "count": count,
        "sum": finite(total if isinstance(total, int) else float(total)),
        "mean": finite(math.fsum(floats) / count),
        "min": min(numbers),
        "max": max(numbers),
        "median": finite(statistics.median(floats)),
        "std_dev": finite(statistics.stdev(floats)) if count >= 2 else None,
    }
    if count >= 5:
        q1, q2, q3 = statistics.quantiles(floats, n=4, method="inclusive")
        stats["quartiles"] = {"q1": finite(q1), "q2": finite(q2), "q3": finite(q3)}
    return stats


def words_of(text):
    # NFC first, so a letter written with a combining accent stays inside its word.
    return [w.lower() for w in WORD_RE.findall(unicodedata.normalize("NFC", text))]


def text_stats(texts):
    word_counts = Counter()
    total_words = 0
    for text in texts:
        words = words_of(text)
        total_words += len(words)
        word_counts.update(words)
    content = [(w, c) for w, c in word_counts.items() if w not in STOPWORDS]
    content.sort(key=lambda pair: (-pair[1], pair[0]))
    count = len(texts)
    total_chars = sum(len(t) for t in texts)
    return {
        "count": count,
        "empty_count": sum(1 for t in texts if not t.strip()),
        "total_chars": total_chars,
        "total_words": total_words,
        "avg_chars": total_chars / count,
        "avg_words": total_words / count,
        "unique_words": len(word_counts),
        "top_words": [{"word": clip(w), "count": c} for w, c in content[:TOP_WORDS]],
    }


def record_stats(records):
    field_order = {}
    for record in records:
        for key in record:
            field_order.setdefault(key, None)
    names = list(field_order)
    fields = {name: field_stats(name, records) for name in names[:MAX_FIELDS]}
    return {
        "record_count": len(records),
        "field_count": len(names),
        "fields_truncated": len(names) > MAX_FIELDS,
        "fields": fields,
    }


def field_stats(name, records):
    values = [r[name] for r in records if name in r]
    kinds = Counter(kind(v) for v in values)
    report = {
        "present": len(values),
        "missing": len(records) - len(values),
        "null_count": kinds.get("null", 0),
        "types": dict(sorted(kinds.items())),
    }
    numbers = [v for v in values if kind(v) == "number"]
    if numbers:
        report["numeric"] = numeric_stats(numbers)
    strings = [v for v in values if isinstance(v, str)]
    if strings:
        counts = Counter(strings)
        ranked = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
        report["text"] = {
            "unique_values": len(counts),
            "top_values": [{"value": clip(v), "count": c} for v, c in ranked[:TOP_VALUES]],
            "avg_chars": sum(len(s) for s in strings) / len(strings),
        }
    return report


def clip(text, limit=80):
    """Long values are shortened so one record cannot flood the report."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def mixed_stats(items, kinds):
    report = {"count": len(items), "type_distribution": dict(sorted(kinds.items()))}
    numbers = [v for v in items if kind(v) == "number"]
    if numbers:
        report["numeric"] = numeric_stats(numbers)
    texts = [v for v in items if isinstance(v, str)]
    if texts:
        report["text"] = text_stats(texts)
    records = [v for v in items if isinstance(v, dict)]
    if records:
        report["records"] = record_stats(records)
    return report


def emit(result, pretty):
    ordered = {"analysis_type": result["analysis_type"], "input": result["input"], "analysis": result["analysis"]}
    text = json.dumps(ordered, ensure_ascii=False, indent=2 if pretty else None, allow_nan=False)
    sys.stdout.buffer.write(text.encode("utf-8") + b"\n")


def fail(message):
    sys.stderr.buffer.write(f"analyze.py: error: {message}\n".encode("utf-8", "replace"))


if __name__ == "__main__":
    sys.exit(main())

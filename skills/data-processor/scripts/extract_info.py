#!/usr/bin/env python3
"""Pull structured facts out of free text: numbers, dates, percentages, money amounts, emails, URLs.

Reads text from stdin, --file or --text and prints one JSON object on stdout.
Exit codes: 0 ok, 1 bad input data (message on stderr), 2 usage error.
Standard library only; reads nothing but the input and writes nothing but stdout/stderr.
"""

import argparse
import datetime
import json
import re
import sys
from decimal import Context, Decimal

MAX_INPUT_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_PER_TYPE = 100
EXACT = Context(prec=80)  # enough digits for any number the patterns accept (30 + 30 + multiplier)
TYPES = ("numbers", "dates", "percentages", "amounts", "emails", "urls")
# Earlier kinds claim their text first, so "$1,200" is an amount and not also a number.
CLAIM_ORDER = ("urls", "emails", "dates", "amounts", "percentages", "numbers")

# A number: ASCII digits, optional thousands commas, optional decimals. The look-arounds keep it from
# starting or ending inside a word or a longer number (so "v2", "3rd" and "1.2.3" are not numbers).
# Runs of more than 30 digits are identifiers, not quantities; the bound also keeps matching linear.
NUM = r"(?:[0-9]{1,3}(?:,[0-9]{3}){1,10}|[0-9]{1,30})(?:\.[0-9]{1,30})?"
NUMBER_RE = re.compile(rf"(?<![0-9A-Za-z_.])-?{NUM}(?![0-9A-Za-z_])(?!\.[0-9])")

MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}
MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t|tember)?" \
        r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
DAY_SUFFIX = r"(?:st|nd|rd|th)?"
DATE_PATTERNS = (  # (regex, order of the year/month/day groups)
    (re.compile(r"(?<![0-9])([0-9]{4})([-/])([0-9]{1,2})\2([0-9]{1,2})(?![0-9])"), "y-md"),
    (re.compile(rf"\b{MONTH}\.?\s+([0-9]{{1,2}}){DAY_SUFFIX},?\s+([0-9]{{4}})\b", re.IGNORECASE), "mdy"),
    (re.compile(rf"\b([0-9]{{1,2}}){DAY_SUFFIX}\s+{MONTH}\.?,?\s+([0-9]{{4}})\b", re.IGNORECASE), "dmy"),
    (re.compile(r"(?<![0-9])([0-9]{4})\s*年\s*([0-9]{1,2})\s*月\s*([0-9]{1,2})\s*[日号]"), "ymd"),
    (re.compile(r"(?<![0-9])([0-9]{4})\s*年\s*([0-9]{1,2})\s*月"), "ym"),
    (re.compile(r"(?<![0-9])([0-9]{4})\s*年"), "y"),
)

MULTIPLIERS = {
    "thousand": 10**3, "k": 10**3, "million": 10**6, "m": 10**6, "mn": 10**6,
    "billion": 10**9, "bn": 10**9, "b": 10**9, "trillion": 10**12,
    "千": 10**3, "万": 10**4, "百万": 10**6, "千万": 10**7, "亿": 10**8, "万亿": 10**12,
}
SYMBOL_CURRENCY = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP", "¥": None, "￥": None}  # ¥: CNY or JPY
UNIT_CURRENCY = {
    "元": "CNY", "人民币": "CNY", "块": "CNY", "美元": "USD", "欧元": "EUR", "英镑": "GBP",
    "日元": "JPY", "港元": "HKD", "港币": "HKD",
}
CODES = ("USD", "EUR", "GBP", "CNY", "RMB", "JPY", "HKD", "CHF", "CAD", "AUD")
WORD_MULT = r"(?:\s?(thousand|million|billion|trillion)\b|(k|K|M|mn|bn|B)(?![A-Za-z])|(万亿|千万|百万|亿|万|千))?"
AMOUNT_PATTERNS = (
    re.compile(rf"(US\$|[$€£¥￥])\s?(-?{NUM}){WORD_MULT}"),
    re.compile(rf"\b({'|'.join(CODES)})\s?(-?{NUM}){WORD_MULT}"),
    re.compile(rf"(?<![0-9A-Za-z_.])(-?{NUM}){WORD_MULT}\s?({'|'.join(CODES)})\b"),
    re.compile(rf"(?<![0-9A-Za-z_.])(-?{NUM})\s*(万亿|千万|百万|亿|万|千)?\s*({'|'.join(UNIT_CURRENCY)})"),
)
PERCENT_RE = re.compile(rf"(?<![0-9A-Za-z_.])(-?{NUM})\s?(%|％|\s?percent\b|\s?per cent\b)", re.IGNORECASE)
EMAIL_RE = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9-])"
)
URL_RE = re.compile(r"(?<![A-Za-z0-9])(?:https?://|www\.)[^\s<>\"'`，。；、！？（）【】「」《》]+", re.IGNORECASE)

EPILOG = """examples:
  echo "2024年销售额为100万元，同比增长12.5%" | python3 scripts/extract_info.py
  echo "Invoice of $1,200.50 due March 5, 2024" | python3 scripts/extract_info.py --types amounts,dates
  python3 scripts/extract_info.py --file notes.txt --types emails,urls --pretty

each piece of text is reported once, as the most specific kind: "$1,200" is an amount, not also a
number. Output shape: references/output-formats.md
"""


class InputError(Exception):
    """Bad input data; reported on stderr with exit code 1."""


def type_list(value):
    chosen = [t.strip() for t in value.split(",") if t.strip()]
    unknown = [t for t in chosen if t not in TYPES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown type(s) {', '.join(unknown) or '(none)'}; choose from {','.join(TYPES)}"
        )
    return list(dict.fromkeys(chosen))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="extract_info.py",
        description="Extract numbers, dates, percentages, money amounts, emails and URLs from text.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--file", "-f", metavar="PATH", help="read the text from this file instead of stdin")
    source.add_argument("--text", metavar="TEXT", help="the text itself, instead of stdin")
    parser.add_argument("--types", "-t", type=type_list, default=list(TYPES), metavar="LIST",
                        help=f"comma-separated kinds to report (default: all of {','.join(TYPES)})")
    parser.add_argument("--max-per-type", type=int, default=DEFAULT_MAX_PER_TYPE, metavar="N",
                        help=f"report at most N distinct values of each kind (default {DEFAULT_MAX_PER_TYPE})")
    parser.add_argument("--pretty", "-p", action="store_true", help="indent the JSON output")
    args = parser.parse_args(argv)
    if args.max_per_type < 1:
        parser.error("--max-per-type must be at least 1")
    if args.file is None and args.text is None and sys.stdin.isatty():
        parser.error("no input: pipe text on stdin, or pass --file PATH or --text TEXT")
    try:
        text = args.text if args.text is not None else read_input(args.file)
        if not text.strip():
            raise InputError("input is empty: pass text on stdin, with --file or with --text")
    except InputError as exc:
        fail(str(exc))
        return 1
    found = extract(text)
    result = {"text_length": len(text), "extracted": {}, "counts": {}, "truncated": []}
    for kind in args.types:
        distinct = list({item_key(item): item for item in found[kind]}.values())
        result["extracted"][kind] = distinct[: args.max_per_type]
        result["counts"][kind] = len(found[kind])
        if len(distinct) > args.max_per_type:
            result["truncated"].append(kind)
    result["total"] = sum(result["counts"].values())
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
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"input is not UTF-8 text (bad byte at offset {exc.start})") from None


def item_key(item):
    return item["text"] if isinstance(item, dict) else item


# ---------- extraction ----------

class Claims:
    """Character spans already taken by a more specific kind."""

    def __init__(self, size):
        self.taken = bytearray(size)

    def free(self, start, end):
        return not any(self.taken[start:end])

    def take(self, start, end):
        self.taken[start:end] = b"\x01" * (end - start)


def extract(text):
    claims = Claims(len(text))
    finders = {
        "urls": find_urls, "emails": find_emails, "dates": find_dates,
        "amounts": find_amounts, "percentages": find_percentages, "numbers": find_numbers,
    }
    found = {}
    for kind in CLAIM_ORDER:
        hits = []
        for start, end, item in finders[kind](text):
            if claims.free(start, end):
                claims.take(start, end)
                hits.append((start, item))
        hits.sort(key=lambda hit: hit[0])  # report in reading order
        found[kind] = [item for _, item in hits]
    return found


def find_urls(text):
    for match in URL_RE.finditer(text):
        url = trim_url(match.group())
        if len(url) > len("https://"):
            yield match.start(), match.start() + len(url), url


def trim_url(url):
    """Drop sentence punctuation after a URL, and closing brackets that have no opening partner."""
    openers = {")": "(", "]": "["}
    while url:
        last = url[-1]
        unmatched = last in openers and url.count(openers[last]) < url.count(last)
        if last not in ".,;:!?'\"" and not unmatched:
            break
        url = url[:-1]
    return url


def find_emails(text):
    if "@" not in text:
        return
    for match in EMAIL_RE.finditer(text):
        yield match.start(), match.end(), match.group()


def find_dates(text):
    for pattern, order in DATE_PATTERNS:
        for match in pattern.finditer(text):
            iso = iso_date(match.groups(), order)
            if iso:
                yield match.start(), match.end(), {"text": match.group(), "iso": iso}


def iso_date(groups, order):
    """ISO 8601 text for a matched date, or None when it is not a real calendar date."""
    if order == "y-md":
        year, _, month, day = groups
    elif order == "mdy":
        month, day, year = groups
    elif order == "dmy":
        day, month, year = groups
    elif order == "ymd":
        year, month, day = groups
    elif order == "ym":
        year, month = groups
        return f"{int(year):04d}-{int(month):02d}" if 1 <= int(month) <= 12 else None
    else:
        return f"{int(groups[0]):04d}"
    month_number = MONTHS[month[:3].lower()] if not month.isdigit() else int(month)
    try:
        return datetime.date(int(year), month_number, int(day)).isoformat()
    except ValueError:
        return None


def find_amounts(text):
    for index, pattern in enumerate(AMOUNT_PATTERNS):
        for match in pattern.finditer(text):
            groups = match.groups()
            if index == 0:  # $1,200 / €30 / ¥5万
                number, mult, currency = groups[1], groups[2] or groups[3] or groups[4], SYMBOL_CURRENCY[groups[0]]
            elif index == 1:  # USD 100
                number, mult, currency = groups[1], groups[2] or groups[3] or groups[4], code_currency(groups[0])
            elif index == 2:  # 100 USD
                number, mult, currency = groups[0], groups[1] or groups[2] or groups[3], code_currency(groups[4])
            else:  # 100万元 / 5美元
                number, mult, currency = groups[0], groups[1], UNIT_CURRENCY[groups[2]]
            value = as_number(number, MULTIPLIERS[mult.lower()] if mult else 1)
            yield match.start(), match.end(), {"text": match.group().strip(), "value": value, "currency": currency}


def code_currency(code):
    return "CNY" if code == "RMB" else code


def find_percentages(text):
    for match in PERCENT_RE.finditer(text):
        yield match.start(), match.end(), {"text": match.group(), "value": as_number(match.group(1))}


def find_numbers(text):
    for match in NUMBER_RE.finditer(text):
        yield match.start(), match.end(), {"text": match.group(), "value": as_number(match.group())}


def as_number(literal, multiplier=1):
    """Exact decimal arithmetic, so 1.1 million is 1100000 and not 1100000.0000000002."""
    value = EXACT.multiply(Decimal(literal.replace(",", "")), multiplier)
    if value == value.to_integral_value():
        return int(value)
    return float(value)


def emit(result, pretty):
    text = json.dumps(result, ensure_ascii=False, indent=2 if pretty else None)
    sys.stdout.buffer.write(text.encode("utf-8") + b"\n")


def fail(message):
    sys.stderr.buffer.write(f"extract_info.py: error: {message}\n".encode("utf-8", "replace"))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Draw a bar chart from label/value pairs (JSON or CSV) into the run's output folder.

Writes chart.png with matplotlib when it can be imported, else chart.svg built with the standard library.
Prints a JSON summary on stdout. Exit codes: 0 ok, 1 bad input or unwritable output (message on stderr),
2 usage error. The output folder is $IPYSKILLS_OUTPUT, else ./output in the working directory.
"""

import argparse
import csv
import io
import json
import math
import os
import sys
from xml.sax.saxutils import escape

MAX_INPUT_BYTES = 8 * 1024 * 1024
MAX_BARS = 60
MAX_LABEL = 24
CONTAINER_KEYS = ("items", "data", "results")
LABEL_FIELDS = ("label", "name", "category", "key", "x")
VALUE_FIELDS = ("value", "count", "amount", "total", "y")
BAR_COLOR = "#4C72B0"

EPILOG = """examples:
  python3 scripts/bar_chart.py --file assets/sample.csv --title "Visitors by city"
  echo '{"apples": 3, "pears": 5}' | python3 scripts/bar_chart.py
  echo '[{"name": "A", "count": 4}, {"name": "B", "count": 9}]' | python3 scripts/bar_chart.py --format svg

input: JSON - a list of objects, an object of label -> number, or a list of [label, value] pairs
(objects may be wrapped in "items", "data" or "results"); or CSV with a header row
(label/name/category and value/count/amount columns are found by name) or two headerless columns.
"""


class InputError(Exception):
    """Bad input or an unwritable output folder; reported on stderr with exit code 1."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="bar_chart.py",
        description="Bar chart of label/value pairs, written to $IPYSKILLS_OUTPUT/chart.png (or chart.svg).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--file", "-f", metavar="PATH", help="read JSON or CSV from this file instead of stdin")
    parser.add_argument("--from", dest="source", choices=("auto", "json", "csv"), default="auto",
                        help="input format (default: auto)")
    parser.add_argument("--label-field", metavar="NAME", help="column or key holding the labels")
    parser.add_argument("--value-field", metavar="NAME", help="column or key holding the values")
    parser.add_argument("--title", default="", help="chart title")
    parser.add_argument("--top", type=int, metavar="N", help="keep only the N largest values")
    parser.add_argument("--format", choices=("auto", "png", "svg"), default="auto",
                        help="png needs matplotlib; auto picks png when matplotlib is installed, else svg")
    args = parser.parse_args(argv)
    if args.top is not None and not 1 <= args.top <= MAX_BARS:
        parser.error(f"--top must be between 1 and {MAX_BARS}")
    if args.file is None and sys.stdin.isatty():
        parser.error("no input: pipe JSON or CSV on stdin or pass --file PATH")
    try:
        pairs, value_name = read_pairs(read_input(args.file), args)
        if args.top:  # the N largest, largest first
            pairs = sorted(pairs, key=lambda pair: -pair[1])[: args.top]
        if len(pairs) > MAX_BARS:
            raise InputError(f"{len(pairs)} bars is too many for one chart (max {MAX_BARS}); "
                             f"pass --top N or aggregate the data first")
        folder = output_folder()
        summary = draw(pairs, value_name, args.title, args.format, folder)
    except InputError as exc:
        sys.stderr.buffer.write(f"bar_chart.py: error: {exc}\n".encode("utf-8", "replace"))
        return 1
    sys.stdout.buffer.write(json.dumps(summary, ensure_ascii=False).encode("utf-8") + b"\n")
    return 0


def read_input(path):
    if path:
        # A relative path is looked up in the working directory first, then in this skill's folder (so
        # `--file assets/sample.csv` finds the bundled sample from any working directory).
        skill_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        candidates = [path] if os.path.isabs(path) else [path, os.path.join(skill_dir, path)]
        found = next((c for c in candidates if os.path.isfile(c)), path)
        try:
            with open(found, "rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
        except FileNotFoundError:
            raise InputError(f"file not found: {path} (looked in the working directory and the skill folder)") from None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
    else:
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"input is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"input is not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise InputError("input is empty: pass label/value pairs as JSON or CSV")
    return text


# ---------- input ----------

def read_pairs(text, args):
    """[(label, value)] and the name of the value column (for the axis)."""
    source = args.source
    if source == "auto":
        source = "json" if text.lstrip()[0] in "[{" else "csv"
    if source == "json":
        records = records_from_json(text)
    else:
        records = records_from_csv(text)
    if not records:
        raise InputError("no data rows found")
    if all(isinstance(r, (list, tuple)) for r in records):
        return [pair_from_sequence(r, i) for i, r in enumerate(records, start=1)], "value"
    if not all(isinstance(r, dict) for r in records):
        raise InputError("rows must all be objects or all be [label, value] pairs")
    value_field = pick_field(records, args.value_field, VALUE_FIELDS, exclude=None)
    label_field = pick_field(records, args.label_field, LABEL_FIELDS, exclude=value_field)
    pairs = []
    for i, record in enumerate(records, start=1):
        pairs.append((label_text(record.get(label_field)), number(record.get(value_field), i, value_field)))
    return pairs, value_field


def records_from_json(text):
    try:
        document = json.loads(text, parse_constant=lambda name: name)  # NaN/Infinity are caught by number()
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError("JSON is nested too deeply") from None
    if isinstance(document, dict):
        for key in CONTAINER_KEYS:
            if isinstance(document.get(key), list):
                return document[key]
        return [[label, value] for label, value in document.items()]
    if isinstance(document, list):
        return document
    raise InputError("JSON input must be a list or an object")


def records_from_csv(text):
    try:
        rows = [r for r in csv.reader(io.StringIO(text, newline=""), strict=True) if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}") from None
    if not rows:
        return []
    if len(rows[0]) >= 2 and is_number(rows[0][1]):
        return [r[:2] for r in rows]  # no header: label, value
    header = [h.strip() for h in rows[0]]
    return [dict(zip(header, r)) for r in rows[1:]]


def pick_field(records, requested, preferred, exclude):
    """The requested field, else a conventionally named one, else the first that fits: for the value
    (exclude is None) the first all-numeric field, for the label the first field that is not the value."""
    keys = list(dict.fromkeys(k for r in records for k in r))
    if requested:
        if requested not in keys:
            raise InputError(f"no field named {requested!r}; fields are: {', '.join(map(str, keys))}")
        return requested
    lowered = {str(k).lower(): k for k in keys}
    for name in preferred:
        if name in lowered and lowered[name] != exclude:
            return lowered[name]
    for key in keys:
        if exclude is not None and key != exclude:
            return key
        present = [r.get(key) for r in records if r.get(key) not in (None, "")]
        if exclude is None and present and all(is_number(v) for v in present):
            return key
    if exclude is None:
        raise InputError("cannot tell which field holds the values; name it with --value-field")
    raise InputError("cannot tell which field holds the labels; name it with --label-field")


def pair_from_sequence(row, index):
    if len(row) != 2:
        raise InputError(f"row {index} should be [label, value], got {len(row)} element(s)")
    return label_text(row[0]), number(row[1], index, "value")


def is_number(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        value = value.replace(",", "")
    elif not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except (ValueError, OverflowError):
        return False


def number(value, index, field):
    if isinstance(value, bool) or not is_number(value):
        raise InputError(f"row {index}: {field} must be a finite number, got {json.dumps(value)[:40]}")
    return float(value.replace(",", "")) if isinstance(value, str) else float(value)


def label_text(value):
    text = "" if value is None else str(value).strip()
    return text or "(blank)"


def short(label):
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


# ---------- output ----------

def output_folder():
    target = os.environ.get("IPYSKILLS_OUTPUT") or "output"
    try:
        os.makedirs(target, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the output folder {target!r} ({exc.strerror}); "
            "set IPYSKILLS_OUTPUT to a writable folder"
        ) from None
    if not os.access(target, os.W_OK):
        raise InputError(f"the output folder {target!r} is not writable; set IPYSKILLS_OUTPUT to a writable folder")
    return target


def draw(pairs, value_name, title, fmt, folder):
    renderer = "svg"
    if fmt in ("auto", "png"):
        pyplot = load_matplotlib()
        if pyplot is not None:
            renderer = "matplotlib"
        elif fmt == "png":
            raise InputError("PNG output needs matplotlib, which is not installed here; use --format svg")
    path = os.path.join(folder, "chart.png" if renderer == "matplotlib" else "chart.svg")
    try:
        if renderer == "matplotlib":
            draw_png(pyplot, pairs, value_name, title, path)
        else:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(svg_chart(pairs, value_name, title))
    except OSError as exc:
        raise InputError(f"cannot write {path} ({exc.strerror}); set IPYSKILLS_OUTPUT to a writable folder") from None
    values = [v for _, v in pairs]
    low, high = values.index(min(values)), values.index(max(values))
    return {
        "file": path,
        "format": "png" if renderer == "matplotlib" else "svg",
        "renderer": renderer,
        "count": len(pairs),
        "min": {"label": pairs[low][0], "value": tidy(values[low])},
        "max": {"label": pairs[high][0], "value": tidy(values[high])},
        "total": tidy(math.fsum(values)),
    }


def tidy(value):
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def load_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        return None
    return pyplot


def draw_png(pyplot, pairs, value_name, title, path):
    labels = [short(label) for label, _ in pairs]
    values = [v for _, v in pairs]
    width = min(16.0, max(6.0, 0.45 * len(pairs) + 2))
    fig, ax = pyplot.subplots(figsize=(width, 4.5))
    ax.bar(range(len(values)), values, color=BAR_COLOR)
    ax.set_xticks(range(len(values)))
    rotate = len(pairs) > 8 or max(len(label) for label in labels) > 10
    ax.set_xticklabels(labels, rotation=40 if rotate else 0, ha="right" if rotate else "center")
    ax.set_ylabel(value_name)
    ax.axhline(0, color="#333333", linewidth=0.8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot.close(fig)


def nice_ticks(low, high, count=5):
    """Round tick values that cover [low, high] and include zero."""
    low, high = min(low, 0.0), max(high, 0.0)
    if low == high:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = []
    tick = start
    while tick < high + step * 0.999:
        ticks.append(round(float(tick), 10))
        tick += step
    return ticks


def tick_text(value):
    value = float(value)
    if value.is_integer():
        return f"{int(value):,}"
    return f"{value:,.6g}"


def svg_chart(pairs, value_name, title):
    values = [v for _, v in pairs]
    ticks = nice_ticks(min(values), max(values))
    left, right, top, bottom = 70, 20, 40 if title else 20, 90
    slot = max(36.0, 300.0 / len(pairs))  # a few bars widen to fill a minimum plot width
    width = round(left + right + len(pairs) * slot)
    height = 420
    plot_h = height - top - bottom
    lo, hi = ticks[0], ticks[-1]

    def y(v):
        return top + plot_h * (hi - v) / (hi - lo)

    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">'
        ),
        f"<title>{escape(title or 'Bar chart')}</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    if title:
        parts.append(f'<text x="{width / 2:.1f}" y="24" text-anchor="middle" font-size="16">{escape(title)}</text>')
    for t in ticks:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{tick_text(t)}</text>')
    parts.append(
        f'<text transform="translate(16 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f"{escape(str(value_name))}</text>"
    )
    for i, (label, value) in enumerate(pairs):
        x = left + i * slot + slot * 0.15
        y0, y1 = sorted((y(0.0), y(value)))
        parts.append(
            f'<rect x="{x:.1f}" y="{y0:.1f}" width="{slot * 0.7:.1f}" height="{max(y1 - y0, 0.5):.1f}" '
            f'fill="{BAR_COLOR}"><title>{escape(label)}: {tick_text(value)}</title></rect>'
        )
        cx, ly = x + slot * 0.35, height - bottom + 14
        parts.append(
            f'<text x="{cx:.1f}" y="{ly}" text-anchor="end" transform="rotate(-40 {cx:.1f} {ly})">'
            f"{escape(short(label))}</text>"
        )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{y(0.0):.1f}" y2="{y(0.0):.1f}" stroke="#333333"/>'
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())

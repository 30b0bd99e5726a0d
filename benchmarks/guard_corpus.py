"""Run the guard over every script inside the skill folders under some directories and report the result.

    python benchmarks/guard_corpus.py DIR [DIR ...] [--all-files] [--show-warnings]

A skill folder is one holding a SKILL.md; a script is a file in it with a known script extension or a
shebang line. With --all-files every such script under DIR counts, skill folder or not. Prints the number
of scripts per language, how many were blocked or warned, every blocked file with its rules, and timing.
Used to measure false positives on real, published skills (target: at most 1% blocked).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from ipyskills.sandbox.guard import check_file, detect_language, script_files


def find_scripts(root: Path, all_files: bool) -> list[Path]:
    bases = [root] if all_files else [p.parent for p in root.rglob("SKILL.md")]
    return sorted({script for base in bases for script in script_files(base)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--all-files", action="store_true", help="every script, not only those in skills")
    parser.add_argument("--show-warnings", action="store_true", help="also count warnings by rule")
    args = parser.parse_args(argv)

    scripts = [s for d in args.dirs for s in find_scripts(d, args.all_files)]
    languages, warn_rules, blocked = Counter(), Counter(), []
    warned = 0
    started = time.perf_counter()
    slowest = (0.0, None)
    for script in scripts:
        t0 = time.perf_counter()
        report = check_file(script)
        spent = time.perf_counter() - t0
        slowest = max(slowest, (spent, script), key=lambda x: x[0])
        languages[detect_language(script, script.read_text("utf-8", "replace")[:200])] += 1
        if report.blocked:
            blocked.append(report)
        if any(f.severity == "warn" for f in report.findings):
            warned += 1
            warn_rules.update({f.rule for f in report.findings if f.severity == "warn"})
    elapsed = time.perf_counter() - started

    total = len(scripts)
    print(f"scripts: {total} ({', '.join(f'{k} {v}' for k, v in languages.most_common())})")
    share = 100.0 * len(blocked) / total if total else 0.0
    print(f"blocked: {len(blocked)} ({share:.2f}%)   with warnings: {warned}")
    print(f"time: {elapsed:.2f} s total, slowest {slowest[0] * 1000:.0f} ms ({slowest[1]})")
    if args.show_warnings:
        print("warnings by rule (files): " + ", ".join(f"{k} {v}" for k, v in warn_rules.most_common()))
    for report in blocked:
        print(f"BLOCKED {report.path}")
        for f in report.findings:
            if f.severity == "block":
                print(f"    line {f.line}: {f.rule}: {f.message.split(':')[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

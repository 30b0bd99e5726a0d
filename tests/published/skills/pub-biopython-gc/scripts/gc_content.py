"""GC content of FASTA records (or of one bare sequence) read from stdin."""

import argparse
import io
import json
import sys

from Bio import SeqIO
from Bio.Seq import Seq
from Bio.SeqUtils import gc_fraction


def records(text):
    if text.lstrip().startswith(">"):
        for record in SeqIO.parse(io.StringIO(text), "fasta"):
            yield record.id, record.seq
    else:
        yield "sequence", Seq("".join(text.split()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--digits", type=int, default=6, help="round the fraction to this many digits")
    args = parser.parse_args()
    text = sys.stdin.read()
    if not text.strip():
        parser.error("give a FASTA text or a sequence on stdin")
    for ident, seq in records(text):
        print(json.dumps({"id": ident, "length": len(seq), "gc": round(gc_fraction(seq), args.digits)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

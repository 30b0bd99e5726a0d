# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "openpyxl>=3.1",
#     "pandas",
# ]
# ///
"""CSV on stdin -> totals.xlsx with a SUM formula under each numeric column; read back with openpyxl and pandas."""

import argparse
import io
import json
import os
import sys

import pandas as pd
from openpyxl import load_workbook
from openpyxl.utils import get_column_letter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sheet", default="Data")
    args = parser.parse_args()
    frame = pd.read_csv(io.StringIO(sys.stdin.read()))
    path = os.path.join(os.environ.get("IPYSKILLS_OUTPUT", "."), "totals.xlsx")
    frame.to_excel(path, sheet_name=args.sheet, index=False, engine="openpyxl")

    book = load_workbook(path)
    sheet = book[args.sheet]
    last = sheet.max_row
    formulas = {}
    for index, column in enumerate(frame.columns, start=1):
        if pd.api.types.is_numeric_dtype(frame[column]):
            letter = get_column_letter(index)
            formula = f"=SUM({letter}2:{letter}{last})"
            sheet.cell(row=last + 1, column=index, value=formula)
            formulas[column] = formula
    sheet.cell(row=last + 1, column=1, value="Total")
    book.save(path)

    again = load_workbook(path)[args.sheet]
    written = {c: again.cell(row=last + 1, column=list(frame.columns).index(c) + 1).value for c in formulas}
    data = pd.read_excel(path, sheet_name=args.sheet, engine="openpyxl").iloc[: last - 1]
    sums = {c: float(pd.to_numeric(data[c]).sum()) for c in formulas}
    print(json.dumps({"file": "totals.xlsx", "rows": len(data), "formulas": written, "sums": sums}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

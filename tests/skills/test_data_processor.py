"""The data-processor scripts, run as real subprocesses from the skill folder."""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
import statistics
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import BUNDLED, run_script

SCRIPTS = ["analyze.py", "format_converter.py", "extract_info.py"]


# ---------------------------------------------------------------- common behaviour

@pytest.mark.parametrize("script", SCRIPTS)
def test_help_exits_zero_and_documents_input(data_processor, script):
    run = data_processor(script, "--help")
    assert run.code == 0
    assert "--file" in run.stdout and "examples:" in run.stdout


@pytest.mark.parametrize("script,args", [
    ("analyze.py", []), ("format_converter.py", ["--to", "csv"]), ("extract_info.py", []),
])
@pytest.mark.parametrize("stdin", ["", "   \n\t\n"])
def test_empty_input_is_a_data_error(data_processor, script, args, stdin):
    run = data_processor(script, *args, stdin=stdin)
    assert run.code == 1
    assert run.stdout == ""
    assert "empty" in run.stderr


@pytest.mark.parametrize("script,args", [
    ("analyze.py", []), ("format_converter.py", ["--to", "csv"]), ("extract_info.py", []),
])
def test_non_utf8_input_is_a_data_error(data_processor, script, args):
    run = data_processor(script, *args, stdin=b'[{"a": "\xff\xfe"}]')
    assert run.code == 1
    assert "UTF-8" in run.stderr


@pytest.mark.parametrize("script,args", [
    ("analyze.py", []), ("format_converter.py", ["--to", "csv"]), ("extract_info.py", []),
])
def test_missing_file_names_the_path(data_processor, script, args):
    run = data_processor(script, *args, "--file", "no/such.json")
    assert run.code == 1
    assert "no/such.json" in run.stderr and "not found" in run.stderr


@pytest.mark.parametrize("script,args", [
    ("analyze.py", ["--type", "bogus"]), ("format_converter.py", []), ("extract_info.py", ["--types", "phones"]),
])
def test_usage_errors_exit_two(data_processor, script, args):
    run = data_processor(script, *args, stdin="[1]")
    assert run.code == 2
    assert "usage:" in run.stderr


def test_file_path_is_relative_to_working_directory(tmp_path):
    skill = tmp_path / "data-processor"
    shutil.copytree(BUNDLED / "data-processor", skill)
    (skill / "numbers.json").write_text("[2, 4, 9]")
    out = run_script(skill, "scripts/analyze.py", "--file", "numbers.json").json()
    assert out["input"]["source"] == "file"
    assert out["analysis"]["sum"] == 15


def test_scripts_write_nothing_into_the_skill_folder(tmp_path):
    skill = tmp_path / "data-processor"
    shutil.copytree(BUNDLED / "data-processor", skill)
    before = sorted(p.relative_to(skill) for p in skill.rglob("*"))
    run_script(skill, "scripts/analyze.py", stdin="[1, 2, 3]").json()
    run_script(skill, "scripts/format_converter.py", "--to", "markdown", stdin='[{"a": 1}]')
    run_script(skill, "scripts/extract_info.py", stdin="email a@b.org").json()
    assert sorted(p.relative_to(skill) for p in skill.rglob("*")) == before


# ---------------------------------------------------------------- analyze.py

def test_numeric_statistics_match_the_statistics_module(data_processor):
    rng = random.Random(7)
    values = [round(rng.uniform(-50, 500), 3) for _ in range(101)]
    out = data_processor("analyze.py", stdin=json.dumps({"items": values})).json()
    assert out["analysis_type"] == "numeric"
    assert out["input"] == {"source": "stdin", "container": "items", "item_count": 101}
    stats = out["analysis"]
    assert stats["count"] == 101
    assert stats["sum"] == pytest.approx(sum(values))
    assert stats["mean"] == pytest.approx(statistics.mean(values))
    assert stats["median"] == pytest.approx(statistics.median(values))
    assert stats["std_dev"] == pytest.approx(statistics.stdev(values))
    assert (stats["min"], stats["max"]) == (min(values), max(values))
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    assert stats["quartiles"] == pytest.approx({"q1": q1, "q2": q2, "q3": q3})


def test_integer_sums_stay_exact_and_quartiles_need_five_values(data_processor):
    four = data_processor("analyze.py", stdin="[1, 2, 3, 10]").json()["analysis"]
    assert four["sum"] == 16 and isinstance(four["sum"], int)
    assert "quartiles" not in four
    five = data_processor("analyze.py", stdin="[1, 2, 3, 4, 5]").json()["analysis"]
    assert five["quartiles"] == {"q1": 2.0, "q2": 3.0, "q3": 4.0}
    one = data_processor("analyze.py", stdin="[42]").json()["analysis"]
    assert one["std_dev"] is None and one["median"] == 42


@pytest.mark.parametrize("document,container,count", [
    ({"data": [1, 2]}, "data", 2),
    ({"results": [1, 2, 3]}, "results", 3),
    ([1, 2, 3, 4], "array", 4),
    ({"items": "not a list", "x": 1}, "object", 1),
])
def test_accepted_input_shapes(data_processor, document, container, count):
    out = data_processor("analyze.py", stdin=json.dumps(document)).json()
    assert out["input"]["container"] == container
    assert out["input"]["item_count"] == count


def test_text_analysis_counts_unicode_words_and_skips_stopwords_in_top_words(data_processor):
    texts = ["The cat sat", "the CAT and the café", "Café nai\u0308ve", ""]
    stats = data_processor("analyze.py", stdin=json.dumps(texts)).json()["analysis"]
    assert stats["count"] == 4 and stats["empty_count"] == 1
    assert stats["total_words"] == 10
    assert stats["total_chars"] == sum(len(t) for t in texts)
    tops = {entry["word"]: entry["count"] for entry in stats["top_words"]}
    assert tops["cat"] == 2 and tops["café"] == 2 and tops["naïve"] == 1
    assert "the" not in tops
    assert stats["unique_words"] == 6  # the, cat, sat, and, café, naïve
    assert stats["top_words"][0]["word"] == "café"  # ties broken alphabetically


def test_records_report_nulls_missing_keys_and_type_mix(data_processor):
    records = [
        {"city": "Oslo", "price": 10, "tags": ["a"]},
        {"city": None, "price": 30},
        {"price": "n/a", "extra": True},
    ]
    out = data_processor("analyze.py", stdin=json.dumps(records)).json()
    assert out["analysis_type"] == "records"
    fields = out["analysis"]["fields"]
    assert list(fields) == ["city", "price", "tags", "extra"]
    assert fields["city"]["null_count"] == 1 and fields["city"]["missing"] == 1
    assert fields["price"]["types"] == {"number": 2, "string": 1}
    assert fields["price"]["numeric"]["mean"] == 20
    assert fields["tags"]["types"] == {"array": 1}
    assert fields["extra"]["types"] == {"boolean": 1}


def test_mixed_items_and_booleans_are_not_numbers(data_processor):
    out = data_processor("analyze.py", stdin='[1, 2.5, true, "x y", null, {"a": 1}]').json()
    assert out["analysis_type"] == "mixed"
    analysis = out["analysis"]
    assert analysis["type_distribution"] == {"boolean": 1, "null": 1, "number": 2, "object": 1, "string": 1}
    assert analysis["numeric"]["count"] == 2 and analysis["numeric"]["sum"] == 3.5
    assert analysis["text"]["total_words"] == 2
    assert analysis["records"]["record_count"] == 1


def test_forced_numeric_reads_numeric_strings(data_processor):
    out = data_processor("analyze.py", "--type", "numeric", stdin='["1.5", "2.5", "abc", 3]').json()
    assert out["analysis"]["sum"] == 7.0 and out["analysis"]["skipped"] == 1
    run = data_processor("analyze.py", "--type", "numeric", stdin='["abc"]')
    assert run.code == 1 and "no numeric values" in run.stderr


def test_empty_array_is_valid(data_processor):
    out = data_processor("analyze.py", stdin="[]").json()
    assert out["analysis_type"] == "empty" and out["analysis"]["count"] == 0


@pytest.mark.parametrize("stdin,message", [
    ("{bad json", "invalid JSON at line 1"),
    ("42", "expected a JSON array or object"),
    ("[1, NaN]", "NaN is not valid JSON"),
    ("[1e999]", "too large"),
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
])
def test_bad_json_is_a_data_error(data_processor, stdin, message):
    run = data_processor("analyze.py", stdin=stdin)
    assert run.code == 1 and run.stdout == ""
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def test_large_input_is_fast_and_output_bounded(data_processor):
    values = list(range(200_000))
    started = time.monotonic()
    out = data_processor("analyze.py", stdin=json.dumps(values))
    assert time.monotonic() - started < 10
    assert out.json()["analysis"]["sum"] == sum(values)
    assert len(out.stdout) < 1000

    wide = [{f"field_{i}": i for i in range(500)} for _ in range(50)]
    out = data_processor("analyze.py", stdin=json.dumps(wide))
    report = out.json()["analysis"]
    assert report["field_count"] == 500 and report["fields_truncated"] is True
    assert len(report["fields"]) == 100
    assert len(out.stdout) < 100_000

    words = " ".join(f"word{i}" for i in range(100_000))
    out = data_processor("analyze.py", stdin=json.dumps([words, "x" * 500_000]))
    stats = out.json()["analysis"]
    assert stats["unique_words"] == 100_001 and len(stats["top_words"]) == 10
    assert len(out.stdout) < 5000


# ---------------------------------------------------------------- format_converter.py

MARKDOWN = """Quarterly figures:

| region | sales | note |
|:-------|------:|:----:|
| North  | 1200  | pipe \\| inside |
| Süd    | 75.5  | |
| 東京   | 007   | line<br>break |

Source: internal.
"""


def test_markdown_on_stdin_converts_to_typed_json(data_processor):
    rows = data_processor("format_converter.py", "--to", "json", stdin=MARKDOWN).json()
    assert rows == [
        {"region": "North", "sales": 1200, "note": "pipe | inside"},
        {"region": "Süd", "sales": 75.5, "note": None},
        {"region": "東京", "sales": "007", "note": "line\nbreak"},
    ]


def test_markdown_to_csv_quotes_what_needs_quoting(data_processor):
    run = data_processor("format_converter.py", "--to", "csv", stdin=MARKDOWN)
    assert run.code == 0
    parsed = list(csv.reader(io.StringIO(run.stdout, newline="")))
    assert parsed[0] == ["region", "sales", "note"]
    assert parsed[3] == ["東京", "007", "line\nbreak"]
    assert '"line\nbreak"' in run.stdout


@pytest.mark.parametrize("middle", ["json", "csv"])
def test_markdown_round_trip(data_processor, middle):
    first = data_processor("format_converter.py", "--to", "markdown", stdin=MARKDOWN)
    converted = data_processor("format_converter.py", "--to", middle, stdin=first.stdout)
    back = data_processor("format_converter.py", "--to", "markdown", stdin=converted.stdout)
    assert back.code == 0
    assert back.stdout == first.stdout
    assert "pipe \\| inside" in back.stdout


def test_json_to_csv_uses_union_of_keys_in_first_seen_order(data_processor):
    rows = [{"b": 1, "a": "x"}, {"c": True, "a": None}, {"d": [1, 2], "b": {"k": "v"}}]
    run = data_processor("format_converter.py", "--to", "csv", stdin=json.dumps({"items": rows}))
    parsed = list(csv.reader(io.StringIO(run.stdout, newline="")))
    assert parsed == [
        ["b", "a", "c", "d"],
        ["1", "x", "", ""],
        ["", "", "true", ""],
        ['{"k":"v"}', "", "", "[1,2]"],
    ]


def test_csv_quoting_survives_a_round_trip(data_processor):
    rows = [{"text": 'He said "hi", then left', "n": "a,b"}, {"text": "two\nlines", "n": ""}]
    as_csv = data_processor("format_converter.py", "--to", "csv", stdin=json.dumps(rows))
    back = data_processor("format_converter.py", "--to", "json", "--strings", stdin=as_csv.stdout).json()
    assert back == rows


def test_scalars_become_a_value_column(data_processor):
    run = data_processor("format_converter.py", "--to", "csv", stdin='[1, "two", {"value": 3, "x": 4}]')
    assert run.stdout.splitlines() == ["value,x", "1,", "two,", "3,4"]


def test_tab_separated_input_is_detected(data_processor):
    rows = data_processor("format_converter.py", "--to", "json", stdin="a\tb\n1\tx y\n").json()
    assert rows == [{"a": 1, "b": "x y"}]


def test_blank_and_repeated_headers_get_names(data_processor):
    rows = data_processor("format_converter.py", "--to", "json", "--strings", stdin="a,,a\n1,2,3\n").json()
    assert rows == [{"a": "1", "column_2": "2", "a_2": "3"}]


def test_row_limit_is_reported_on_stderr(data_processor):
    rows = [{"i": i} for i in range(1500)]
    run = data_processor("format_converter.py", "--to", "csv", stdin=json.dumps(rows))
    assert run.code == 0
    assert len(run.stdout.splitlines()) == 1001
    assert "first 1000 of 1500 rows" in run.stderr
    run = data_processor("format_converter.py", "--to", "csv", "--max-rows", "0", stdin=json.dumps(rows))
    assert len(run.stdout.splitlines()) == 1501 and run.stderr == ""


@pytest.mark.parametrize("args,stdin,message", [
    (["--to", "json"], "a,b\n1,2,3\n", "has 3 fields but the header has 2"),
    (["--to", "json", "--from", "markdown"], "just words", "no Markdown table found"),
    (["--to", "csv"], "[1, 2", "invalid JSON"),
    (["--to", "csv"], "[]", "no columns"),
    (["--to", "json", "--from", "csv"], 'a,b\n"unterminated,1\n', "malformed CSV"),
    (["--to", "json"], "| a | b |\n|---|\n| 1 | 2 |\n", "one cell per header cell"),
])
def test_bad_tables_are_data_errors(data_processor, args, stdin, message):
    run = data_processor("format_converter.py", *args, stdin=stdin)
    assert run.code == 1 and run.stdout == ""
    assert message in run.stderr


def test_auto_detection_hint_on_misread_input(data_processor):
    run = data_processor("format_converter.py", "--to", "json", stdin="[tag],count\nx,1\n")
    assert run.code == 1
    assert "pass --from" in run.stderr
    rows = data_processor("format_converter.py", "--to", "json", "--from", "csv",
                          stdin="[tag],count\nx,1\n").json()
    assert rows == [{"[tag]": "x", "count": 1}]


def test_large_table_converts_quickly(data_processor):
    rows = [{"id": i, "name": f"name {i}", "score": i * 0.5} for i in range(20_000)]
    started = time.monotonic()
    run = data_processor("format_converter.py", "--to", "markdown", "--max-rows", "0", stdin=json.dumps(rows))
    assert run.code == 0 and time.monotonic() - started < 10
    assert len(run.stdout.splitlines()) == 20_002


CELL = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\r") | st.sampled_from(
        ["|", "\\", ",", '"', "\n", "<", ">"]
    ),
    max_size=12,
).filter(lambda s: s == s.strip() and "<br" not in s.lower())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({"k1": CELL, "k|2": CELL}), min_size=1, max_size=4))
def test_any_text_table_round_trips_through_markdown_and_csv(tmp_path_factory, rows):
    skill = BUNDLED / "data-processor"
    for target in ("markdown", "csv"):
        there = run_script(skill, "scripts/format_converter.py", "--to", target, stdin=json.dumps(rows))
        assert there.code == 0, there.stderr
        back = run_script(skill, "scripts/format_converter.py", "--to", "json", "--strings", "--from", target,
                          stdin=there.stdout)
        assert back.json() == rows, target


# ---------------------------------------------------------------- extract_info.py

def test_seed_example_finds_year_and_amount(data_processor):
    out = data_processor("extract_info.py", stdin="2024年销售额为100万元").json()
    assert out["extracted"]["dates"] == [{"text": "2024年", "iso": "2024"}]
    assert out["extracted"]["amounts"] == [{"text": "100万元", "value": 1000000, "currency": "CNY"}]
    assert out["extracted"]["numbers"] == []
    assert out["total"] == 2


@pytest.mark.parametrize("text,iso", [
    ("due 2024-03-05.", "2024-03-05"),
    ("due 2024/3/5", "2024-03-05"),
    ("due March 5, 2024", "2024-03-05"),
    ("due Mar. 5th 2024", "2024-03-05"),
    ("due 5 March 2024", "2024-03-05"),
    ("due 5 sept 2024", "2024-09-05"),
    ("截止2024年3月5日前", "2024-03-05"),
    ("2024年 3 月", "2024-03"),
    ("leap day 2024-02-29", "2024-02-29"),
])
def test_date_forms_are_normalised_to_iso(data_processor, text, iso):
    out = data_processor("extract_info.py", "--types", "dates", stdin=text).json()
    assert [d["iso"] for d in out["extracted"]["dates"]] == [iso]


def test_impossible_dates_are_not_dates(data_processor):
    out = data_processor("extract_info.py", "--types", "dates", stdin="2023-02-29 and February 30, 2024").json()
    assert out["extracted"]["dates"] == []


@pytest.mark.parametrize("text,value,currency", [
    ("cost $1,200.50 total", 1200.5, "USD"),
    ("only €30", 30, "EUR"),
    ("budget 100万元", 1_000_000, "CNY"),
    ("raised $1.1 million", 1_100_000, "USD"),
    ("revenue of 3.5亿美元", 350_000_000, "USD"),
    ("fee USD 250", 250, "USD"),
    ("fee 250 EUR", 250, "EUR"),
    ("paid RMB 80", 80, "CNY"),
    ("price ¥5万", 50_000, None),
    ("£7", 7, "GBP"),
    ("valued at $5M", 5_000_000, "USD"),
])
def test_money_amounts(data_processor, text, value, currency):
    out = data_processor("extract_info.py", "--types", "amounts", stdin=text).json()
    [amount] = out["extracted"]["amounts"]
    assert amount["value"] == value and amount["currency"] == currency


def test_each_span_is_reported_once_as_its_most_specific_kind(data_processor):
    text = "On 2024-03-05 we paid $1,200 (up 12.5%) for 3 licences; mail ops@example.com or see https://x.org/p?id=42."
    out = data_processor("extract_info.py", stdin=text).json()
    extracted = out["extracted"]
    assert [n["value"] for n in extracted["numbers"]] == [3]
    assert [p["value"] for p in extracted["percentages"]] == [12.5]
    assert extracted["emails"] == ["ops@example.com"]
    assert extracted["urls"] == ["https://x.org/p?id=42"]
    assert out["total"] == sum(out["counts"].values()) == 6


def test_numbers_skip_words_and_versions(data_processor):
    out = data_processor("extract_info.py", "--types", "numbers",
                         stdin="v2 of 3rd build 1.2.3 moved -7 to 1,234,567 and 3.14.").json()
    assert [n["value"] for n in out["extracted"]["numbers"]] == [-7, 1234567, 3.14]


def test_long_numbers_are_exact_and_digit_runs_are_not_numbers(data_processor):
    exact = "9" * 29
    out = data_processor("extract_info.py", "--types", "numbers", stdin=f"{exact} and {'7' * 31}").json()
    assert out["extracted"]["numbers"] == [{"text": exact, "value": int(exact)}]


def test_urls_drop_trailing_punctuation_but_keep_balanced_brackets(data_processor):
    text = "See https://en.wikipedia.org/wiki/Python_(language), or (www.example.org/a). 访问https://例子.cn/路径。"
    out = data_processor("extract_info.py", "--types", "urls", stdin=text).json()
    assert out["extracted"]["urls"] == [
        "https://en.wikipedia.org/wiki/Python_(language)", "www.example.org/a", "https://例子.cn/路径",
    ]


def test_types_option_limits_the_report(data_processor):
    out = data_processor("extract_info.py", "--types", "emails,urls", "--text", "a@b.io and 42").json()
    assert set(out["extracted"]) == {"emails", "urls"}
    assert out["extracted"]["emails"] == ["a@b.io"] and out["total"] == 1


def test_repeated_values_are_listed_once_and_lists_are_capped(data_processor):
    text = " ".join(f"user{i}@example.com" for i in range(150)) + " user0@example.com"
    out = data_processor("extract_info.py", "--types", "emails", "--max-per-type", "20", stdin=text).json()
    assert len(out["extracted"]["emails"]) == 20
    assert out["counts"]["emails"] == 151
    assert out["truncated"] == ["emails"]


def test_large_and_adversarial_text_is_fast_and_bounded(data_processor):
    blocks = [
        "a" * 1_000_000,
        "1" * 1_000_000,
        "x@" * 300_000,
        ("Paid $1,200.50 on March 5, 2024 to sales@example.com, 12% off. " * 20_000),
    ]
    for text in blocks:
        started = time.monotonic()
        run = data_processor("extract_info.py", stdin=text)
        assert run.code == 0, run.stderr
        assert time.monotonic() - started < 15
        assert len(run.stdout) < 50_000

"""Trigger eval and budget logic with deterministic stand-ins (NOT models): metrics, variants, inputs,
interruption. The real SDK paths are in test_sdk_clients.py."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from ipyskills.agent.loop import MatchingClient, call_target
from ipyskills.agent.prompt_lab.budget import ESTIMATE, skill_budget
from ipyskills.agent.prompt_lab.trigger_eval import eval_trigger, normalize_queries
from ipyskills.errors import ConfigError

QUERIES = [("Transform this JSON data to CSV", True), ("Analyse my CSV data set", True),
           ("Extract the text from this PDF", False), ("What time is it?", False)]


class Fixed:
    """Stand-in: answers each user text from a table {text: [(tool, args), ...]}; counts calls."""

    def __init__(self, table, on_call=None):
        self.table, self.on_call, self.calls = table, on_call, 0
        self.lock = threading.Lock()
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **kwargs):
        with self.lock:
            self.calls += 1
        if self.on_call:
            self.on_call(self)
        text = kwargs["messages"][-1]["content"]
        calls = self.table.get(text, [])
        message = {"role": "assistant", "content": None if calls else "no",
                   "tool_calls": [{"id": f"c{i}", "type": "function",
                                   "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)]}
        return {"choices": [{"message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 5}}


def test_metrics_count_runs_and_other_skills(reg):
    table = {
        QUERIES[0][0]: [("read_skill", '{"skill_name": "data-tool"}')],
        QUERIES[1][0]: [("read_skill", '{"skill_name": "pdf-processing"}')],  # a miss: loads another skill
        QUERIES[2][0]: [("read_skill", '{"skill_name": "data-tool/references/guide.md"}')],  # a file counts
        QUERIES[3][0]: [("execute_skill_script", '{"skill_name": "data-tool", "script_path": "x.py"}')],
    }
    report = eval_trigger(reg, "data-tool", QUERIES, client=Fixed(table), model="m", runs=2, parallel=3)
    v = report.variants[0]
    assert [q.rate for q in v.queries] == [1.0, 0.0, 1.0, 0.0]  # execute_skill_script is not a trigger
    assert v.queries[1].other_skills == {"pdf-processing": 2}
    assert (v.precision, v.recall, v.accuracy) == (0.5, 0.5, 0.5)
    assert v.passed == 2 and v.input_tokens == 800 and v.output_tokens == 40
    assert "FAIL" in str(report) and report.done == report.planned == 8


def test_variants_side_by_side_best_first_and_the_file_is_untouched(reg):
    before = reg.get("data-tool").skill_md.read_bytes()
    report = eval_trigger(reg, "data-tool", QUERIES, client=MatchingClient(), model="stand-in", runs=1,
                          descriptions=["Things.", "Transform, analyse and convert JSON or CSV data sets."])
    labels = [v.label for v in report.ranked()]
    assert labels[-1] == "variant 1" and report.best.accuracy == 1.0
    assert report.variants[1].recall == 0.0
    assert [row["variant"] for row in report.table()] == labels
    assert reg.get("data-tool").skill_md.read_bytes() == before
    assert set(report.query_table()[0]) == {"query", "should_trigger", *labels}


def test_the_whole_catalog_and_the_views_filter_are_sent(reg):
    client = MatchingClient()
    eval_trigger(reg.for_agent(allow=["data-tool", "pdf-processing"]), "data-tool", QUERIES[:1], client=client,
                 model="m", runs=1)
    request = client.requests[0]
    system = request["messages"][0]["content"]
    assert "<name>pdf-processing</name>" in system and "secret-ops" not in system
    assert request["tools"][0]["function"]["parameters"]["properties"]["skill_name"]["enum"] == [
        "data-tool", "pdf-processing"]
    with pytest.raises(ConfigError, match="hidden from the agent"):
        eval_trigger(reg.for_agent(allow=["pdf-processing"]), "data-tool", QUERIES, client=client, model="m")


def test_ctrl_c_keeps_what_finished(reg):
    def progress(done, total, outcome):  # Ctrl-C arrives in the caller's thread, which runs this
        if done == 3:
            raise KeyboardInterrupt

    report = eval_trigger(reg, "data-tool", QUERIES, client=Fixed({}), model="m", runs=5, parallel=1,
                          progress=progress)
    assert report.interrupted and report.done == 3 and report.planned == 20
    assert report.variants[0].runs == 3 and "interrupted" in str(report)


@pytest.mark.parametrize("bad, words", [([], "no queries"), ([("x", "maybe")], "true or false"),
                                        ([("", True)], "no text"), (42, "list of"), ([1], "pair")])
def test_bad_queries_are_config_errors(bad, words):
    with pytest.raises(ConfigError, match=words):
        normalize_queries(bad)


def test_queries_from_csv_json_dicts_and_dataframe(tmp_path):
    (tmp_path / "q.csv").write_text("query,should_trigger\nMake a CSV,true\nHello,no\n")
    (tmp_path / "q.json").write_text('[{"query": "Make a CSV", "should_trigger": true}]')
    assert normalize_queries(tmp_path / "q.csv") == [("Make a CSV", True), ("Hello", False)]
    assert normalize_queries(str(tmp_path / "q.json")) == [("Make a CSV", True)]
    assert normalize_queries([{"text": "a", "trigger": 1}]) == [("a", True)]
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"query": ["a", "b"], "should_trigger": [True, False]})
    assert normalize_queries(frame) == [("a", True), ("b", False)]


def test_bad_settings(reg):
    for kwargs, words in [({"runs": 0}, "runs"), ({"parallel": 0}, "parallel"), ({"model": ""}, "model")]:
        options = {"client": MatchingClient(), "model": "m"} | kwargs
        with pytest.raises(ConfigError, match=words):
            eval_trigger(reg, "data-tool", QUERIES, **options)
    with pytest.raises(ConfigError, match="does not exist"):
        eval_trigger(reg, "nope", QUERIES, client=MatchingClient(), model="m")


def test_call_target_levels():
    assert call_target("read_skill", {"skill_name": "a"}) == ("a", 2)
    assert call_target("read_skill", '{"skill_name": "a", "file_path": "r.md"}') == ("a", 3)
    assert call_target("read_skill", {"skill_name": "a/SKILL.md"}) == ("a", 2)
    assert call_target("execute_skill_script", {"skill_name": "a", "script_path": "s.py"}) == ("a", 3)
    assert call_target("read_skill", "not json") == ("", 0)


def test_budget_estimates_and_flags(reg, skills_root, new_skill):
    new_skill(skills_root, "wordy", "x " * 400, "word " * 30000)
    reg.refresh()
    report = skill_budget(reg)
    assert report.method == ESTIMATE
    wordy = next(s for s in report.skills if s.name == "wordy")
    assert any("level 1" in w for w in wordy.warnings) and any("level 2" in w for w in wordy.warnings)
    data = next(s for s in report.skills if s.name == "data-tool")
    assert data.files[0].path == "scripts/flood.py" or data.files[0].bytes >= data.files[-1].bytes
    assert any(f.chars is None for f in skill_budget(reg, "data-tool", largest=20).skills[0].files)  # binary
    assert "catalog total" in str(report)

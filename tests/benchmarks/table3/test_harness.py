"""The Table 3 miniature's harness: every row gets the same budget and data seed, results of other
settings are not mixed in, the reading sets each change beside the paper's and the noise, and the
harness resumes and survives a failing row.

The pieces are checked directly (no training). The harness itself is run as a user runs it,
`python scripts/table3.py`, on the tiny base for a few steps: a first run in which one row's
training fails (its model folder is blocked by a file) must finish the other row, report the
failure and write a well-formed table; the same command again must skip the finished row and
train the failed one.
"""

import json
import math
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from benchmarks.table3.report import COLUMNS, base_noise, changes_from_base
from benchmarks.table3.rows import table3_rows
from benchmarks.table3.runs import MixedTableError, TableSettings, check_same_settings, train_command


def rows_by_id(**kwargs):
    return {row.id: row for row in table3_rows(**kwargs)}


# --- the harness's pieces -------------------------------------------------------------------------

def test_every_row_gets_the_same_budget_and_data_seed(tmp_path):
    rows = rows_by_id()
    settings = TableSettings(minutes=3, data_seed=7)
    commands = [train_command(rows[row_id], settings, tmp_path / "start", tmp_path / "model", threads=1)
                for row_id in ("base", "C5")]
    for command in commands:
        assert command[command.index("--max_train_minutes") + 1] == "3"
        assert command[command.index("--data_seed") + 1] == "7"
        assert "--max_steps" not in command
    assert "--max_steps" in train_command(rows["base"], TableSettings(steps=5), tmp_path, tmp_path, 1)
    with pytest.raises(ValueError, match="one of the two"):
        TableSettings(minutes=3, steps=5)


def fake_result(row, ppl, bleu, settings):
    return {"row": row.id, "group": row.group, "config": row.config, "changes": row.changes, "seed": row.seed,
            "paper": row.paper, "note": row.note, "settings": settings,
            "train": {"steps": 100}, "dev": {"ppl": ppl, "bleu": bleu, "parameters": 2_500_000, "dev_sentences": 10}}


def test_results_from_other_settings_are_not_mixed_in(tmp_path):
    row = rows_by_id()["base"]
    (tmp_path / "rows").mkdir()
    made = TableSettings(minutes=3)
    (tmp_path / "rows" / "base.json").write_text(json.dumps(fake_result(row, 9.0, 30.0, made.__dict__)))
    check_same_settings(tmp_path, made)  # the same: fine
    with pytest.raises(MixedTableError, match="minutes 3"):
        check_same_settings(tmp_path, replace(made, minutes=4))


def test_reading_sets_each_change_beside_the_papers_and_the_noise():
    rows = rows_by_id(base_seeds=2)
    results = [fake_result(rows["base"], 10.0, 30.0, {}), fake_result(rows["base-2"], 10.2, 30.4, {}),
               fake_result(rows["A1"], 11.0, 29.0, {}),  # worse, as the paper's A1
               fake_result(rows["D3"], 10.1, 30.1, {}),  # within the seeds' spread
               fake_result(rows["E1"], 9.0, 31.5, {})]  # the paper saw no PPL change
    noise = base_noise(results)
    assert noise["bleu_spread"] == pytest.approx(0.4) and noise["ppl_spread_percent"] == pytest.approx(2.0)
    changes = {c["row"]: c for c in changes_from_base(results)}
    assert changes["A1"]["ppl_change_percent"] == pytest.approx(10.0)
    assert changes["A1"]["paper_bleu_change"] == pytest.approx(24.9 - 25.8)
    assert changes["A1"]["ppl_reading"] == changes["A1"]["bleu_reading"] == "as the paper"
    assert changes["D3"]["ppl_reading"] == changes["D3"]["bleu_reading"] == "within noise"
    assert changes["E1"]["ppl_reading"] == "differs (the paper: no change)"
    assert changes["E1"]["bleu_reading"] == "opposite to the paper"  # paper 25.7 < 25.8


# --- the harness, end to end ----------------------------------------------------------------------

TABLE3 = ["scripts/table3.py", "--base", "tiny", "--rows", "A1", "--steps", "3", "--max_train_samples", "40",
          "--max_eval_samples", "6", "--vocab_size", "200", "--max_tokens", "512", "--warmup_steps", "2"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


def run_table3(repo_root, output, runs):
    return subprocess.run([sys.executable, *TABLE3, "--output", str(output), "--runs_dir", str(runs)], cwd=repo_root,
                          env=ENV, capture_output=True, text=True, timeout=600)


def table_rows(readme: str) -> dict[str, list[str]]:
    """{row label: its cells} of the table in Table 3's columns."""
    lines = [line for line in readme.splitlines() if line.startswith("| ")]
    header = lines.index("| " + " | ".join(COLUMNS) + " |")
    table = {}
    for line in lines[header + 2:]:
        if not line.startswith("| ") or line.count("|") != len(COLUMNS) + 1:
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        table[cells[0]] = cells
    return table


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, repo_root):
    """The harness with row A1's model folder blocked, then again with it free."""
    output, runs = tmp_path_factory.mktemp("table3"), tmp_path_factory.mktemp("table3-runs")
    (runs / "A1").mkdir()
    (runs / "A1" / "model").write_text("a file where the row's model folder goes")
    first = run_table3(repo_root, output, runs)
    after_first = {path.name: path.read_text() for path in (output / "rows").iterdir()}
    readme_first = (output / "README.md").read_text()
    (runs / "A1" / "model").unlink()
    second = run_table3(repo_root, output, runs)
    return first, after_first, readme_first, second, output


@pytest.mark.slow
def test_a_failing_row_is_reported_and_the_other_finishes(two_runs):
    first, after_first, readme_first, _, _ = two_runs
    assert first.returncode == 1, first.stderr[-3000:]
    assert "A1: FAILED while training" in first.stdout and "Traceback" not in first.stderr
    assert first.stderr.strip().splitlines()[-1].startswith("error: 1 row(s) failed (A1)")
    assert set(after_first) == {"base.json", "A1.failed.json"}
    failure = json.loads(after_first["A1.failed.json"])
    assert failure["stage"].startswith("training") and failure["log_tail"]
    table = table_rows(readme_first)
    assert table["A1 (failed)"][-7:-3] == ["failed"] * 4 and "## Rows that failed" in readme_first


@pytest.mark.slow
def test_the_table_is_well_formed_and_resumes_without_redoing_a_row(two_runs):
    _, after_first, _, second, output = two_runs
    assert second.returncode == 0, second.stderr[-3000:]
    assert "base: already done" in second.stdout
    assert (output / "rows" / "base.json").read_text() == after_first["base.json"]  # not trained again
    assert not (output / "rows" / "A1.failed.json").exists()
    table = table_rows((output / "README.md").read_text())
    assert list(table) == ["base", "A1"]
    for cells in table.values():
        assert len(cells) == len(COLUMNS)
        for value in cells[1:14]:  # N ... params: every one a number
            assert math.isfinite(float(value)), cells
    assert table["A1"][4] == "1" and table["A1"][5] == table["A1"][2]  # h 1, d_k = d_model
    assert int(table["base"][9]) == 3  # the step budget
    report = json.loads((output / "results.json").read_text())
    assert [row["row"] for row in report["rows"]] == ["base", "A1"]
    assert report["command"].startswith("python scripts/table3.py --base tiny")
    assert report["machine"]["cpu"] and report["failed"] == []
    assert report["rows"][0]["dev"]["ppl"] > 1 and report["rows"][0]["dev"]["num_beams"] == 4
    assert (output / "table3.png").read_bytes().startswith(b"\x89PNG")

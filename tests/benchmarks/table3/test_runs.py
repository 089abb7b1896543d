"""Running the Table 3 miniature (runs.py) and reading it (report.py): the same budget and data seed for
every row, no mixing of settings, a reading beside the paper's and the noise; and, run as a user runs it, a
failing row (its model folder blocked by a file) reported while the other finishes, then the same command
resuming without redoing it."""

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

ROWS = {row.id: row for row in table3_rows(base_seeds=2)}


def test_every_row_gets_the_same_budget_and_data_seed(tmp_path):
    for row_id in ("base", "C5"):
        command = train_command(ROWS[row_id], TableSettings(minutes=3, data_seed=7), tmp_path, tmp_path, threads=1)
        assert command[command.index("--max_train_minutes") + 1] == "3" and "--max_steps" not in command
        assert command[command.index("--data_seed") + 1] == "7"
    assert "--max_steps" in train_command(ROWS["base"], TableSettings(steps=5), tmp_path, tmp_path, 1)
    with pytest.raises(ValueError) as err:
        TableSettings(minutes=3, steps=5)
    assert "one of the two" in str(err.value)


def result(row_id, ppl, bleu, settings=None):
    row = ROWS[row_id]
    return {"row": row.id, "group": row.group, "config": row.config, "changes": row.changes, "seed": row.seed,
            "paper": row.paper, "note": row.note, "settings": settings or {}, "train": {"steps": 100},
            "dev": {"ppl": ppl, "bleu": bleu, "parameters": 2_500_000, "dev_sentences": 10}}


def test_results_from_other_settings_are_not_mixed_in(tmp_path):
    (tmp_path / "rows").mkdir()
    made = TableSettings(minutes=3)
    (tmp_path / "rows" / "base.json").write_text(json.dumps(result("base", 9.0, 30.0, made.__dict__)))
    check_same_settings(tmp_path, made)  # the same: fine
    with pytest.raises(MixedTableError) as err:
        check_same_settings(tmp_path, replace(made, minutes=4))
    assert "minutes 3" in str(err.value)


def test_reading_sets_each_change_beside_the_papers_and_the_noise():
    results = [result("base", 10.0, 30.0), result("base-2", 10.2, 30.4), result("A1", 11.0, 29.0),  # worse, as the paper
               result("D3", 10.1, 30.1),  # within the seeds' spread
               result("E1", 9.0, 31.5)]  # the paper saw no PPL change, and a lower BLEU (25.7 < 25.8)
    noise = base_noise(results)
    assert noise["bleu_spread"] == pytest.approx(0.4) and noise["ppl_spread_percent"] == pytest.approx(2.0)
    changes = {c["row"]: c for c in changes_from_base(results)}
    assert changes["A1"]["ppl_change_percent"] == pytest.approx(10.0)
    assert changes["A1"]["paper_bleu_change"] == pytest.approx(24.9 - 25.8)
    assert [changes[row][key] for row in ("A1", "D3", "E1") for key in ("ppl_reading", "bleu_reading")] == [
        "as the paper", "as the paper", "within noise", "within noise", "differs (the paper: no change)",
        "opposite to the paper"]


def table_rows(readme: str) -> dict[str, list[str]]:
    """{row label: its cells} of the table in Table 3's columns."""
    lines = readme.splitlines()
    start = lines.index("| " + " | ".join(COLUMNS) + " |") + 2
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[start:]
             if line.count("|") == len(COLUMNS) + 1]
    return {row[0]: row for row in cells}


@pytest.mark.slow
def test_a_failing_row_is_reported_the_other_finishes_and_the_table_resumes(tmp_path, repo_root):
    """Row A1's model folder blocked by a file, then the same command again with it free."""
    output, runs = tmp_path / "table3", tmp_path / "runs"
    command = [sys.executable, "scripts/table3.py", "--base", "tiny", "--rows", "A1", "--steps", "3",
               "--max_train_samples", "40", "--max_eval_samples", "6", "--vocab_size", "200", "--max_tokens", "512",
               "--warmup_steps", "2", "--output", str(output), "--runs_dir", str(runs)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    (runs / "A1").mkdir(parents=True)
    (runs / "A1" / "model").write_text("a file where the row's model folder goes")
    first = subprocess.run(command, cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 1, first.stderr[-3000:]
    assert "A1: FAILED while training" in first.stdout and "Traceback" not in first.stderr
    assert first.stderr.strip().splitlines()[-1].startswith("error: 1 row(s) failed (A1)")
    assert sorted(path.name for path in (output / "rows").iterdir()) == ["A1.failed.json", "base.json"]
    failure = json.loads((output / "rows" / "A1.failed.json").read_text())
    assert failure["stage"].startswith("training") and failure["log_tail"]
    readme = (output / "README.md").read_text()
    assert table_rows(readme)["A1 (failed)"][-7:-3] == ["failed"] * 4 and "## Rows that failed" in readme
    base = (output / "rows" / "base.json").read_text()

    (runs / "A1" / "model").unlink()
    second = subprocess.run(command, cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "base: already done" in second.stdout and not (output / "rows" / "A1.failed.json").exists()
    assert (output / "rows" / "base.json").read_text() == base  # not trained again
    table = table_rows((output / "README.md").read_text())
    assert list(table) == ["base", "A1"]
    assert all(len(cells) == len(COLUMNS) and all(math.isfinite(float(v)) for v in cells[1:14])  # N ... params
               for cells in table.values())
    assert table["A1"][4] == "1" and table["A1"][5] == table["A1"][2]  # h 1, d_k = d_model
    assert int(table["base"][9]) == 3  # the step budget
    report = json.loads((output / "results.json").read_text())
    assert [row["row"] for row in report["rows"]] == ["base", "A1"] and report["failed"] == []
    assert report["command"].startswith("python scripts/table3.py --base tiny") and report["machine"]["cpu"]
    assert report["rows"][0]["dev"]["ppl"] > 1 and report["rows"][0]["dev"]["num_beams"] == 4
    assert (output / "table3.png").read_bytes().startswith(b"\x89PNG")

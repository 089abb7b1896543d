"""benchmarks/report.py: each recorded run gives back its targets and tables from its results.json alone."""

import json

import pytest

from benchmarks import report
from benchmarks.harness import OURS


def test_recorded_runs_render_to_their_tables(recorded_folder):
    """All figures, some of them, or the step before and after: the tables come back byte for byte."""
    recorded = json.loads((recorded_folder / "results.json").read_text())
    tables = (recorded_folder / "tables.md").read_text()
    if "baseline" in recorded:
        assert report.step_tables(recorded) == tables
    else:
        assert report.check_targets(recorded) == recorded["targets"]
        assert report.markdown_tables(recorded) == tables


@pytest.mark.parametrize("support,where,met", [("amx", "AMX", (False, True)),
                                               ("none", "on a CPU with AMX", (None, None))])
def test_bf16_targets_apply_only_on_a_cpu_with_amx(support, where, met):
    """With AMX the bf16 base step must double the fp32 step and the small one not lose; elsewhere both are n/a."""
    bf16 = {p: {"ratio_ours_over_marian": 1.2, OURS: {"bf16_over_fp32": r}} for p, r in (("small", 0.9), ("base", 2.5))}
    rows = report.check_targets({"machine": {"cpu_bf16": support}, "figure_1b_training_step_bf16": bf16})
    assert {row["target"]: row["met"] for row in rows if "the fp32 step" in row["target"]} == {
        f"bf16 small step ≥ 1× the fp32 step ({where})": met[0], f"bf16 base step ≥ 2× the fp32 step ({where})": met[1]}


def test_results_md_is_filled_between_its_markers_and_refused_without_them(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("head\n<!-- generated:cpu:begin -->\nold\n<!-- generated:cpu:end -->\ntail\n")
    report.fill_results_md(path, "cpu", "new tables")
    assert path.read_text() == "head\n<!-- generated:cpu:begin -->\nnew tables\n<!-- generated:cpu:end -->\ntail\n"
    with pytest.raises(ValueError) as err:
        report.fill_results_md(path, "gpu")
    assert "generated:gpu:begin" in str(err.value)

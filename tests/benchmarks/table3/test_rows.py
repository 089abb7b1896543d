"""Table 3's rows scaled to the miniature: each row keeps its intent (the paper's change at the
paper's ratio), the paper's numbers are all there, and a bad selection or scaling is refused."""

import pytest

from benchmarks.table3.rows import (
    BASES, PAPER_ROWS, RowSelectionError, complete_base, scale_changes, select_rows, table3_rows,
)

BASE = complete_base(BASES["multi30k"])


def rows_by_id(**kwargs):
    return {row.id: row for row in table3_rows(**kwargs)}


def test_row_a_changes_heads_at_equal_compute():
    rows = rows_by_id()
    for row_id in ("A1", "A2", "A3", "A4"):
        config = rows[row_id].config
        assert config["num_heads"] * config["d_k"] == config["num_heads"] * config["d_v"] == BASE["d_model"]
        assert {k: v for k, v in config.items() if k not in ("num_heads", "d_k", "d_v")} == \
            {k: v for k, v in BASE.items() if k not in ("num_heads", "d_k", "d_v")}
    # The paper's 1, 4, 16, 32 heads around its 8 are 1, 2, 8, 16 around our 4.
    assert [rows[f"A{i}"].config["num_heads"] for i in range(1, 5)] == [1, 2, 8, 16]


def test_row_b_shrinks_only_the_key_size():
    rows = rows_by_id()
    assert [rows["B1"].config["d_k"], rows["B2"].config["d_k"]] == [BASE["d_k"] // 4, BASE["d_k"] // 2]
    for row_id in ("B1", "B2"):
        assert rows[row_id].changes.keys() == {"d_k"}
        assert rows[row_id].config["d_v"] == BASE["d_v"] and rows[row_id].config["num_heads"] == BASE["num_heads"]


def test_row_c_scales_sizes_by_the_ratio_of_the_bases():
    rows = rows_by_id()
    assert [rows[f"C{i}"].config["num_layers"] for i in (1, 2, 3)] == [1, 3, 5]  # 2, 4, 8 × 4/6
    assert rows["C4"].config["d_model"] == 64 and rows["C5"].config["d_model"] == 256
    for row_id in ("C4", "C5"):  # wider heads with a wider model, h fixed, as in the paper
        config = rows[row_id].config
        assert config["num_heads"] == BASE["num_heads"] and config["d_k"] * config["num_heads"] == config["d_model"]
    assert [rows["C6"].config["d_ff"], rows["C7"].config["d_ff"]] == [256, 1024]


def test_rows_d_and_e_take_rates_and_positions_as_they_are():
    rows = rows_by_id()
    assert rows["D1"].changes == {"dropout": 0.0} and rows["D4"].changes == {"label_smoothing": 0.2}
    assert rows["E1"].changes == {"positional_encoding": "learned"}
    assert rows["D5"].paper is None and rows["D5"].note  # ours, said so


def test_every_paper_row_is_there_once_with_its_numbers():
    rows = rows_by_id(base_seeds=2)
    assert list(rows)[:2] == ["base", "base-2"] and rows["base-2"].seed == rows["base"].seed + 1
    for row_id, _, ppl, bleu, _ in PAPER_ROWS:
        assert rows[row_id].paper["ppl"] == ppl and rows[row_id].paper["bleu"] == bleu


def test_scaling_refuses_a_row_whose_heads_do_not_divide_the_width():
    with pytest.raises(ValueError, match="not divisible"):
        scale_changes({"num_heads": 32}, dict(BASES["multi30k"], d_model=120))  # 16 heads


def test_selecting_rows():
    rows = table3_rows()
    assert [row.id for row in select_rows(rows, "B,E1")] == ["base", "B1", "B2", "E1"]
    assert [row.id for row in select_rows(rows, "B", include_base=False)] == ["B1", "B2"]
    assert len(select_rows(rows, None)) == len(rows)
    with pytest.raises(RowSelectionError, match="F"):
        select_rows(rows, "A,F")

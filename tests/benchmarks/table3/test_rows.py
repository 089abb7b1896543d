"""Table 3's rows scaled to the miniature: each keeps its intent (the paper's change at the paper's ratio), the
paper's numbers are all there, a bad selection or scaling is refused."""

import pytest

from benchmarks.table3.rows import (BASES, PAPER_ROWS, RowSelectionError, complete_base, scale_changes, select_rows,
                                   table3_rows)

BASE = complete_base(BASES["multi30k"])
ROWS = {row.id: row for row in table3_rows(base_seeds=2)}


def sizes(name, *row_ids):
    return [ROWS[row_id].config[name] for row_id in row_ids]


def test_each_row_keeps_its_intent_and_the_papers_numbers():
    # (A) The paper's 1, 4, 16, 32 heads around its 8 are 1, 2, 8, 16 around our 4, at equal compute.
    assert sizes("num_heads", "A1", "A2", "A3", "A4") == [1, 2, 8, 16]
    heads = ("num_heads", "d_k", "d_v")
    for config in (ROWS[row_id].config for row_id in ("A1", "A2", "A3", "A4")):
        assert config["num_heads"] * config["d_k"] == config["num_heads"] * config["d_v"] == BASE["d_model"]
        assert {k: v for k, v in config.items() if k not in heads} == {k: v for k, v in BASE.items() if k not in heads}
    # (B, C) sizes scaled by the ratio of the bases; B the key size alone; C4, C5 wider heads with h fixed.
    assert sizes("d_k", "B1", "B2") == [BASE["d_k"] // 4, BASE["d_k"] // 2]
    assert ROWS["B1"].changes.keys() == ROWS["B2"].changes.keys() == {"d_k"}
    assert sizes("num_layers", "C1", "C2", "C3") == [1, 3, 5]  # 2, 4, 8 × 4/6
    assert sizes("d_model", "C4", "C5") == [64, 256] and sizes("d_ff", "C6", "C7") == [256, 1024]
    assert all(ROWS[r].config["num_heads"] == BASE["num_heads"]
               and ROWS[r].config["d_k"] * BASE["num_heads"] == ROWS[r].config["d_model"] for r in ("C4", "C5"))
    # (D, E) rates and positions as they are; D5 is ours, said so; the base again with the next seed.
    assert ROWS["D1"].changes == {"dropout": 0.0} and ROWS["D4"].changes == {"label_smoothing": 0.2}
    assert ROWS["E1"].changes == {"positional_encoding": "learned"} and ROWS["D5"].paper is None and ROWS["D5"].note
    assert list(ROWS)[:2] == ["base", "base-2"] and ROWS["base-2"].seed == ROWS["base"].seed + 1
    assert all(ROWS[row_id].paper["ppl"] == ppl and ROWS[row_id].paper["bleu"] == bleu
               for row_id, _, ppl, bleu, _ in PAPER_ROWS)


def test_selecting_rows_and_refusing_bad_ones():
    rows = table3_rows()
    assert [row.id for row in select_rows(rows, "B,E1")] == ["base", "B1", "B2", "E1"]
    assert [row.id for row in select_rows(rows, "B", include_base=False)] == ["B1", "B2"]
    assert len(select_rows(rows, None)) == len(select_rows(rows, "all")) == len(rows)
    with pytest.raises(RowSelectionError) as err:
        select_rows(rows, "A,F")
    assert "F" in str(err.value)
    with pytest.raises(ValueError) as err:  # 16 heads do not divide a width of 120
        scale_changes({"num_heads": 32}, dict(BASES["multi30k"], d_model=120))
    assert "not divisible" in str(err.value)

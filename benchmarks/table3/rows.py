"""Table 3's rows as the paper prints them, each scaled around a smaller base by the rule of docs/table3.md: sizes ×
our base's ratio to the paper's on that axis, d_k = d_v = d_model / h where h or d_model changes, d_k alone scaled
like a size (row B), rates and positions as they are. D5 is ours. Standard library only."""

from __future__ import annotations

from dataclasses import dataclass, field

# Table 3's base row: the values every other row keeps unless it lists its own.
PAPER_BASE = dict(num_layers=6, d_model=512, d_ff=2048, num_heads=8, d_k=64, d_v=64, dropout=0.1,
                  label_smoothing=0.1, positional_encoding="sinusoidal")
PAPER_BASE_RESULT = dict(steps="100K", ppl=4.92, bleu=25.8, params=65)

# (row id, the values the paper lists for it, its PPL (dev), BLEU (dev), params × 10^6 or None where blank).
PAPER_ROWS = (
    ("A1", dict(num_heads=1, d_k=512, d_v=512), 5.29, 24.9, None),
    ("A2", dict(num_heads=4, d_k=128, d_v=128), 5.00, 25.5, None),
    ("A3", dict(num_heads=16, d_k=32, d_v=32), 4.91, 25.8, None),
    ("A4", dict(num_heads=32, d_k=16, d_v=16), 5.01, 25.4, None),
    ("B1", dict(d_k=16), 5.16, 25.1, 58),
    ("B2", dict(d_k=32), 5.01, 25.4, 60),
    ("C1", dict(num_layers=2), 6.11, 23.7, 36),
    ("C2", dict(num_layers=4), 5.19, 25.3, 50),
    ("C3", dict(num_layers=8), 4.88, 25.5, 80),
    ("C4", dict(d_model=256, d_k=32, d_v=32), 5.75, 24.5, 28),
    ("C5", dict(d_model=1024, d_k=128, d_v=128), 4.66, 26.0, 168),
    ("C6", dict(d_ff=1024), 5.12, 25.4, 53),
    ("C7", dict(d_ff=4096), 4.75, 26.2, 90),
    ("D1", dict(dropout=0.0), 5.77, 24.6, None),
    ("D2", dict(dropout=0.2), 4.95, 25.5, None),
    ("D3", dict(label_smoothing=0.0), 4.67, 25.3, None),
    ("D4", dict(label_smoothing=0.2), 5.47, 25.7, None),
    ("E1", dict(positional_encoding="learned"), 4.92, 25.7, None),
)
# Rows of ours, in the same form, with no numbers from the paper.
EXTRA_ROWS = (("D5", dict(dropout=0.3), "not in Table 3: the big model's P_drop"),)

# What the paper found, row group by row group (§6.2), for the reading of the miniature.
PAPER_FINDINGS = {
    "A": "single-head attention is 0.9 BLEU worse than the best setting; quality also drops off with too many heads",
    "B": "reducing the key size d_k hurts model quality",
    "C": "bigger models are better",
    "D": "dropout is very helpful in avoiding over-fitting; label smoothing hurts perplexity but improves BLEU",
    "E": "learned positional embeddings give nearly identical results to the sinusoids",
}

# Our bases: "multi30k" is the shipped model's architecture (hub_card/config.json), "tiny" is for tests.
BASES = {
    "multi30k": dict(num_layers=4, d_model=128, d_ff=512, num_heads=4, dropout=0.1, label_smoothing=0.1,
                     positional_encoding="sinusoidal"),
    "tiny": dict(num_layers=2, d_model=32, d_ff=64, num_heads=4, dropout=0.0, label_smoothing=0.1,
                 positional_encoding="sinusoidal"),
}
DEFAULT_BASE = "multi30k"

SIZE_AXES = ("num_layers", "d_model", "d_ff", "num_heads")
GROUPS = ("A", "B", "C", "D", "E")


class RowSelectionError(ValueError):  # a --rows value that names no row of the table
    pass


@dataclass(frozen=True)
class Row:
    """A row: id ("base", "base-2" (another seed), "A1", ...), group ("base", "A", ...), config (VaswaniConfig's
    names), the values changed from our base, and the paper's row it stands for."""
    id: str
    group: str
    config: dict
    changes: dict
    seed: int
    paper: dict | None = None  # the paper's row: its listed values and its ppl, bleu, params
    note: str = ""
    paper_changes: dict = field(default_factory=dict)


def complete_base(base: dict) -> dict:
    """`base` with d_k = d_v = d_model / h filled in (§3.2.2)."""
    if base["d_model"] % base["num_heads"]:
        raise ValueError(f"the base's d_model {base['d_model']} is not divisible by h {base['num_heads']}.")
    head = base["d_model"] // base["num_heads"]
    return {**base, "d_k": base.get("d_k", head), "d_v": base.get("d_v", head)}


def scale_changes(paper_changes: dict, base: dict) -> dict:
    """The paper's changes to its base, as changes to `base` by the rule of the module docstring."""
    base = complete_base(base)
    scaled = lambda name: max(1, round(paper_changes[name] * base[name] / PAPER_BASE[name]))  # noqa: E731
    changes = {name: scaled(name) if name in SIZE_AXES else value for name, value in paper_changes.items()
               if name not in ("d_k", "d_v")}  # rates and the kind of positions: as they are
    if "d_k" in paper_changes and not {"num_heads", "d_model"} & set(paper_changes):
        changes["d_k"] = scaled("d_k")  # row B: the key size alone, scaled like a size; d_v stays
    elif {"num_heads", "d_model"} & set(changes):
        d_model, heads = changes.get("d_model", base["d_model"]), changes.get("num_heads", base["num_heads"])
        if d_model % heads:
            raise ValueError(f"scaled row has d_model {d_model} not divisible by h {heads}; choose another base.")
        changes["d_k"] = changes["d_v"] = d_model // heads  # h · d_k = d_model, as in the paper
    return changes


def table3_rows(base_name: str = DEFAULT_BASE, seed: int = 42, base_seeds: int = 1) -> list[Row]:
    """Every row of the miniature, in the paper's order: the base (with `base_seeds` seeds), A1 ... E1, D5."""
    if base_name not in BASES:
        raise ValueError(f"unknown base {base_name!r}; choose one of {', '.join(BASES)}.")
    base, paper_base = complete_base(BASES[base_name]), dict(PAPER_BASE, **PAPER_BASE_RESULT)
    rows = [Row(id="base" if k == 0 else f"base-{k + 1}", group="base", config=dict(base), changes={},
                seed=seed + k, paper=paper_base, note="" if k == 0 else f"the base again, seed {seed + k}")
            for k in range(base_seeds)]
    for row_id, paper_changes, ppl, bleu, params in PAPER_ROWS:
        changes = scale_changes(paper_changes, base)
        rows.append(Row(id=row_id, group=row_id[0], config={**base, **changes}, changes=changes, seed=seed,
                        paper=dict(paper_changes, ppl=ppl, bleu=bleu, params=params), paper_changes=paper_changes))
    rows += [Row(id=row_id, group=row_id[0], config={**base, **changes}, changes=dict(changes), seed=seed, note=note)
             for row_id, changes, note in EXTRA_ROWS]
    return sorted(rows, key=lambda row: table_order(row.id))


def table_order(row_id: str) -> tuple:
    """Sort key of a row id in the table: the base and its seeds, then A1, A2, ..., E1."""
    group = "base" if row_id.startswith("base") else row_id[0]
    number = row_id.partition("-")[2] if group == "base" else row_id[1:]
    order = ("base", *GROUPS)
    return (order.index(group) if group in order else len(order), int(number) if number.isdigit() else 1, row_id)


def select_rows(rows: list[Row], wanted: str | None, include_base: bool = True) -> list[Row]:
    """The rows that `wanted` names ("A,B", "C4,D", "all"; None is all), in table order; the base
    rows (every seed) too unless `include_base` is False."""
    all_rows = wanted is None or wanted.strip().lower() == "all"
    names = {row.group for row in rows} if all_rows else {name.strip() for name in wanted.split(",") if name.strip()}
    unknown = sorted(names - {row.group for row in rows} - {row.id for row in rows})
    if unknown or not names:
        raise RowSelectionError(f"--rows {wanted!r}: {', '.join(unknown) or 'nothing'} names no row; give row "
                                f"groups ({', '.join(GROUPS)}) or row ids (A1, C4, ...), comma-separated.")
    return [row for row in rows if row.group in names or row.id in names or (include_base and row.group == "base")]

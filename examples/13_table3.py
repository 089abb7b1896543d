"""Example 13 — Table 3 in miniature, read beside the paper's.

Table 3 of the paper changes one thing at a time in the base model — the number of heads at
equal compute (A), the key size (B), depth and width (C), dropout and label smoothing (D), learned
positions (E) — and reports dev perplexity and BLEU. scripts/table3.py re-trains those rows,
scaled to a model that trains on a laptop, and writes its results to docs/table3/results.json
(the rule and how to read each row: docs/table3.md).

What this script shows:
1. every finished row's dev PPL and BLEU beside the paper's numbers for the row it scales;
2. each row's change from the base, beside the paper's change, read as "as the paper",
   "opposite to the paper" or "within noise" (no larger than the spread between the base's seeds);
3. a picture (13_table3.png): our change against the paper's, one point per row; points in the
   shaded quadrants moved the way the paper's did.

With no results yet (the full table takes about two hours of one core), it first runs a tiny
table of two rows for a few steps (the base and row A1, single-head attention) so that every
step above can be seen; its numbers mean nothing beyond that the harness works.

    python examples/13_table3.py                          # docs/table3/results.json, or a tiny table
    python examples/13_table3.py --results /tmp/table3/results.json

Code: `benchmarks/table3/rows.py` (the rows and the scaling rule),
`runs.py` (the harness), `scoring.py` (the measures), `report.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # draw to files; no display needed
import matplotlib.pyplot as plt

REPO = Path(__file__).resolve().parents[1]
OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
RESULTS = REPO / "docs" / "table3" / "results.json"
# The base and row A1 of the tiny base, 20 steps on 300 pairs, scored on 30 dev sentences.
TINY_TABLE = ["--base", "tiny", "--rows", "A1", "--steps", "20", "--max_train_samples", "300", "--max_eval_samples",
              "30", "--vocab_size", "400", "--max_tokens", "1024", "--warmup_steps", "10"]


def tiny_table(folder: Path) -> Path:
    """Run the two-row table into `folder`; its results.json."""
    command = [sys.executable, str(REPO / "scripts" / "table3.py"), *TINY_TABLE, "--output", str(folder / "table3"),
               "--runs_dir", str(folder / "runs")]
    print("No results yet: a tiny table of two rows for a few steps ...")
    print("  $ python scripts/table3.py " + " ".join(TINY_TABLE) + " --output ... --runs_dir ...")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: the tiny table failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return folder / "table3" / "results.json"


def print_rows(report: dict) -> None:
    print(f"\n{report['budget']} per row, {report['hardware']}")
    print(f"{'row':<8}{'changed':<34}{'PPL':>8}{'paper':>8}{'BLEU':>8}{'paper':>8}")
    for row in report["rows"]:
        changed = ", ".join(f"{k} {v}" for k, v in row["changes"].items()) or "the base"
        paper = row.get("paper") or {}
        paper_ppl = f"{paper['ppl']:.2f}" if paper.get("ppl") else "-"
        paper_bleu = f"{paper['bleu']:.1f}" if paper.get("bleu") else "-"
        print(f"{row['row']:<8}{changed[:33]:<34}{row['dev']['ppl']:>8.2f}{paper_ppl:>8}"
              f"{row['dev']['bleu']:>8.1f}{paper_bleu:>8}")


def print_changes(report: dict) -> None:
    noise = report.get("noise")
    if noise:
        print(f"\nbase seeds {noise['seeds']}: PPL spread {noise['ppl_spread_percent']:.1f} %, "
              f"BLEU spread {noise['bleu_spread']:.1f}")
    else:
        print("\none seed of the base: run-to-run noise not measured (scripts/table3.py --seeds 2)")
    print(f"{'row':<6}{'PPL change':>11}{'paper':>9}  {'reading':<32}{'BLEU change':>12}{'paper':>7}  reading")
    for c in report["changes_from_base"]:
        paper_ppl = f"{c['paper_ppl_change_percent']:+.1f}%" if c["paper_ppl_change_percent"] is not None else "-"
        paper_bleu = f"{c['paper_bleu_change']:+.1f}" if c["paper_bleu_change"] is not None else "-"
        print(f"{c['row']:<6}{c['ppl_change_percent']:>+10.1f}%{paper_ppl:>9}  {c['ppl_reading']:<32}"
              f"{c['bleu_change']:>+12.1f}{paper_bleu:>7}  {c['bleu_reading']}")


def label_points(axis, points) -> None:
    """Name every point where its label overlaps no other label or point (the nearest such place, with a
    leader line when it is not next to the point); the points of a Table 3 plot crowd near zero."""
    def box(x, y, dx, dy, text):  # display pixels of a label at an offset of (dx, dy) points
        scale = axis.figure.dpi / 72
        width, height = (5 * len(text) + 2) * scale, 10 * scale
        left = x + dx * scale - (width if dx < 0 else 0 if dx > 0 else width / 2)
        bottom = y + dy * scale - (height if dy < 0 else 0 if dy > 0 else height / 2)
        return left, bottom, left + width, bottom + height

    def overlaps(a, b):
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    pixels = [axis.transData.transform((x, y)) for x, y, _ in points]
    taken = [(x - 3, y - 3, x + 3, y + 3) for x, y in pixels]  # the markers
    frame = axis.bbox.extents
    offsets = [(5, 0), (-5, 0)] + [(r * dx, r * dy) for r in (10, 16, 24, 34, 46) for dx, dy in
                                   ((1, 0.7), (-1, 0.7), (1, -0.7), (-1, -0.7), (1, 0), (-1, 0), (0, 1), (0, -1))]
    for (x, y), (_, _, text) in zip(pixels, points):
        def cost(offset):
            b = box(x, y, *offset, text)
            outside = b[0] < frame[0] or b[1] < frame[1] or b[2] > frame[2] or b[3] > frame[3]
            return 1000 * outside + sum(overlaps(b, other) for other in taken)
        offset = min(offsets, key=cost)  # the first free place, nearest first
        taken.append(box(x, y, *offset, text))
        ha = "left" if offset[0] > 0 else "right" if offset[0] < 0 else "center"
        va = "bottom" if offset[1] > 0 else "top" if offset[1] < 0 else "center"
        axis.annotate(text, axis.transData.inverted().transform((x, y)), xytext=offset, textcoords="offset points",
                      fontsize=8, ha=ha, va=va,
                      arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6) if abs(offset[0]) > 5 or offset[1] else None)


def span(values: list, extra: float = 0.0) -> tuple:
    """Axis limits around `values`, 0 and ±`extra`, with a margin."""
    low, high = min(values + [-extra, 0.0]), max(values + [extra, 0.0])
    margin = 0.1 * (high - low) or 1e-3
    return low - margin, high + margin


def draw(report: dict, path: Path) -> None:
    changes = [c for c in report["changes_from_base"] if c["paper_bleu_change"] is not None]
    figure, axes = plt.subplots(1, 2, figsize=(12, 6))
    panels = (("paper_ppl_change_percent", "ppl_change_percent", "dev PPL change (%)", "ppl_spread_percent"),
              ("paper_bleu_change", "bleu_change", "dev BLEU change (points)", "bleu_spread"))
    noise = report.get("noise")
    for axis, (paper_key, ours_key, label, noise_key) in zip(axes, panels):
        xs = [c[paper_key] for c in changes]
        ys = [c[ours_key] for c in changes]
        # Limits that hug the points (and 0, and the noise band), so that the crowd near zero gets room.
        (x_lo, x_hi), (y_lo, y_hi) = span(xs), span(ys, noise[noise_key] if noise else 0.0)
        # The quadrants where ours moved the way the paper's did.
        axis.fill_between([0, x_hi], 0, y_hi, color="tab:green", alpha=0.08)
        axis.fill_between([x_lo, 0], y_lo, 0, color="tab:green", alpha=0.08)
        if noise:
            axis.axhspan(-noise[noise_key], noise[noise_key], color="0.85", label="within the base seeds' spread")
        axis.scatter(xs, ys, color="tab:blue", s=16, zorder=3)
        axis.axhline(0, color="0.4", linewidth=0.8)
        axis.axvline(0, color="0.4", linewidth=0.8)
        axis.set(xlim=(x_lo, x_hi), ylim=(y_lo, y_hi))
        axis.set_xlabel(f"the paper's {label}")
        axis.set_ylabel(f"this miniature's {label}")
        axis.grid(alpha=0.3)
    if noise:
        axes[0].legend(fontsize=8, loc="upper left")
    figure.suptitle(f"Table 3 in miniature: each row's change from the base ({report['budget']} per row)", fontsize=10)
    figure.tight_layout()
    for axis, (paper_key, ours_key, _, _) in zip(axes, panels):  # after the layout: label positions are final
        label_points(axis, [(c[paper_key], c[ours_key], c["row"]) for c in changes])
    figure.savefig(path, dpi=110, bbox_inches="tight")


def main():
    parser = argparse.ArgumentParser(description="Read the Table 3 miniature beside the paper's Table 3.")
    parser.add_argument("--results", type=Path, help=f"A results.json of scripts/table3.py (default: {RESULTS} "
                        "if it is there, else a tiny table run now)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        results = args.results or (RESULTS if RESULTS.is_file() else tiny_table(Path(scratch)))
        if not results.is_file():
            raise SystemExit(f"error: no results file {results}; run scripts/table3.py first")
        report = json.loads(results.read_text(encoding="utf-8"))
    print(f"results: {results}" if args.results or results == RESULTS else "results: the tiny table above")
    print_rows(report)
    print_changes(report)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "13_table3.png"
    draw(report, path)
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()

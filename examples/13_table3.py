"""Example 13 — Table 3 in miniature, read beside the paper's.

Table 3 changes one thing at a time in the base model (heads A, key size B, depth and width C, dropout and
label smoothing D, learned positions E); scripts/table3.py re-trains those rows at laptop scale into
docs/table3/results.json (docs/table3.md). This prints each row and its change from the base beside the
paper's, read as "as the paper", "opposite" or "within noise" (the base seeds' spread), and draws ours
against the paper's. Without results it first runs a tiny two-row table, which only shows the harness works.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import OUTPUT_DIR, plt

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "table3" / "results.json"
# The base and row A1 of the tiny base, 20 steps on 300 pairs, scored on 30 dev sentences.
TINY_TABLE = ["--base", "tiny", "--rows", "A1", "--steps", "20", "--max_train_samples", "300", "--max_eval_samples",
              "30", "--vocab_size", "400", "--max_tokens", "1024", "--warmup_steps", "10"]


def tiny_table(folder: Path) -> Path:
    """Run the two-row table into `folder`; its results.json."""
    print("No results yet: a tiny table of two rows for a few steps ...")
    print("  $ python scripts/table3.py " + " ".join(TINY_TABLE) + " --output ... --runs_dir ...")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "table3.py"), *TINY_TABLE, "--output",
                           str(folder / "table3"), "--runs_dir", str(folder / "runs")], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    if done.returncode != 0:
        raise SystemExit(f"error: the tiny table failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return folder / "table3" / "results.json"


def label_points(axis, points) -> None:
    """Name every point at the nearest place where its label overlaps no other label or point (with a
    leader line when not next to the point): the points of a Table 3 plot crowd near zero."""
    scale, frame = axis.figure.dpi / 72, axis.bbox.extents

    def box(x, y, dx, dy, text):  # display pixels of a label at an offset of (dx, dy) points
        width, height = (5 * len(text) + 2) * scale, 10 * scale
        left = x + dx * scale - (width if dx < 0 else 0 if dx > 0 else width / 2)
        bottom = y + dy * scale - (height if dy < 0 else 0 if dy > 0 else height / 2)
        return left, bottom, left + width, bottom + height

    def cost(b):  # outside the axes, then the number of overlaps
        outside = b[0] < frame[0] or b[1] < frame[1] or b[2] > frame[2] or b[3] > frame[3]
        return 1000 * outside + sum(b[0] < o[2] and o[0] < b[2] and b[1] < o[3] and o[1] < b[3] for o in taken)

    pixels = [axis.transData.transform((x, y)) for x, y, _ in points]
    taken = [(x - 3, y - 3, x + 3, y + 3) for x, y in pixels]  # the markers
    offsets = [(5, 0), (-5, 0)] + [(r * dx, r * dy) for r in (10, 16, 24, 34, 46) for dx, dy in
                                   ((1, 0.7), (-1, 0.7), (1, -0.7), (-1, -0.7), (1, 0), (-1, 0), (0, 1), (0, -1))]
    for (x, y), (_, _, text) in zip(pixels, points):
        offset = min(offsets, key=lambda o: cost(box(x, y, *o, text)))  # the first free place, nearest first
        taken.append(box(x, y, *offset, text))
        axis.annotate(text, axis.transData.inverted().transform((x, y)), xytext=offset, textcoords="offset points",
                      fontsize=8, ha="left" if offset[0] > 0 else "right" if offset[0] < 0 else "center",
                      va="bottom" if offset[1] > 0 else "top" if offset[1] < 0 else "center",
                      arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6) if abs(offset[0]) > 5 or offset[1] else None)


def span(values: list, extra: float = 0.0) -> tuple:
    """Axis limits around `values`, 0 and ±`extra`, with a margin."""
    low, high = min(values + [-extra, 0.0]), max(values + [extra, 0.0])
    margin = 0.1 * (high - low) or 1e-3
    return low - margin, high + margin


def shown(value, form: str, unit: str = "") -> str:  # "-" where the paper leaves the cell blank
    return "-" if value is None else format(value, form) + unit


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


print(f"\n{report['budget']} per row, {report['hardware']}")
print(f"{'row':<8}{'changed':<34}{'PPL':>8}{'paper':>8}{'BLEU':>8}{'paper':>8}")
for row in report["rows"]:
    changed = ", ".join(f"{k} {v}" for k, v in row["changes"].items()) or "the base"
    paper = row.get("paper") or {}
    print(f"{row['row']:<8}{changed[:33]:<34}{row['dev']['ppl']:>8.2f}{shown(paper.get('ppl') or None, '.2f'):>8}"
          f"{row['dev']['bleu']:>8.1f}{shown(paper.get('bleu') or None, '.1f'):>8}")
noise = report.get("noise")
print(f"\nbase seeds {noise['seeds']}: PPL spread {noise['ppl_spread_percent']:.1f} %, BLEU spread "
      f"{noise['bleu_spread']:.1f}" if noise else
      "\none seed of the base: run-to-run noise not measured (scripts/table3.py --seeds 2)")
print(f"{'row':<6}{'PPL change':>11}{'paper':>9}  {'reading':<32}{'BLEU change':>12}{'paper':>7}  reading")
for c in report["changes_from_base"]:
    print(f"{c['row']:<6}{c['ppl_change_percent']:>+10.1f}%{shown(c['paper_ppl_change_percent'], '+.1f', '%'):>9}  "
          f"{c['ppl_reading']:<32}{c['bleu_change']:>+12.1f}{shown(c['paper_bleu_change'], '+.1f'):>7}  "
          f"{c['bleu_reading']}")

changes = [c for c in report["changes_from_base"] if c["paper_bleu_change"] is not None]
figure, axes = plt.subplots(1, 2, figsize=(12, 6))
panels = (("paper_ppl_change_percent", "ppl_change_percent", "dev PPL change (%)", "ppl_spread_percent"),
          ("paper_bleu_change", "bleu_change", "dev BLEU change (points)", "bleu_spread"))
for axis, (paper_key, ours_key, label, noise_key) in zip(axes, panels):
    xs, ys = [c[paper_key] for c in changes], [c[ours_key] for c in changes]
    # Limits that hug the points (and 0, and the noise band), so that the crowd near zero gets room.
    (x_lo, x_hi), (y_lo, y_hi) = span(xs), span(ys, noise[noise_key] if noise else 0.0)
    axis.fill_between([0, x_hi], 0, y_hi, color="tab:green", alpha=0.08)  # where ours moved the paper's way
    axis.fill_between([x_lo, 0], y_lo, 0, color="tab:green", alpha=0.08)
    if noise:
        axis.axhspan(-noise[noise_key], noise[noise_key], color="0.85", label="within the base seeds' spread")
    axis.scatter(xs, ys, color="tab:blue", s=16, zorder=3)
    axis.axhline(0, color="0.4", linewidth=0.8)
    axis.axvline(0, color="0.4", linewidth=0.8)
    axis.set(xlim=(x_lo, x_hi), ylim=(y_lo, y_hi), xlabel=f"the paper's {label}", ylabel=f"this miniature's {label}")
    axis.grid(alpha=0.3)
if noise:
    axes[0].legend(fontsize=8, loc="upper left")
figure.suptitle(f"Table 3 in miniature: each row's change from the base ({report['budget']} per row)", fontsize=10)
figure.tight_layout()
for axis, (paper_key, ours_key, _, _) in zip(axes, panels):  # after the layout: label positions are final
    label_points(axis, [(c[paper_key], c[ours_key], c["row"]) for c in changes])
OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
figure.savefig(OUTPUT_DIR / "13_table3.png", dpi=110, bbox_inches="tight")
print(f"\nsaved {OUTPUT_DIR / '13_table3.png'}")

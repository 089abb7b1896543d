"""Example 13 — Table 3 in miniature, read beside the paper's.

Table 3 changes one thing at a time in the base model (heads A, key size B, depth and width C, dropout and
label smoothing D, learned positions E); scripts/table3.py re-trains those rows at laptop scale into
docs/table3/results.json (docs/table3.md). This prints each row and its change from the base beside the
paper's, read as "as the paper", "opposite" or "within noise" (the base seeds' spread), and draws ours
against the paper's.
"""

import argparse
import json
from pathlib import Path

from common import plt, save

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "table3" / "results.json"


def span(values: list, extra: float = 0.0) -> tuple:
    """Axis limits around `values`, 0 and ±`extra`, with a margin: the points crowd near zero."""
    low, high = min(values + [-extra, 0.0]), max(values + [extra, 0.0])
    margin = 0.1 * (high - low) or 1e-3
    return low - margin, high + margin


def shown(value, form: str, unit: str = "") -> str:  # "-" where the paper leaves the cell blank
    return "-" if value is None else format(value, form) + unit


parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--results", type=Path, default=RESULTS, help=f"a results.json of scripts/table3.py "
                    f"(default: {RESULTS})")
args = parser.parse_args()
if not args.results.is_file():
    raise SystemExit(f"error: no results file {args.results}; run scripts/table3.py first")
report = json.loads(args.results.read_text(encoding="utf-8"))

print(f"{report['budget']} per row, {report['hardware']}")
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
fig, axes = plt.subplots(1, 2, figsize=(12, 6))
panels = (("paper_ppl_change_percent", "ppl_change_percent", "dev PPL change (%)", "ppl_spread_percent"),
          ("paper_bleu_change", "bleu_change", "dev BLEU change (points)", "bleu_spread"))
for axis, (paper_key, ours_key, label, noise_key) in zip(axes, panels):
    xs, ys = [c[paper_key] for c in changes], [c[ours_key] for c in changes]
    (x_lo, x_hi), (y_lo, y_hi) = span(xs), span(ys, noise[noise_key] if noise else 0.0)
    axis.fill_between([0, x_hi], 0, y_hi, color="tab:green", alpha=0.08)  # where ours moved the paper's way
    axis.fill_between([x_lo, 0], y_lo, 0, color="tab:green", alpha=0.08)
    if noise:
        axis.axhspan(-noise[noise_key], noise[noise_key], color="0.85", label="within the base seeds' spread")
    axis.scatter(xs, ys, color="tab:blue", s=16, zorder=3)
    for x, y, c in zip(xs, ys, changes):
        axis.annotate(c["row"], (x, y), xytext=(4, 3), textcoords="offset points", fontsize=8)
    axis.axhline(0, color="0.4", linewidth=0.8)
    axis.axvline(0, color="0.4", linewidth=0.8)
    axis.set(xlim=(x_lo, x_hi), ylim=(y_lo, y_hi), xlabel=f"the paper's {label}", ylabel=f"this miniature's {label}")
    axis.grid(alpha=0.3)
if noise:
    axes[0].legend(fontsize=8, loc="upper left")
fig.suptitle(f"Table 3 in miniature: each row's change from the base ({report['budget']} per row)", fontsize=10)
save(fig, "13_table3.png")

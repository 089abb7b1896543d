"""figures.png of a benchmark run, from the results dict alone: figure 3 (decoding time against length),
figure 1 (training step) and figure 8 (every system's translation speed against its BLEU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .harness import MARIAN, OURS
from .report import RESULT_KEYS


def _plot_decoding(ax, f3: dict) -> None:
    import matplotlib.ticker

    lengths = np.array([int(k) for k in f3["lengths"]])
    styles = {"ours_cached_generate": ("C0", "o", "ours, cached generate"),
              "marian_cached_generate": ("C1", "s", "Marian, cached generate"),
              "ours_recomputing_greedy_decode": ("C3", "^", "ours, recomputing greedy_decode")}
    grid = np.linspace(lengths.min(), lengths.max(), 100)
    for name, (color, marker, label) in styles.items():
        ms = [f3["lengths"][str(k)][name]["ms_per_generated_token"] for k in lengths]
        fit = f3["fits"][name]
        ax.plot(lengths, ms, marker, color=color, label=f"{label} (total ∝ L^{fit['total_time_exponent']:.2f})")
        ax.plot(grid, fit["ms_per_token_intercept"] + fit["ms_per_token_per_unit_length"] * grid, "-",
                color=color, alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(k) for k in lengths])
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("forced output length L (tokens)")
    ax.set_ylabel("ms per generated token (log)")
    ax.set_title(f"Figure 3: greedy decoding, {f3['preset']}, batch {f3['batch_size']}\n"
                 "markers measured, lines: least-squares a + b·L", fontsize=10)
    ax.legend(fontsize=8)


def _plot_training(ax, f1: dict) -> None:
    presets = list(f1)
    x = np.arange(len(presets))
    ours = [f1[p][OURS]["tokens_per_second"] for p in presets]
    theirs = [f1[p][MARIAN]["tokens_per_second"] for p in presets]
    ax.bar(x - 0.2, ours, 0.4, label="modeling_vaswani", color="C0")
    ax.bar(x + 0.2, theirs, 0.4, label="MarianMTModel", color="C1")
    for i, p in enumerate(presets):
        ax.annotate(f"{f1[p]['ratio_ours_over_marian']:.2f}×", (x[i], max(ours[i], theirs[i])),
                    ha="center", va="bottom")
    ax.set_xticks(x, presets)
    ax.set_ylabel("real source+target tokens / s")
    ax.set_title("Figure 1: training step (forward + backward + Adam)\nsame Multi30k token-budget batches, "
                 "ours / Marian above the bars", fontsize=10)
    ax.legend(fontsize=8)


def _plot_translation(ax, f8: dict) -> None:
    # One marker shape per thread count.
    markers = "os^D"
    for t, (threads, entry) in enumerate(f8["threads"].items()):
        for i, (name, e) in enumerate(entry.items()):
            ax.plot(e["sentences_per_second"], e["bleu"], markers[t % len(markers)], color=f"C{i}",
                    label=name if t == 0 else None, markersize=7, alpha=0.85)
        ax.plot([], [], markers[t % len(markers)], color="grey", label=f"{threads} thread(s)")
    ax.set_xscale("log")
    ax.set_xlabel("sentences / s (log)")
    ax.set_ylabel("cased BLEU")
    ax.set_title(f"Figure 8: translating test_2016_flickr ({f8['sentences']} sentences, beam {f8['num_beams']})\n"
                 "speed against BLEU, same weights in every system", fontsize=10)
    ax.legend(fontsize=7)


def plot(results: dict, path: Path) -> None:
    """figures.png: figure 3 (left), figure 1 and, where measured, figure 8 (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f8 = results.get(RESULT_KEYS["test_set_translation"])
    f8 = f8 if f8 and "threads" in f8 else None
    fig, axes = plt.subplots(1, 3 if f8 else 2, figsize=(18 if f8 else 12, 4.8))
    left, right = axes[0], axes[1]
    if results.get(RESULT_KEYS["cached_vs_recomputing_decoding"]):
        _plot_decoding(left, results[RESULT_KEYS["cached_vs_recomputing_decoding"]])
    if results.get(RESULT_KEYS["training_step_speed"]):
        _plot_training(right, results[RESULT_KEYS["training_step_speed"]])
    if f8:
        _plot_translation(axes[2], f8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

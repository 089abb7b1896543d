"""Example 09 — §5.4 label smoothing (ε_ls = 0.1): a softer target, and what it rewards.

Instead of asking for probability 1 on the reference token y, the target q keeps 1 − ε on y and
spreads ε over the other V − 1 tokens (the paper does not say how ε is spread; this follows
tensor2tensor). The loss is the cross-entropy H(q, p) = −Σ_j q(j) log p(j). "This hurts
perplexity, as the model learns to be more unsure, but improves accuracy and BLEU score."

What this script shows:
1. the target q itself, read back from the package's loss function: for a softmax p = softmax(z)
   the gradient of H(q, p) with respect to the logits z is p − q, so q = p − ∂loss/∂z;
2. a confident prediction (p(y) ≈ 1) against a hedged one (p = q): without smoothing the
   confident one has the lower loss, with ε = 0.1 the hedged one does;
3. the loss as a function of p(y): its minimum moves from p(y) = 1 to p(y) = 1 − ε = 0.9.
   (PyTorch's `F.cross_entropy(..., label_smoothing=ε)` mixes in a uniform distribution over all
   V tokens instead, so its minimum sits at 1 − ε + ε/V; drawn for comparison.)

Code: `modeling_vaswani/model/label_smoothing.py` (`label_smoothed_cross_entropy`, `LABEL_SMOOTHING`).

    python examples/09_label_smoothing.py
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from modeling_vaswani.model.label_smoothing import LABEL_SMOOTHING, label_smoothed_cross_entropy

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
V, GOLD = 8, 3  # a toy vocabulary of 8 tokens; the reference token is id 3


def target_distribution(epsilon: float) -> torch.Tensor:
    """q recovered from the loss: ∂H(q, softmax(z))/∂z = softmax(z) − q, evaluated at z = 0."""
    logits = torch.zeros(V, requires_grad=True)
    label_smoothed_cross_entropy(logits[None], torch.tensor([GOLD]), epsilon).backward()
    return torch.softmax(logits.detach(), -1) - logits.grad


def logits_with_gold_probability(p_gold: float) -> torch.Tensor:
    """Logits whose softmax puts p_gold on GOLD and spreads the rest evenly over the others."""
    probabilities = torch.full((V,), (1 - p_gold) / (V - 1), dtype=torch.float64)
    probabilities[GOLD] = p_gold
    return probabilities.log()


def main():
    eps = LABEL_SMOOTHING
    q = target_distribution(eps)
    print(f"ε_ls = {eps}, V = {V}, reference token y = {GOLD}")
    print(f"smoothed target q = {q.numpy().round(4)}")
    print(f"  q(y) = {q[GOLD]:.4f} = 1 − ε;  every other q(j) = {q[0]:.4f} = ε/(V−1) = {eps / (V - 1):.4f};"
          f"  Σ q = {q.sum():.4f}")
    assert abs(q[GOLD] - (1 - eps)) < 1e-6 and abs(q[0] - eps / (V - 1)) < 1e-6

    labels = torch.tensor([GOLD])
    predictions = {
        "confident, p(y) = 0.999": logits_with_gold_probability(0.999),
        "hedged,    p = q (p(y) = 0.9)": logits_with_gold_probability(1 - eps),
    }
    print("\nloss of two predictions:")
    print(f"  {'prediction':<32} {'ε = 0 (plain CE)':>17} {'ε = 0.1':>9}")
    losses = {}
    for name, logits in predictions.items():
        plain = label_smoothed_cross_entropy(logits[None], labels, 0.0).item()
        smooth = label_smoothed_cross_entropy(logits[None], labels, eps).item()
        losses[name] = (plain, smooth)
        print(f"  {name:<32} {plain:>17.4f} {smooth:>9.4f}")
    (confident_plain, confident_smooth), (hedged_plain, hedged_smooth) = losses.values()
    assert confident_plain < hedged_plain and hedged_smooth < confident_smooth
    print("  without smoothing the confident prediction wins; with ε = 0.1 the hedged one does,")
    print("  and the smallest possible smoothed loss is the entropy of q: "
          f"{-(q * q.log()).sum():.4f} (reached at p = q)")

    grid = torch.linspace(0.3, 0.9999, 400, dtype=torch.float64)
    curves = {"ε = 0": [], f"ε = {eps} (this package, over V−1)": [], f"ε = {eps}, F.cross_entropy (uniform over V)": []}
    for p_gold in grid.tolist():
        logits = logits_with_gold_probability(p_gold)[None]
        values = (label_smoothed_cross_entropy(logits, labels, 0.0), label_smoothed_cross_entropy(logits, labels, eps),
                  F.cross_entropy(logits, labels, label_smoothing=eps))
        for curve, value in zip(curves.values(), values):
            curve.append(value.item())
    print("\nwhere each loss is smallest, as p(y) varies (the rest spread evenly):")
    minima = {}
    for name, values in curves.items():
        best = min(range(len(values)), key=values.__getitem__)
        minima[name] = grid[best].item()
        print(f"  {name:<45} at p(y) = {grid[best]:.3f}")
    print(f"  expected: 1, 1 − ε = {1 - eps:.3f}, and 1 − ε + ε/V = {1 - eps + eps / V:.3f}")
    assert abs(minima[f"ε = {eps} (this package, over V−1)"] - (1 - eps)) < 0.005

    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5))
    one_hot = torch.zeros(V)
    one_hot[GOLD] = 1
    axes[0].bar([i - 0.2 for i in range(V)], one_hot.numpy(), width=0.4, label="one-hot target (ε = 0)")
    axes[0].bar([i + 0.2 for i in range(V)], q.numpy(), width=0.4, label=f"smoothed target q (ε = {eps})")
    axes[0].set(xlabel="token id", ylabel="target probability", title=f"target for reference token {GOLD}")
    axes[0].set_xticks(range(V))
    axes[0].legend()
    for (name, values), style in zip(curves.items(), ("-", "-", ":")):
        axes[1].plot(grid.numpy(), values, style, label=name)
        axes[1].plot(minima[name], min(values), "ko", ms=4)
    axes[1].set(xlabel="probability the model gives the reference token, p(y)", ylabel="loss",
                title="the smoothed loss is smallest at p(y) = 1 − ε, not at 1", ylim=(0, 1.6))
    axes[1].grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "09_label_smoothing.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"saved {path}")


if __name__ == "__main__":
    main()

"""Example 09 — §5.4 label smoothing (ε_ls = 0.1): a softer target, and what it rewards.

The target q keeps 1 − ε on the reference and spreads ε over the other V − 1 (as tensor2tensor does), read
back from the package's loss; a hedged prediction beats a confident one, and the loss is smallest at
p(y) = 1 − ε, not 1 (PyTorch's `label_smoothing` at 1 − ε + ε/V). Code: `model/label_smoothing.py`.
"""

import torch
import torch.nn.functional as F

from common import plt, save
from modeling_vaswani.model.label_smoothing import LABEL_SMOOTHING as EPS, label_smoothed_cross_entropy

V, GOLD = 8, 3  # a toy vocabulary of 8 tokens; the reference token is id 3
labels = torch.tensor([GOLD])


def logits_with_gold_probability(p_gold: float) -> torch.Tensor:
    """(1, V) logits whose softmax puts p_gold on GOLD and spreads the rest evenly over the others."""
    probabilities = torch.full((V,), (1 - p_gold) / (V - 1), dtype=torch.float64)
    probabilities[GOLD] = p_gold
    return probabilities.log()[None]


# q recovered from the loss: ∂H(q, softmax(z))/∂z = softmax(z) − q, evaluated at z = 0.
logits = torch.zeros(V, requires_grad=True)
label_smoothed_cross_entropy(logits[None], labels, EPS).backward()
q = torch.softmax(logits.detach(), -1) - logits.grad
print(f"ε_ls = {EPS}, V = {V}, reference token y = {GOLD}\nsmoothed target q = {q.numpy().round(4)}\n"
      f"  q(y) = {q[GOLD]:.4f} = 1 − ε;  every other q(j) = {q[0]:.4f} = ε/(V−1) = {EPS / (V - 1):.4f};  Σ q = {q.sum():.4f}")
assert abs(q[GOLD] - (1 - EPS)) < 1e-6 and abs(q[0] - EPS / (V - 1)) < 1e-6

losses = [[label_smoothed_cross_entropy(logits_with_gold_probability(p), labels, e).item() for e in (0.0, EPS)]
          for p in (0.999, 1 - EPS)]
for name, (plain, smooth) in zip(("confident, p(y) = 0.999", "hedged,    p = q (p(y) = 0.9)"), losses):
    print(f"  loss of a {name}: {plain:.4f} with ε = 0, {smooth:.4f} with ε = {EPS}")
assert losses[0][0] < losses[1][0] and losses[1][1] < losses[0][1]  # smoothing turns the ranking round

grid = torch.linspace(0.3, 0.9999, 400, dtype=torch.float64)
ours = f"ε = {EPS} (this package, over V−1)"
loss_functions = {"ε = 0": lambda z: label_smoothed_cross_entropy(z, labels, 0.0),
                  ours: lambda z: label_smoothed_cross_entropy(z, labels, EPS),
                  f"ε = {EPS}, F.cross_entropy (uniform over V)": lambda z: F.cross_entropy(z, labels, label_smoothing=EPS)}
curves = {name: torch.tensor([loss(logits_with_gold_probability(p)).item() for p in grid.tolist()])
          for name, loss in loss_functions.items()}
minima = {name: grid[values.argmin()].item() for name, values in curves.items()}
print(f"\nthe smoothed loss is smallest at p(y) = {minima[ours]:.3f} = 1 − ε; F.cross_entropy's at 1 − ε + ε/V")
assert abs(minima[ours] - (1 - EPS)) < 0.005

fig, axes = plt.subplots(1, 2, figsize=(14, 4.5))
for shift, target, label in ((-0.2, [float(i == GOLD) for i in range(V)], "one-hot target (ε = 0)"),
                             (0.2, q.numpy(), f"smoothed target q (ε = {EPS})")):
    axes[0].bar([i + shift for i in range(V)], target, width=0.4, label=label)
axes[0].set(xlabel="token id", ylabel="target probability", title=f"target for reference token {GOLD}", xticks=range(V))
axes[0].legend()
for (name, values), style in zip(curves.items(), ("-", "-", ":")):
    axes[1].plot(grid.numpy(), values.numpy(), style, label=name)
    axes[1].plot(minima[name], values.min(), "ko", ms=4)
axes[1].set(xlabel="probability the model gives the reference token, p(y)", ylabel="loss",
            title="the smoothed loss is smallest at p(y) = 1 − ε, not at 1", ylim=(0, 1.6))
axes[1].grid(alpha=0.3)
axes[1].legend(fontsize=8)
save(fig, "09_label_smoothing.png")

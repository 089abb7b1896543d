"""Example 02 — §3.2.1, Eq. (1): Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, and why it divides by √d_k.

Part 1 works Eq. (1) by hand on 3 queries and 4 keys against the package's function. Part 2: q·k has variance
d_k, so unscaled the softmax saturates as d_k grows (nearly one-hot, tiny gradients). Code: `model/attention.py`.
"""

import math

import torch

from common import plt, save
from modeling_vaswani.model.attention import scaled_dot_product_attention

NUM_KEYS, TRIALS = 32, 2000  # part 2: keys each query chooses between, random queries per d_k

print("— Part 1: Eq. (1) by hand —")
# Query 0 points like key 0 and query 1 like key 2; query 2 scores keys 0, 2 and 3 equally,
# so it averages their values; key 1 is orthogonal to or opposite every query: least weight.
q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (T=3, d_k=2)
k = torch.tensor([[2.0, 0.0], [0.0, -2.0], [0.0, 2.0], [1.0, 1.0]])  # (K=4, d_k=2)
v = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])  # (K=4, d_v=3)
scores = q @ k.T / math.sqrt(2)  # (3, 4)
weights = torch.softmax(scores, dim=-1)  # (3, 4), rows sum to 1
output = weights @ v  # (3, 3)
for name, value in (("scores = Q Kᵀ / √2", scores), ("weights = softmax(scores), rows sum to 1", weights),
                    ("output = weights · V, each row a weighted average of V's rows", output)):
    print(f"{name}:\n{value.numpy().round(3)}")
library_output, library_weights = scaled_dot_product_attention(q, k, v)
difference = max((library_output - output).abs().max().item(), (library_weights - weights).abs().max().item())
print(f"modeling_vaswani.model.attention.scaled_dot_product_attention agrees: max difference {difference:.1e}")
assert difference < 1e-6

print(f"\n— Part 2: why √d_k ({TRIALS} random queries, {NUM_KEYS} keys each) —")
d_values = [2**n for n in range(11)]
generator = torch.Generator().manual_seed(0)
rows = []  # per d_k: Var(q·k), then the mean largest weight and mean entropy, unscaled and scaled
for d_k in d_values:
    q = torch.randn(TRIALS, 1, d_k, generator=generator)  # unit-variance components
    dots = (q @ torch.randn(TRIALS, NUM_KEYS, d_k, generator=generator).transpose(1, 2)).squeeze(1)  # var ≈ d_k
    p = torch.softmax(torch.stack([dots, dots / math.sqrt(d_k)]), dim=-1)  # (unscaled | scaled, TRIALS, NUM_KEYS)
    rows.append([dots.var().item(), *p.max(dim=-1).values.mean(-1).tolist(),
                 *(-(p * torch.log(p.clamp_min(1e-30))).sum(-1).mean(-1)).tolist()])
print(f"d_k = {d_values[-1]}: Var(q·k) = {rows[-1][0]:.0f}; largest weight {rows[-1][1]:.3f} unscaled, {rows[-1][2]:.3f} "
      f"scaled (uniform: {1 / NUM_KEYS:.3f}): unscaled, the softmax is nearly one-hot")

fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for axis, column, label in ((axes[0], 1, "mean largest softmax weight"), (axes[1], 3, "mean entropy (nats)")):
    axis.plot(d_values, [r[column] for r in rows], "o-", label="softmax(q·k)  (no scale)")
    axis.plot(d_values, [r[column + 1] for r in rows], "s-", label="softmax(q·k / √d_k)  (Eq. 1)")
    axis.set_xscale("log", base=2)
    axis.set(xlabel="d_k", ylabel=label)
    axis.grid(alpha=0.3)
    axis.legend()
axes[0].set_title("without the scale the softmax saturates")
axes[1].axhline(math.log(NUM_KEYS), color="gray", ls="--", lw=1)
axes[1].set_title(f"entropy of the weights over {NUM_KEYS} keys (dashed: uniform)")
save(fig, "02_scaled_dot_product_attention.png")

"""Example 02 — §3.2.1, Eq. (1): Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, and why it divides by √d_k.

Part 1 works Eq. (1) by hand on 3 queries and 4 keys, every step printed, and compares with the package's
function. Part 2: with unit-variance components q·k has variance d_k, so unscaled scores spread out as d_k
grows and the softmax saturates (nearly one-hot, tiny gradients); divided by √d_k they keep unit variance.
It plots the largest weight and the entropy against d_k. Code: `modeling_vaswani/model/attention.py`.
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
print("Q (3 queries × d_k=2):\n", q.numpy())
print("K (4 keys × d_k=2):\n", k.numpy())
print("V (4 values × d_v=3, row j = one-hot of key j, last row all ones):\n", v.numpy())
print("scores = Q Kᵀ / √2:\n", scores.numpy().round(3))
print("weights = softmax(scores) over the keys (each row sums to 1):\n", weights.numpy().round(3))
print("output = weights · V (each row a weighted average of V's rows):\n", output.numpy().round(3))
library_output, library_weights = scaled_dot_product_attention(q, k, v)
difference = max((library_output - output).abs().max().item(), (library_weights - weights).abs().max().item())
print(f"modeling_vaswani.model.attention.scaled_dot_product_attention agrees: max difference {difference:.1e}")
assert difference < 1e-6

print(f"\n— Part 2: why √d_k ({TRIALS} random queries, {NUM_KEYS} keys each) —")
d_values = [2**n for n in range(11)]
generator = torch.Generator().manual_seed(0)
rows = []  # per d_k: Var(q·k), and the mean largest weight and mean entropy of the softmax, scaled or not
for d_k in d_values:
    q = torch.randn(TRIALS, 1, d_k, generator=generator)  # unit-variance components
    k = torch.randn(TRIALS, NUM_KEYS, d_k, generator=generator)
    dots = (q @ k.transpose(1, 2)).squeeze(1)  # (TRIALS, NUM_KEYS), variance ≈ d_k
    row = {"d_k": d_k, "var": dots.var().item()}
    for name, s in (("unscaled", dots), ("scaled", dots / math.sqrt(d_k))):
        p = torch.softmax(s, dim=-1)
        row[f"max_{name}"] = p.max(dim=-1).values.mean().item()
        row[f"entropy_{name}"] = -(p * torch.log(p.clamp_min(1e-30))).sum(-1).mean().item()
    rows.append(row)
print(f"{'d_k':>5} {'Var(q·k)':>9} {'max weight':>20} {'entropy (nats)':>22}")
print(f"{'':>5} {'':>9} {'unscaled':>10} {'scaled':>9} {'unscaled':>11} {'scaled':>10}")
for r in rows:
    print(f"{r['d_k']:>5} {r['var']:>9.1f} {r['max_unscaled']:>10.3f} {r['max_scaled']:>9.3f} "
          f"{r['entropy_unscaled']:>11.3f} {r['entropy_scaled']:>10.3f}")
print(f"uniform weights over {NUM_KEYS} keys would have entropy ln {NUM_KEYS} = {math.log(NUM_KEYS):.3f}; "
      "unscaled, the softmax becomes nearly one-hot as d_k grows, scaled it does not.")

fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for axis, key, label in ((axes[0], "max", "mean largest softmax weight"), (axes[1], "entropy", "mean entropy (nats)")):
    axis.plot(d_values, [r[f"{key}_unscaled"] for r in rows], "o-", label="softmax(q·k)  (no scale)")
    axis.plot(d_values, [r[f"{key}_scaled"] for r in rows], "s-", label="softmax(q·k / √d_k)  (Eq. 1)")
    axis.set_xscale("log", base=2)
    axis.set(xlabel="d_k", ylabel=label)
    axis.grid(alpha=0.3)
    axis.legend()
axes[0].set_title("without the scale the softmax saturates")
axes[1].axhline(math.log(NUM_KEYS), color="gray", ls="--", lw=1)
axes[1].set_title(f"entropy of the weights over {NUM_KEYS} keys (dashed: uniform)")
save(fig, "02_scaled_dot_product_attention.png")

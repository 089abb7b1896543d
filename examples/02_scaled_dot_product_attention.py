"""Example 02 — §3.2.1, Eq. (1): scaled dot-product attention, and why it divides by √d_k.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

What this script shows:
1. Eq. (1) on a tiny hand-made example (3 queries, 4 keys, d_k = 2), every intermediate printed:
   the scores, the softmax weights (each row sums to 1) and the output (a weighted average of
   the value rows). The package's `scaled_dot_product_attention` gives the same numbers.
2. The reason for the scale. If the components of q and k are independent with mean 0 and
   variance 1, then q·k has variance d_k, so without the scale the scores spread out as d_k grows
   and the softmax saturates: nearly all weight on one key (low entropy), tiny gradients. Divided
   by √d_k the scores keep unit variance whatever d_k is. The plot shows the largest softmax
   weight and the entropy of the weights against d_k, with and without the scale.

Code: `modeling_vaswani/model/attention.py` (`scaled_dot_product_attention`).

    python examples/02_scaled_dot_product_attention.py
"""

import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from modeling_vaswani.model.attention import scaled_dot_product_attention

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
NUM_KEYS = 32  # keys each query chooses between in part 2
TRIALS = 2000  # random queries per d_k


def tiny_example():
    # Query 0 points like key 0 and query 1 like key 2; query 2 scores keys 0, 2 and 3 equally,
    # so it averages their values; key 1 is orthogonal to or opposite every query: least weight.
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (T=3, d_k=2)
    k = torch.tensor([[2.0, 0.0], [0.0, -2.0], [0.0, 2.0], [1.0, 1.0]])  # (K=4, d_k=2)
    v = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])  # (K=4, d_v=3)
    d_k = q.shape[-1]

    scores = q @ k.T / math.sqrt(d_k)  # (3, 4)
    weights = torch.softmax(scores, dim=-1)  # (3, 4), rows sum to 1
    output = weights @ v  # (3, 3)
    print("Q (3 queries × d_k=2):\n", q.numpy())
    print("K (4 keys × d_k=2):\n", k.numpy())
    print("V (4 values × d_v=3, row j = one-hot of key j, last row all ones):\n", v.numpy())
    print(f"scores = Q Kᵀ / √{d_k}:\n", scores.numpy().round(3))
    print("weights = softmax(scores) over the keys (each row sums to 1):\n", weights.numpy().round(3))
    print("output = weights · V (each row a weighted average of V's rows):\n", output.numpy().round(3))

    library_output, library_weights = scaled_dot_product_attention(q, k, v)
    difference = max((library_output - output).abs().max().item(), (library_weights - weights).abs().max().item())
    print(f"modeling_vaswani.model.attention.scaled_dot_product_attention agrees: max difference {difference:.1e}")
    assert difference < 1e-6


def saturation_curves(d_values):
    """For each d_k: mean largest weight and mean entropy of softmax over NUM_KEYS keys, scaled or not."""
    generator = torch.Generator().manual_seed(0)
    rows = []
    for d_k in d_values:
        q = torch.randn(TRIALS, 1, d_k, generator=generator)  # unit-variance components
        k = torch.randn(TRIALS, NUM_KEYS, d_k, generator=generator)
        dots = (q @ k.transpose(1, 2)).squeeze(1)  # (TRIALS, NUM_KEYS), variance ≈ d_k
        stats = {"d_k": d_k, "var": dots.var().item()}
        for name, scores in (("unscaled", dots), ("scaled", dots / math.sqrt(d_k))):
            p = torch.softmax(scores, dim=-1)
            stats[f"max_{name}"] = p.max(dim=-1).values.mean().item()
            stats[f"entropy_{name}"] = -(p * torch.log(p.clamp_min(1e-30))).sum(-1).mean().item()
        rows.append(stats)
    return rows


def main():
    print("— Part 1: Eq. (1) by hand —")
    tiny_example()

    print(f"\n— Part 2: why √d_k ({TRIALS} random queries, {NUM_KEYS} keys each) —")
    d_values = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    rows = saturation_curves(d_values)
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
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "02_scaled_dot_product_attention.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()

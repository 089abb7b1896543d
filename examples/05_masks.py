"""Example 05 — §3.2.3 masks: hiding padding and hiding the future.

No query attends to `<pad>`; in decoder self-attention position i sees only positions ≤ i (auto-regressive);
padded targets need both. The masks are additive: 0 where allowed, else `torch.finfo(dtype).min` added to
Q Kᵀ / √d_k (the paper's −∞; the finite value also gives hidden keys weight 0, and a row with nothing
visible no NaN). Shown for two sentences, with the weights of equal scores and a mask under a key/value
cache. Code: `modeling_vaswani/model/masking.py`.
"""

import numpy as np
import torch

from common import plt, save
from modeling_vaswani.model.masking import causal_mask, decoder_self_attention_mask, padding_mask

DTYPE = torch.float32


def as_grid(additive: torch.Tensor) -> str:
    """Additive mask (T, K) → rows of '●' (visible) and '·' (hidden)."""
    return "\n".join("    " + " ".join("●" if v == 0 else "·" for v in row) for row in additive.tolist())


# Two sentences padded to length 6: the first has 4 real tokens, the second 6.
attention_mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
B, L = attention_mask.shape
print(f"attention_mask (1 = token, 0 = <pad>):\n{attention_mask.numpy()}")
pad = padding_mask(attention_mask, DTYPE)  # (B, 1, 1, L): broadcast over heads and queries
causal = causal_mask(L, L, attention_mask.device, DTYPE)  # (1, 1, L, L)
both = decoder_self_attention_mask(L, L, attention_mask, attention_mask.device, DTYPE)  # (B, 1, L, L)
print(f"\npadding_mask shape {tuple(pad.shape)}, causal_mask {tuple(causal.shape)}, "
      f"decoder_self_attention_mask {tuple(both.shape)}; hidden entries hold {torch.finfo(DTYPE).min:.3e}")
print()
for title, mask in (("sentence 1, padding mask (rows: queries, columns: keys)", pad[0, 0].expand(L, L)),
                    ("causal mask (query i sees keys ≤ i)", causal[0, 0]),
                    ("sentence 1, causal ∧ padding (decoder self-attention)", both[0, 0])):
    print(f"{title}:\n{as_grid(mask)}")

# Equal scores everywhere: the softmax spreads evenly over the visible keys only.
weights = torch.softmax(torch.zeros(B, 1, L, L) + both, dim=-1)
print("softmax of all-equal scores under that mask, sentence 1 (hidden keys get exactly 0):")
print(weights[0, 0].numpy().round(2))
assert torch.all(weights[both == torch.finfo(DTYPE).min] == 0) and not torch.isnan(weights).any()

# With a key/value cache (generation): 2 new queries at positions 3 and 4, 5 keys in all.
cached = causal_mask(2, 5, attention_mask.device, DTYPE)
print(f"\ncausal mask for 2 new queries after 3 cached positions (shape {tuple(cached.shape)}): "
      "the diagonal shifts by the cache length")
print(as_grid(cached[0, 0]))

panels = [
    (pad[0, 0].expand(L, L), "padding, sentence 1\n(keys 4, 5 are <pad>)"),
    (pad[1, 0].expand(L, L), "padding, sentence 2\n(no <pad>)"),
    (causal[0, 0], "causal\n(no looking ahead)"),
    (both[0, 0], "causal ∧ padding, sentence 1\n(decoder self-attention)"),
    (cached[0, 0], "causal with a cache:\n2 new queries, 3 cached keys"),
]
fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
for axis, (mask, title) in zip(axes, panels):
    visible = (mask == 0).float().numpy()
    axis.imshow(visible, cmap="Greens", vmin=0, vmax=2.0)
    for (i, j), v in np.ndenumerate(visible):
        axis.text(j, i, "0" if v else "min", ha="center", va="center", fontsize=8)
    axis.set_xticks(range(mask.shape[1]))
    axis.set_yticks(range(mask.shape[0]))
    axis.set(title=title, xlabel="key position")
axes[-1].set_yticks(range(2), ["3", "4"])  # the new queries' absolute positions
axes[0].set_ylabel("query position")
fig.suptitle("Additive masks (§3.2.3): green = may attend (add 0), white = hidden "
             f"(add min = torch.finfo({DTYPE}).min = {torch.finfo(DTYPE).min:.1e}, not −∞)")
save(fig, "05_masks.png")

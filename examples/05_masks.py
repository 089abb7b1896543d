"""Example 05 — §3.2.3 masks: hiding padding and hiding the future.

Additive masks: 0 where allowed, else `torch.finfo(dtype).min` (the paper's −∞; finite, so a row with nothing
visible gives no NaN) added to Q Kᵀ / √d_k; shown for two padded sentences, combined, and under a key/value
cache. Code: `model/masking.py`.
"""

import numpy as np
import torch

from common import plt, save
from modeling_vaswani.model.masking import causal_mask, decoder_self_attention_mask, padding_mask

DTYPE = torch.float32
attention_mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])  # 1 = token, 0 = <pad>
B, L = attention_mask.shape
pad = padding_mask(attention_mask, DTYPE)  # (B, 1, 1, L): broadcast over heads and queries
causal = causal_mask(L, L, attention_mask.device, DTYPE)  # (1, 1, L, L)
both = decoder_self_attention_mask(L, L, attention_mask, attention_mask.device, DTYPE)  # (B, 1, L, L)
cached = causal_mask(2, 5, attention_mask.device, DTYPE)  # generation: 2 new queries (positions 3, 4), 5 keys
print(f"attention_mask (two sentences padded to {L}):\n{attention_mask.numpy()}")
print(f"padding_mask {tuple(pad.shape)}, causal_mask {tuple(causal.shape)}, decoder_self_attention_mask "
      f"{tuple(both.shape)}; hidden entries hold {torch.finfo(DTYPE).min:.3e}")
panels = {"padding, sentence 1\n(keys 4, 5 are <pad>)": pad[0, 0].expand(L, L),
          "padding, sentence 2\n(no <pad>)": pad[1, 0].expand(L, L), "causal\n(no looking ahead)": causal[0, 0],
          "causal ∧ padding, sentence 1\n(decoder self-attention)": both[0, 0],
          "causal with a cache:\n2 new queries, 3 cached keys": cached[0, 0]}
# Equal scores everywhere: the softmax spreads evenly over the visible keys only.
weights = torch.softmax(torch.zeros(B, 1, L, L) + both, dim=-1)
print(f"softmax of equal scores under causal ∧ padding, sentence 1 (hidden keys get exactly 0):\n"
      f"{weights[0, 0].numpy().round(2)}")
assert torch.all(weights[both == torch.finfo(DTYPE).min] == 0) and not torch.isnan(weights).any()

fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
for axis, (title, mask) in zip(axes, panels.items()):
    axis.imshow((mask == 0).float().numpy(), cmap="Greens", vmin=0, vmax=2.0)
    for (i, j), v in np.ndenumerate(mask.numpy()):
        axis.text(j, i, "0" if v == 0 else "min", ha="center", va="center", fontsize=8)
    axis.set(title=title, xlabel="key position", xticks=range(mask.shape[1]), yticks=range(mask.shape[0]))
axes[-1].set_yticks(range(2), ["3", "4"])  # the new queries' absolute positions
axes[0].set_ylabel("query position")
fig.suptitle("Additive masks (§3.2.3): green = may attend (add 0), white = hidden "
             f"(add min = torch.finfo({DTYPE}).min = {torch.finfo(DTYPE).min:.1e}, not −∞)")
save(fig, "05_masks.png")

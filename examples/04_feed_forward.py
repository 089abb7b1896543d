"""Example 04 — §3.3, Eq. (2): the position-wise feed-forward network FFN(x) = max(0, x W_1 + b_1) W_2 + b_2.

"Applied to each position separately and identically" (only attention mixes positions), checked four ways,
one of them two kernel-size-1 convolutions; drawn with its hidden layer. Code: `model/feed_forward.py`.
"""

import torch
import torch.nn.functional as F

from common import plt, save
from modeling_vaswani.model.feed_forward import PositionwiseFeedForward

D_MODEL, D_FF, T = 16, 64, 10  # the base model: 512 and 2048 (d_ff = 4 · d_model)

torch.manual_seed(0)
ffn = PositionwiseFeedForward(D_MODEL, D_FF).eval()
x = torch.randn(1, T, D_MODEL)
x[0, 7] = x[0, 2]  # the same vector at positions 2 and 7
w1, w2 = ffn.linear_1, ffn.linear_2
with torch.no_grad():
    whole, hidden, permutation = ffn(x), torch.relu(w1(x)), torch.randperm(T)  # (1, T, d_model), (1, T, d_ff)
    conv = F.conv1d(torch.relu(F.conv1d(x.transpose(1, 2), w1.weight[:, :, None], w1.bias)),  # channels = features
                    w2.weight[:, :, None], w2.bias).transpose(1, 2)
    checks = {"whole sequence vs one position at a time":
              whole - torch.cat([ffn(x[:, t:t + 1]) for t in range(T)], dim=1),
              "FFN(shuffled x) vs shuffled FFN(x)": ffn(x[:, permutation]) - whole[:, permutation],
              "output at position 2 vs position 7 (same input)": whole[0, 2] - whole[0, 7],
              "two kernel-size-1 convolutions vs FFN": conv - whole}
print(f"x {tuple(x.shape)} → hidden {tuple(hidden.shape)} → FFN(x) {tuple(whole.shape)}; W_1, b_1, W_2, b_2: "
      f"{sum(p.numel() for p in ffn.parameters()):,} parameters shared by all {T} positions")
for name, difference in checks.items():
    print(f"  max |difference|, {name}: {difference.abs().max():.1e}")
    assert difference.abs().max() < 1e-5
print(f"fraction of hidden units the ReLU sets to exactly 0: {(hidden == 0).float().mean():.2f}")

fig, axes = plt.subplots(1, 3, figsize=(15, 4), gridspec_kw={"width_ratios": [D_MODEL, D_FF, D_MODEL]})
for axis, values, title in zip(axes, (x[0], hidden[0], whole[0]), ("input x  (T × d_model)",
                                                                   "max(0, x W₁ + b₁)  (T × d_ff)", "FFN(x)  (T × d_model)")):
    axis.imshow(values.numpy(), cmap="RdBu", vmin=-values.abs().max(), vmax=values.abs().max(), aspect="auto")
    axis.set(title=title, xlabel="feature", yticks=range(T))
axes[0].set_ylabel("position (rows 2 and 7 are the same input)")
fig.suptitle("Eq. (2): each row is transformed on its own, by the same weights (white in the middle: ReLU zeros)")
save(fig, "04_feed_forward.png")

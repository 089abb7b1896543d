"""Example 04 — §3.3, Eq. (2): the position-wise feed-forward network FFN(x) = max(0, x W_1 + b_1) W_2 + b_2.

"Applied to each position separately and identically": the whole sequence gives what each position gives
alone, shuffled positions give shuffled outputs, equal vectors equal outputs (only attention mixes
positions); it is also two kernel-size-1 convolutions. Drawn: input, hidden layer after the ReLU (about
half exactly zero), output. Code: `modeling_vaswani/model/feed_forward.py`.
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
with torch.no_grad():
    whole = ffn(x)  # (1, T, d_model)
    one_at_a_time = torch.stack([ffn(x[:, t:t + 1])[:, 0] for t in range(T)], dim=1)
    permutation = torch.randperm(T)
    shuffled = ffn(x[:, permutation])
    hidden = torch.relu(ffn.linear_1(x))  # max(0, x W_1 + b_1), (1, T, d_ff)
    # Two convolutions with kernel size 1 over the sequence axis (channels = features).
    conv = F.conv1d(x.transpose(1, 2), ffn.linear_1.weight[:, :, None], ffn.linear_1.bias)
    conv = F.conv1d(torch.relu(conv), ffn.linear_2.weight[:, :, None], ffn.linear_2.bias).transpose(1, 2)

print(f"W_1: {tuple(ffn.linear_1.weight.T.shape)} (d_model × d_ff), W_2: {tuple(ffn.linear_2.weight.T.shape)}"
      f" (d_ff × d_model); {sum(p.numel() for p in ffn.parameters()):,} parameters shared by all {T} positions")
print(f"shapes: x {tuple(x.shape)} → hidden {tuple(hidden.shape)} → FFN(x) {tuple(whole.shape)}")
checks = {
    "whole sequence vs one position at a time": (whole - one_at_a_time).abs().max().item(),
    "FFN(shuffled x) vs shuffled FFN(x)": (shuffled - whole[:, permutation]).abs().max().item(),
    "output at position 2 vs position 7 (same input)": (whole[0, 2] - whole[0, 7]).abs().max().item(),
    "two kernel-size-1 convolutions vs FFN": (conv - whole).abs().max().item(),
}
for name, error in checks.items():
    print(f"  max |difference|, {name}: {error:.1e}")
    assert error < 1e-5
print(f"fraction of hidden units the ReLU sets to exactly 0: {(hidden == 0).float().mean():.2f}")

fig, axes = plt.subplots(1, 3, figsize=(15, 4), gridspec_kw={"width_ratios": [D_MODEL, D_FF, D_MODEL]})
panels = [(x[0], "input x  (T × d_model)"), (hidden[0], "max(0, x W₁ + b₁)  (T × d_ff)"),
          (whole[0], "FFN(x)  (T × d_model)")]
for axis, (values, title) in zip(axes, panels):
    limit = values.abs().max().item()
    axis.imshow(values.numpy(), cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    axis.set(title=title, xlabel="feature")
    axis.set_yticks(range(T))
axes[0].set_ylabel("position (rows 2 and 7 are the same input)")
fig.suptitle("Eq. (2): each row is transformed on its own, by the same weights (white in the middle: ReLU zeros)")
save(fig, "04_feed_forward.png")

"""Example 01 — §3.5 positional encoding: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(…).

Draws the PE matrix, a few dimensions, and PE(p)·PE(q), which depends on p − q only; checks §3.5's claim that
PE(pos + k) = M_k · PE(pos), M_k turning each (sin, cos) pair by ω·k. Code: `model/positional_encoding.py`.
"""

import torch

from common import plt, save
from modeling_vaswani.model.positional_encoding import sinusoidal_table

D_MODEL, POSITIONS = 64, 128


def rotation_for_offset(k: int, d_model: int) -> torch.Tensor:
    """M_k: per pair (2i, 2i+1) the rotation by ω_i·k, ω_i = 10000^(−2i/d_model): sin(ω(pos+k)) = cos(ωk)·s +
    sin(ωk)·c and cos(ω(pos+k)) = −sin(ωk)·s + cos(ωk)·c, with s = sin(ω·pos), c = cos(ω·pos)."""
    angles = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model) * k
    c, s = torch.cos(angles), torch.sin(angles)
    return torch.block_diag(*[torch.stack([torch.stack([ci, si]), torch.stack([-si, ci])]) for ci, si in zip(c, s)])


pe = sinusoidal_table(POSITIONS + 64, D_MODEL, dtype=torch.float64)  # (positions, d_model)
print(f"PE table: {tuple(pe.shape)} (positions × d_model); wavelengths grow geometrically from 2π to 10000·2π")
print("PE(pos + k) = M_k · PE(pos), checked for every pos in 0 … 127:")
for k in (1, 5, 17, 64):
    error = (pe[:POSITIONS] @ rotation_for_offset(k, D_MODEL).T - pe[k:k + POSITIONS]).abs().max().item()
    print(f"  k = {k:3d}: max |M_k·PE(pos) − PE(pos+k)| = {error:.2e}")
    assert error < 1e-9, "the rotation identity must hold to float64 precision"

similarity = pe[:POSITIONS] @ pe[:POSITIONS].T  # Σ cos(ω·(p − q)): a function of the offset only

fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
fig.colorbar(axes[0].imshow(pe[:POSITIONS].numpy(), aspect="auto", cmap="RdBu", vmin=-1, vmax=1), ax=axes[0])
axes[0].set(title="PE matrix (§3.5)", xlabel="dimension (even: sin, odd: cos)", ylabel="position")
for dim in (0, 1, 6, 20, 40):
    axes[1].plot(pe[:POSITIONS, dim].numpy(), label=f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'})")
axes[1].set(title="single dimensions against position", xlabel="position", ylabel="PE value")
axes[1].legend(fontsize=8, loc="lower left")
fig.colorbar(axes[2].imshow(similarity.numpy(), cmap="viridis"), ax=axes[2])
axes[2].set(title="PE(p)·PE(q): depends on p − q", xlabel="position q", ylabel="position p")
save(fig, "01_positional_encoding.png")

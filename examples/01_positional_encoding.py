"""Example 01 — §3.5 positional encoding: a table of sines and cosines, and why offsets are linear.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

What this script shows:
1. the PE matrix as a heat-map (positions × dimensions): fast stripes on the left (short
   wavelengths), slow ones on the right (wavelengths up to 10000·2π);
2. a few single dimensions plotted against the position;
3. the paper's claim that "for any fixed offset k, PE(pos+k) can be represented as a linear
   function of PE(pos)": each (sin, cos) pair at frequency ω is rotated by the angle ω·k, so
   PE(pos + k) = M_k · PE(pos) with M_k block-diagonal, one 2×2 rotation per pair, the same
   matrix for every pos. The script builds M_k and prints the largest error over all positions.

Code: `modeling_vaswani/model/positional_encoding.py` (`sinusoidal_table`, `SinusoidalPositionalEncoding`).

    python examples/01_positional_encoding.py
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # draw to files; no display needed
import matplotlib.pyplot as plt
import torch

from modeling_vaswani.model.positional_encoding import sinusoidal_table

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
D_MODEL = 64
POSITIONS = 128


def rotation_for_offset(k: int, d_model: int) -> torch.Tensor:
    """M_k (d_model × d_model): for each pair (2i, 2i+1) the rotation by ω_i·k, ω_i = 10000^(−2i/d_model).

    With s = sin(ω·pos), c = cos(ω·pos):
        sin(ω(pos+k)) =  cos(ωk)·s + sin(ωk)·c
        cos(ω(pos+k)) = −sin(ωk)·s + cos(ωk)·c
    Nothing in M_k depends on pos: that is what "a linear function of PE(pos)" means.
    """
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for two_i in range(0, d_model, 2):
        omega = 10000.0 ** (-two_i / d_model)
        angle = torch.tensor(omega * k, dtype=torch.float64)
        c, s = torch.cos(angle), torch.sin(angle)
        m[two_i, two_i], m[two_i, two_i + 1] = c, s
        m[two_i + 1, two_i], m[two_i + 1, two_i + 1] = -s, c
    return m


def main():
    pe = sinusoidal_table(POSITIONS + 64, D_MODEL, dtype=torch.float64)  # (positions, d_model)
    print(f"PE table: {tuple(pe.shape)} (positions × d_model); even columns sin, odd columns cos")
    print(f"PE[0, :6] = {pe[0, :6].numpy().round(3)}   (sin 0 = 0, cos 0 = 1)")
    print(f"every entry lies in [-1, 1]: min {pe.min():.3f}, max {pe.max():.3f}")
    wavelengths = [2 * torch.pi * 10000 ** (two_i / D_MODEL) for two_i in (0, D_MODEL // 2, D_MODEL - 2)]
    print("wavelengths of pairs 0, middle, last: " + ", ".join(f"{w:,.1f}" for w in wavelengths)
          + "  (a geometric progression from 2π towards 10000·2π)")

    print("\nPE(pos + k) = M_k · PE(pos), checked for every pos in 0 … 127:")
    for k in (1, 5, 17, 64):
        m_k = rotation_for_offset(k, D_MODEL)
        predicted = pe[:POSITIONS] @ m_k.T  # row pos: M_k · PE(pos)
        error = (predicted - pe[k:k + POSITIONS]).abs().max().item()
        print(f"  k = {k:3d}: max |M_k·PE(pos) − PE(pos+k)| = {error:.2e}")
        assert error < 1e-9, "the rotation identity must hold to float64 precision"

    # Distances: nearby positions have similar encodings, a property attention can exploit.
    similarity = pe[:POSITIONS] @ pe[:POSITIONS].T
    print(f"\nPE(10)·PE(10+k) for k = 0, 1, 5, 20: "
          + ", ".join(f"{similarity[10, 10 + k]:.2f}" for k in (0, 1, 5, 20))
          + "  (a sum of cos(ω·k): it depends on the offset k only, not on the position)")

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    image = axes[0].imshow(pe[:POSITIONS].numpy(), aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    axes[0].set(title="PE matrix (§3.5)", xlabel="dimension (even: sin, odd: cos)", ylabel="position")
    fig.colorbar(image, ax=axes[0])
    for dim in (0, 1, 6, 20, 40):
        axes[1].plot(pe[:POSITIONS, dim].numpy(), label=f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'})")
    axes[1].set(title="single dimensions against position", xlabel="position", ylabel="PE value")
    axes[1].legend(fontsize=8, loc="lower left")
    image = axes[2].imshow(similarity.numpy(), cmap="viridis")
    axes[2].set(title="PE(p)·PE(q): depends on p − q", xlabel="position q", ylabel="position p")
    fig.colorbar(image, ax=axes[2])
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "01_positional_encoding.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()

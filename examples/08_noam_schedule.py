"""Example 08 — §5.3, Eq. (3): the learning-rate schedule ("Noam" schedule).

    lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5)

The rate rises linearly for the first warmup_steps updates, then falls like 1/√step. The two
pieces meet at step_num = warmup_steps, where the rate peaks at (d_model · warmup_steps)^-0.5:
about 7.0e-4 for the base model (d_model = 512, warmup_steps = 4000). Wider models get smaller
rates at every step.

What this script shows: the curve for several warmup lengths and model widths, the peak of each
(at the step and value the formula predicts), and the rate the PyTorch scheduler built by
`get_noam_schedule` hands to Adam (it must equal Eq. (3) step for step).

Code: `modeling_vaswani/training/optimization.py` (`noam_lr`, `get_noam_schedule`, `create_adam`).

    python examples/08_noam_schedule.py
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from modeling_vaswani.training.optimization import create_adam, get_noam_schedule, noam_lr

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
STEPS = range(1, 40_001)
SETTINGS = [  # (d_model, warmup_steps)
    (512, 4000),  # the paper's base model
    (512, 8000),
    (512, 2000),
    (1024, 4000),  # the big model
    (256, 4000),
]


def main():
    print(f"{'d_model':>7} {'warmup':>7} {'peak step':>9} {'peak rate':>10} {'(d·w)^-0.5':>11} {'rate @ 40k':>10}")
    curves = {}
    for d_model, warmup in SETTINGS:
        rates = [noam_lr(step, d_model, warmup) for step in STEPS]
        peak = max(range(len(rates)), key=rates.__getitem__)
        curves[(d_model, warmup)] = rates
        expected = (d_model * warmup) ** -0.5
        print(f"{d_model:>7} {warmup:>7} {STEPS[peak]:>9} {rates[peak]:>10.2e} {expected:>11.2e} {rates[-1]:>10.2e}")
        assert STEPS[peak] == warmup and abs(rates[peak] - expected) < 1e-12

    # The scheduler that training uses: after k updates Adam's rate must be Eq. (3) at step k + 1.
    optimizer = create_adam([torch.nn.Parameter(torch.zeros(1))])
    scheduler = get_noam_schedule(optimizer, d_model=512, warmup_steps=4000)
    seen = []
    for _ in range(6000):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    error = max(abs(a - b) for a, b in zip(seen, curves[(512, 4000)]))
    print(f"\nget_noam_schedule + Adam (β = {optimizer.defaults['betas']}, ε = {optimizer.defaults['eps']}): "
          f"rate used at update k vs noam_lr(k), max difference over 6000 updates {error:.1e}")
    assert error < 1e-12

    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5))
    for (d_model, warmup), rates in curves.items():
        style = "-" if (d_model, warmup) == (512, 4000) else "--"
        label = f"d_model={d_model}, warmup={warmup}" + ("  (base)" if (d_model, warmup) == (512, 4000) else "")
        for axis in axes:
            axis.plot(list(STEPS), rates, style, label=label, lw=2 if style == "-" else 1.2)
        axes[0].plot(warmup, (d_model * warmup) ** -0.5, "ko", ms=4)
    axes[0].set(title="Eq. (3): linear warm-up, then ∝ 1/√step (dots: peaks)", xlabel="step", ylabel="learning rate")
    axes[1].set(title="the same, log–log: slopes +1 and −½", xlabel="step", ylabel="learning rate",
                xscale="log", yscale="log")
    for axis in axes:
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "08_noam_schedule.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"saved {path}")


if __name__ == "__main__":
    main()

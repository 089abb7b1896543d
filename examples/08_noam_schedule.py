"""Example 08 — §5.3, Eq. (3): lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5).

Linear warm-up, then ∝ 1/√step, peaking at (d_model · warmup_steps)^-0.5 (7.0e-4 for base); the rate that
`get_noam_schedule` hands to Adam, checked step by step. Code: `training/optimization.py`.
"""

import torch

from common import plt, save
from modeling_vaswani.training.optimization import create_adam, get_noam_schedule, noam_lr

STEPS = range(1, 40_001)
SETTINGS = [(512, 4000), (512, 8000), (512, 2000), (1024, 4000), (256, 4000)]  # (d_model, warmup): base, ..., big

curves = {}
for d_model, warmup in SETTINGS:
    rates = curves[(d_model, warmup)] = [noam_lr(step, d_model, warmup) for step in STEPS]
    peak, expected = max(range(len(rates)), key=rates.__getitem__), (d_model * warmup) ** -0.5
    print(f"d_model {d_model:4d}, warmup {warmup:4d}: peak {rates[peak]:.2e} = (d_model · warmup)^-0.5 "
          f"at step {STEPS[peak]}")
    assert STEPS[peak] == warmup and abs(rates[peak] - expected) < 1e-12

# The scheduler that training uses: after k updates Adam's rate must be Eq. (3) at step k + 1.
optimizer = create_adam([torch.nn.Parameter(torch.zeros(1))])
scheduler, seen = get_noam_schedule(optimizer, d_model=512, warmup_steps=4000), []
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
    base = (d_model, warmup) == (512, 4000)
    for axis in axes:
        axis.plot(list(STEPS), rates, "-" if base else "--", lw=2 if base else 1.2,
                  label=f"d_model={d_model}, warmup={warmup}" + ("  (base)" if base else ""))
    axes[0].plot(warmup, (d_model * warmup) ** -0.5, "ko", ms=4)
axes[0].set(title="Eq. (3): linear warm-up, then ∝ 1/√step (dots: peaks)", xlabel="step", ylabel="learning rate")
axes[1].set(title="the same, log–log: slopes +1 and −½", xlabel="step", ylabel="learning rate", xscale="log", yscale="log")
for axis in axes:
    axis.grid(alpha=0.3)
axes[0].legend(fontsize=8)
save(fig, "08_noam_schedule.png")

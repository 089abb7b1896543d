"""Eq. (3) and the Adam settings of §5.3."""

import math

import pytest
import torch

from modeling_vaswani.training.optimization import create_adam, get_noam_schedule, noam_lr

D_MODEL, WARMUP = 512, 4000


def test_eq3_at_step_one_warmup_and_four_times_warmup():
    # step 1: 512^-0.5 * 1 * 4000^-1.5 = 0.04419417 * 3.9528471e-06
    assert noam_lr(1, D_MODEL, WARMUP) == pytest.approx(1.746928107e-07, rel=1e-9)
    # step = warmup: both branches equal (512 * 4000)^-0.5 = 1 / 1431.0835
    assert noam_lr(WARMUP, D_MODEL, WARMUP) == pytest.approx(6.987712430e-04, rel=1e-9)
    # step = 4 * warmup: (512 * 16000)^-0.5, half the peak
    assert noam_lr(4 * WARMUP, D_MODEL, WARMUP) == pytest.approx(3.493856215e-04, rel=1e-9)


def test_peak_is_at_warmup_and_about_7e_4():
    rates = [noam_lr(step, D_MODEL, WARMUP) for step in range(1, 3 * WARMUP)]
    assert rates.index(max(rates)) + 1 == WARMUP
    assert max(rates) == pytest.approx(7.0e-4, rel=0.01)
    # linear during warm-up
    assert noam_lr(200, D_MODEL, WARMUP) == pytest.approx(2 * noam_lr(100, D_MODEL, WARMUP), rel=1e-12)


def test_scale_multiplies_the_schedule():
    assert noam_lr(10, 64, 8, scale=2.0) == pytest.approx(2 * noam_lr(10, 64, 8), rel=1e-12)


@pytest.mark.parametrize("step", [0, -1])
def test_step_below_one_is_rejected(step):
    with pytest.raises(ValueError, match="step must be >= 1"):
        noam_lr(step, D_MODEL, WARMUP)


@pytest.mark.parametrize("kwargs", [dict(d_model=0), dict(warmup_steps=-5), dict(scale=0.0)])
def test_nonpositive_sizes_are_rejected(kwargs):
    args = dict(step=1, d_model=D_MODEL, warmup_steps=WARMUP) | kwargs
    with pytest.raises(ValueError):
        noam_lr(**args)


def test_adam_hyperparameters_are_the_papers():
    optimizer = create_adam([torch.nn.Parameter(torch.zeros(2))])
    group = optimizer.param_groups[0]
    assert isinstance(optimizer, torch.optim.Adam)
    assert group["betas"] == (0.9, 0.98)
    assert group["eps"] == 1e-9
    assert group["weight_decay"] == 0.0


@pytest.mark.parametrize("base_lr", [1.0, 0.5])
def test_scheduler_drives_adam_with_eq3_rates(base_lr):
    d_model, warmup = 16, 4
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = create_adam([weight], lr=base_lr)
    scheduler = get_noam_schedule(optimizer, d_model, warmup)
    for k in range(8):
        # After k completed updates the next update uses step_num = k + 1.
        expected = d_model**-0.5 * min((k + 1) ** -0.5, (k + 1) * warmup**-1.5)
        assert optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-12)
        before = weight.detach().clone()
        weight.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
        if k == 0:
            # Adam's first step moves each weight by lr * g / (|g| + eps) ~= lr.
            assert (before - weight.detach()) == pytest.approx([expected] * 3, rel=1e-6)


def test_scheduler_handles_several_param_groups_with_different_base_lr():
    a, b = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.Adam([{"params": [a], "lr": 1.0}, {"params": [b], "lr": 3.0}])
    scheduler = get_noam_schedule(optimizer, 64, 10)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    for group in optimizer.param_groups:
        assert group["lr"] == pytest.approx(noam_lr(6, 64, 10), rel=1e-12)


@pytest.mark.parametrize("base_lr", [1.0, 0.5])
@pytest.mark.parametrize("resume", [False, True])
def test_schedule_on_an_optimizer_restored_from_a_checkpoint_is_eq3(base_lr, resume):
    """A restored optimizer's groups carry "initial_lr" (the base) and "lr" (the last step's rate, here
    Eq. (3)'s peak at step 10); the schedule built on it must still give Eq. (3), not Eq. (3) / lr."""
    d_model, warmup = 64, 10
    optimizer = create_adam([torch.nn.Parameter(torch.ones(2))], lr=base_lr)
    scheduler = get_noam_schedule(optimizer, d_model, warmup)
    for _ in range(9):
        optimizer.step()
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(noam_lr(10, d_model, warmup), rel=1e-12)
    saved_optimizer, saved_scheduler = optimizer.state_dict(), scheduler.state_dict()

    restored = create_adam([torch.nn.Parameter(torch.ones(2))], lr=base_lr)
    restored.load_state_dict(saved_optimizer)
    group = restored.param_groups[0]
    assert group["initial_lr"] == base_lr and group["lr"] == pytest.approx(noam_lr(10, d_model, warmup))
    if resume:  # continue the run: the scheduler's own state comes back too
        schedule = get_noam_schedule(restored, d_model, warmup)
        schedule.load_state_dict(saved_scheduler)
        expected = [noam_lr(step, d_model, warmup) for step in range(11, 14)]
    else:  # a new schedule on the restored optimizer starts again at step_num 1
        schedule = get_noam_schedule(restored, d_model, warmup)
        assert group["lr"] == pytest.approx(noam_lr(1, d_model, warmup), rel=1e-12)
        expected = [noam_lr(step, d_model, warmup) for step in range(2, 5)]
    for rate in expected:
        restored.step()
        schedule.step()
        assert group["lr"] == pytest.approx(rate, rel=1e-12)


def test_scheduler_state_round_trips():
    weight = torch.nn.Parameter(torch.ones(1))
    optimizer = create_adam([weight])
    scheduler = get_noam_schedule(optimizer, 64, 10)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    fresh = get_noam_schedule(create_adam([torch.nn.Parameter(torch.ones(1))]), 64, 10)
    fresh.load_state_dict(state)
    assert fresh.last_epoch == 3
    assert math.isclose(fresh.get_last_lr()[0], noam_lr(4, 64, 10))


def test_adam_runs_fused_on_float_cpu_parameters_with_the_same_update():
    torch.manual_seed(0)
    weights = [torch.nn.Parameter(torch.randn(5, 3)) for _ in range(2)]
    plain = [torch.nn.Parameter(w.detach().clone()) for w in weights]
    fused, reference = create_adam(weights), torch.optim.Adam(plain, lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    assert fused.param_groups[0]["fused"] is True
    for _ in range(3):
        for group, optimizer in ((weights, fused), (plain, reference)):
            for w in group:
                w.grad = torch.ones_like(w) * w.detach().sin()
            optimizer.step()
    for w, p in zip(weights, plain):
        torch.testing.assert_close(w, p)

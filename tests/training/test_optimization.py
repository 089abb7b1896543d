"""Eq. (3) and the Adam settings of §5.3."""

import pytest
import torch

from modeling_vaswani.training.optimization import create_adam, get_noam_schedule, noam_lr

D_MODEL, WARMUP = 512, 4000


def test_eq3_values_peak_and_scale():
    assert noam_lr(1, D_MODEL, WARMUP) == pytest.approx(1.746928107e-07, rel=1e-9)  # 512^-0.5 · 4000^-1.5
    assert noam_lr(WARMUP, D_MODEL, WARMUP) == pytest.approx(6.987712430e-04, rel=1e-9)  # (512 · 4000)^-0.5
    assert noam_lr(4 * WARMUP, D_MODEL, WARMUP) == pytest.approx(3.493856215e-04, rel=1e-9)  # half the peak
    rates = [noam_lr(step, D_MODEL, WARMUP) for step in range(1, 3 * WARMUP)]
    assert rates.index(max(rates)) + 1 == WARMUP
    assert noam_lr(200, D_MODEL, WARMUP) == pytest.approx(2 * noam_lr(100, D_MODEL, WARMUP), rel=1e-12)  # linear
    assert noam_lr(10, 64, 8, scale=2.0) == pytest.approx(2 * noam_lr(10, 64, 8), rel=1e-12)


@pytest.mark.parametrize("kwargs, name", [(dict(step=0), "step"), (dict(step=-1), "step"),
                                          (dict(d_model=0), "d_model"), (dict(warmup_steps=-5), "warmup_steps"),
                                          (dict(scale=0.0), "scale")])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError) as error:
        noam_lr(**(dict(step=1, d_model=D_MODEL, warmup_steps=WARMUP) | kwargs))
    assert name in str(error.value)


def test_adam_is_the_papers_and_fused():
    """Every setting of Adam(lr=1, betas=(0.9, 0.98), eps=1e-9) (amsgrad, maximize, ... too); fused, whose
    arithmetic is PyTorch's to check."""
    def settings(optimizer):
        return {k: v for k, v in optimizer.param_groups[0].items() if k not in ("params", "fused")}

    ours, paper = (create_adam([torch.nn.Parameter(torch.ones(2))]),
                   torch.optim.Adam([torch.nn.Parameter(torch.ones(2))], lr=1.0, betas=(0.9, 0.98), eps=1e-9))
    assert ours.param_groups[0]["fused"] is True and settings(ours) == settings(paper)


def test_the_schedule_drives_every_group_at_eq3_whatever_its_base_rate():
    groups = [{"params": [torch.nn.Parameter(torch.ones(3))], "lr": 1.0},
              {"params": [torch.nn.Parameter(torch.ones(1))], "lr": 0.5}]
    optimizer = create_adam(groups)
    scheduler = get_noam_schedule(optimizer, 16, 4)
    for k in range(8):  # after k updates the next one uses step_num = k + 1
        assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([noam_lr(k + 1, 16, 4)] * 2, rel=1e-12)
        optimizer.step()
        scheduler.step()


@pytest.mark.parametrize("base_lr", [1.0, 0.5])
@pytest.mark.parametrize("resume", [False, True])
def test_schedule_on_an_optimizer_restored_from_a_checkpoint_is_eq3(base_lr, resume):
    """A restored group carries "initial_lr" (the base) and "lr" (the last rate); the schedule built on it
    still gives Eq. (3), and with its own state restored goes on where it was."""
    optimizer = create_adam([torch.nn.Parameter(torch.ones(2))], lr=base_lr)
    scheduler = get_noam_schedule(optimizer, 64, 10)
    for _ in range(9):
        optimizer.step()
        scheduler.step()
    restored = create_adam([torch.nn.Parameter(torch.ones(2))], lr=base_lr)
    restored.load_state_dict(optimizer.state_dict())
    group = restored.param_groups[0]
    assert group["initial_lr"] == base_lr and group["lr"] == pytest.approx(noam_lr(10, 64, 10))
    schedule = get_noam_schedule(restored, 64, 10)
    if resume:
        schedule.load_state_dict(scheduler.state_dict())
    else:  # a new schedule starts again at step_num 1
        assert group["lr"] == pytest.approx(noam_lr(1, 64, 10), rel=1e-12)
    for step in range(11, 14) if resume else range(2, 5):
        restored.step()
        schedule.step()
        assert group["lr"] == pytest.approx(noam_lr(step, 64, 10), rel=1e-12)

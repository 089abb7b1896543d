"""Label smoothing of §5.4 (ε over the other V - 1 tokens)."""

import math

import pytest
import torch
import torch.nn.functional as F

from modeling_vaswani.model.fast_loss import fast_label_smoothed_cross_entropy
from modeling_vaswani.model.label_smoothing import comparable_losses, label_smoothed_cross_entropy, target_entropy

# V = 4, ε = 0.1: q = 0.9 on the gold token, 0.1 / 3 on each of the three others.
LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0]])


@pytest.mark.parametrize("gold, expected", [(0, 0.6401897), (2, 2.3735230)])
def test_closed_form_on_a_tiny_example_and_epsilon_is_not_spread_over_all_v_tokens(gold, expected):
    # -[0.9 (z_gold - Z) + 0.1/3 Σ_other (z - Z)], Z = log Σ exp z = 2.44018970
    loss = label_smoothed_cross_entropy(LOGITS, torch.tensor([gold]), epsilon=0.1)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert not torch.isclose(loss, F.cross_entropy(LOGITS, torch.tensor([gold]), label_smoothing=0.1))


def test_epsilon_zero_equals_cross_entropy_and_ignored_positions_are_excluded():
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 5, 7), torch.randint(0, 7, (2, 5))
    labels[0, 3] = -100
    for reduction in ("mean", "sum", "none"):
        ours = label_smoothed_cross_entropy(logits, labels, epsilon=0.0, reduction=reduction)
        reference = F.cross_entropy(logits.reshape(-1, 7), labels.reshape(-1), reduction=reduction)
        torch.testing.assert_close(ours.reshape(-1) if reduction == "none" else ours, reference)
    logits, labels = logits[:1, :3, :4], torch.tensor([[0, -100, 2]])
    assert label_smoothed_cross_entropy(logits, labels, reduction="none")[0, 1].item() == 0.0
    kept = label_smoothed_cross_entropy(logits[:, [0, 2]], labels[:, [0, 2]], reduction="sum")
    assert label_smoothed_cross_entropy(logits, labels, reduction="sum").item() == pytest.approx(kept.item())
    assert label_smoothed_cross_entropy(logits, labels).item() == pytest.approx(kept.item() / 2)  # 2 real tokens
    custom = label_smoothed_cross_entropy(logits, torch.tensor([[0, 1, 2]]), ignore_index=1, reduction="sum")
    assert custom.item() == pytest.approx(kept.item())
    assert label_smoothed_cross_entropy(logits, torch.full((1, 3), -100)).item() == 0.0  # all ignored: 0, not NaN


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_input_gives_finite_float32_loss(dtype):
    torch.manual_seed(0)
    logits = (torch.randn(4, 1000) * 30).to(dtype)
    labels = torch.tensor([1, 2, 3, -100])
    loss = label_smoothed_cross_entropy(logits, labels)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert loss.item() == pytest.approx(label_smoothed_cross_entropy(logits.float(), labels).item(), rel=1e-6)


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_fast_loss_gives_the_formulas_losses_and_gradients(epsilon):
    torch.manual_seed(0)
    logits = (3 * torch.randn(2, 5, 11)).requires_grad_()
    labels = torch.randint(0, 11, (2, 5))
    labels[1, 3:] = -100
    weights = torch.rand(2, 5)  # a non-uniform upstream gradient, as a weighted sum gives
    fast = fast_label_smoothed_cross_entropy(logits, labels, epsilon, reduction="none")
    (fast_grad,) = torch.autograd.grad((fast * weights).sum(), logits)
    formula = label_smoothed_cross_entropy(logits, labels, epsilon, reduction="none")
    (formula_grad,) = torch.autograd.grad((formula * weights).sum(), logits)
    torch.testing.assert_close(fast, formula)
    torch.testing.assert_close(fast_grad, formula_grad)
    assert torch.all(fast_grad[1, 3:] == 0)  # ignored positions get no gradient
    for reduction in ("mean", "sum"):
        torch.testing.assert_close(fast_label_smoothed_cross_entropy(logits, labels, epsilon, reduction=reduction),
                                   label_smoothed_cross_entropy(logits, labels, epsilon, reduction=reduction))


def test_fast_loss_on_bf16_logits_gives_a_bf16_gradient_computed_in_float32():
    torch.manual_seed(0)
    logits = torch.randn(4, 50).bfloat16().requires_grad_()
    labels = torch.randint(0, 50, (4,))
    fast_label_smoothed_cross_entropy(logits, labels).backward()
    assert logits.grad.dtype == torch.bfloat16
    exact = logits.detach().float().requires_grad_()
    label_smoothed_cross_entropy(exact, labels).backward()
    torch.testing.assert_close(logits.grad.float(), exact.grad, rtol=1e-2, atol=1e-4)


def test_target_entropy_is_the_floor_reached_at_p_equal_q_where_the_gradient_softmax_minus_q_is_zero():
    # V = 4, ε = 0.1: logits log q make p = q, and the loss is H(q) itself.
    q = torch.tensor([[0.9, 0.1 / 3, 0.1 / 3, 0.1 / 3]])
    floor = target_entropy(0.1, 4)
    assert floor == pytest.approx(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1 / 3)))
    logits = q.log().requires_grad_()
    loss = label_smoothed_cross_entropy(logits, torch.tensor([0]))
    assert loss.item() == pytest.approx(floor, rel=1e-6)
    assert label_smoothed_cross_entropy(LOGITS, torch.tensor([0])) > floor
    loss.backward()
    torch.testing.assert_close(logits.grad, torch.zeros(1, 4), rtol=0, atol=1e-6)
    logits = torch.zeros(1, 4, requires_grad=True)  # softmax 0.25 everywhere (the fast loss's gradient: below)
    label_smoothed_cross_entropy(logits, torch.tensor([0])).backward()
    torch.testing.assert_close(logits.grad, torch.tensor([[0.25 - 0.9] + [0.25 - 0.1 / 3] * 3]))
    assert target_entropy(0.1, 8000) == pytest.approx(1.224, abs=1e-3)  # the gap at the shipped vocabulary
    assert target_entropy(0.0, 8000) == 0.0


def test_comparable_losses_names_each_number():
    named = comparable_losses(3.0, 0.1, 8000, nll=2.0, prefix="eval")
    assert named == pytest.approx({"eval_loss": 3.0, "eval_kl_loss": 3.0 - target_entropy(0.1, 8000),
                                   "eval_nll_loss": 2.0, "eval_ppl": math.exp(2.0)})
    assert set(comparable_losses(3.0, 0.1, 8000)) == {"loss", "kl_loss"}  # no NLL without the reference's log p


@pytest.mark.parametrize("loss_fn", [label_smoothed_cross_entropy, fast_label_smoothed_cross_entropy])
@pytest.mark.parametrize("logits, labels, options, named", [
    *[(LOGITS, torch.tensor([0]), dict(epsilon=epsilon), "epsilon") for epsilon in (-0.1, 1.0, 1.5, float("nan"))],
    (torch.randn(2, 3, 4), torch.tensor([0, 1]), {}, "shape"),
    (LOGITS, torch.tensor([4]), {}, "[0, 4)"),
    (LOGITS, torch.tensor([0]), dict(reduction="avg"), "reduction"),
])
def test_invalid_arguments_are_refused_by_both_losses(loss_fn, logits, labels, options, named):
    with pytest.raises(ValueError) as error:
        loss_fn(logits, labels, **options)
    assert named in str(error.value)

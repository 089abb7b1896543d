"""Label smoothing of §5.4 (ε over the other V - 1 tokens)."""

import math

import pytest
import torch
import torch.nn.functional as F

from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy

# V = 4, ε = 0.1: q = 0.9 on the gold token, 0.1 / 3 on each of the three others.
LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
LOG_Z = math.log(math.exp(2) + math.exp(1) + math.exp(0) + math.exp(-1))  # 2.44018970


def test_closed_form_on_a_tiny_example():
    # gold = 0: -[0.9 (2 - Z) + 0.1/3 ((1 - Z) + (0 - Z) + (-1 - Z))]
    expected = -(0.9 * (2 - LOG_Z) + (0.1 / 3) * ((1 - LOG_Z) + (0 - LOG_Z) + (-1 - LOG_Z)))
    assert expected == pytest.approx(0.6401897, abs=1e-7)
    loss = label_smoothed_cross_entropy(LOGITS, torch.tensor([0]), epsilon=0.1)
    assert loss.item() == pytest.approx(expected, rel=1e-6)

    # gold = 2: the 0.9 moves to the third logit.
    expected = -(0.9 * (0 - LOG_Z) + (0.1 / 3) * ((2 - LOG_Z) + (1 - LOG_Z) + (-1 - LOG_Z)))
    assert expected == pytest.approx(2.3735230, abs=1e-7)
    loss = label_smoothed_cross_entropy(LOGITS, torch.tensor([2]), epsilon=0.1)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_differs_from_spreading_over_all_v_tokens():
    ours = label_smoothed_cross_entropy(LOGITS, torch.tensor([0]), epsilon=0.1)
    over_all_v = F.cross_entropy(LOGITS, torch.tensor([0]), label_smoothing=0.1)
    assert not torch.isclose(ours, over_all_v)


def test_epsilon_zero_equals_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    labels = torch.randint(0, 7, (2, 5))
    labels[0, 3] = -100
    for reduction in ("mean", "sum", "none"):
        ours = label_smoothed_cross_entropy(logits, labels, epsilon=0.0, reduction=reduction)
        reference = F.cross_entropy(logits.reshape(-1, 7), labels.reshape(-1), reduction=reduction)
        torch.testing.assert_close(ours.reshape(-1) if reduction == "none" else ours, reference)


def test_ignored_positions_are_excluded():
    torch.manual_seed(0)
    logits = torch.randn(1, 3, 4)
    labels = torch.tensor([[0, -100, 2]])
    per_token = label_smoothed_cross_entropy(logits, labels, reduction="none")
    assert per_token[0, 1].item() == 0.0
    kept = label_smoothed_cross_entropy(logits[:, [0, 2]], labels[:, [0, 2]], reduction="sum")
    assert label_smoothed_cross_entropy(logits, labels, reduction="sum").item() == pytest.approx(kept.item())
    # the mean divides by the 2 real tokens, not 3
    assert label_smoothed_cross_entropy(logits, labels).item() == pytest.approx(kept.item() / 2)
    # a custom ignore_index works the same way
    custom = label_smoothed_cross_entropy(logits, torch.tensor([[0, 1, 2]]), ignore_index=1, reduction="sum")
    assert custom.item() == pytest.approx(kept.item())


def test_all_ignored_mean_is_zero_not_nan():
    loss = label_smoothed_cross_entropy(torch.randn(2, 4), torch.tensor([-100, -100]))
    assert loss.item() == 0.0




@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_input_gives_finite_float32_loss(dtype):
    torch.manual_seed(0)
    logits = (torch.randn(4, 1000) * 30).to(dtype)
    labels = torch.tensor([1, 2, 3, -100])
    loss = label_smoothed_cross_entropy(logits, labels)
    assert loss.dtype == torch.float32
    assert torch.isfinite(loss)
    reference = label_smoothed_cross_entropy(logits.float(), labels)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)


def test_gradient_flows():
    logits = torch.zeros(1, 4, requires_grad=True)
    label_smoothed_cross_entropy(logits, torch.tensor([0])).backward()
    # d loss / d logit_j = softmax_j - q_j = 0.25 - q_j
    torch.testing.assert_close(logits.grad, torch.tensor([[0.25 - 0.9] + [0.25 - 0.1 / 3] * 3]))


@pytest.mark.parametrize("epsilon", [-0.1, 1.0, 1.5, float("nan")])
def test_invalid_epsilon(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        label_smoothed_cross_entropy(LOGITS, torch.tensor([0]), epsilon=epsilon)


def test_bad_shapes_labels_and_reduction():
    with pytest.raises(ValueError, match="shape"):
        label_smoothed_cross_entropy(torch.randn(2, 3, 4), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        label_smoothed_cross_entropy(LOGITS, torch.tensor([4]))
    with pytest.raises(ValueError, match="reduction"):
        label_smoothed_cross_entropy(LOGITS, torch.tensor([0]), reduction="avg")

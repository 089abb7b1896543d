"""§5.4 — label smoothing, ε_ls = 0.1.

The paper regularises training by smoothing the targets with ε_ls = 0.1: the target keeps 1 − ε on the
reference token and hands the remaining ε to the others. This "hurts perplexity, as the model learns to be
more unsure, but improves accuracy and BLEU score". How ε is shared out the paper does not say; we follow
tensor2tensor, the code its models were trained with: for V tokens and a gold token y, the target is

    q(y) = 1 − ε,        q(j) = ε / (V − 1)   for every j ≠ y,

and the loss at a position is the cross-entropy H(q, p) = −Σ_j q(j) · log p(j), p the model's softmax;
positions labelled `ignore_index` (padding) contribute nothing. (Hugging Face's `label_smoothing_factor`
instead mixes in a uniform distribution over all V tokens: 1 − ε + ε/V on the gold one.)

Since H(q, p) = H(q) + KL(q ‖ p), the loss cannot fall below H(q) (`target_entropy`); other
implementations log other numbers for the same training (`comparable_losses` names them).
"""

import math

import torch
import torch.nn.functional as F

from .inputs import check_epsilon, check_loss_arguments

# §5.4: "we employed label smoothing of value ε_ls = 0.1"
LABEL_SMOOTHING = 0.1


def label_smoothed_cross_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    epsilon: float = LABEL_SMOOTHING,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy against §5.4's smoothed target, logits (..., V), labels (...): per position ("none"),
    summed, or averaged over the positions kept ("mean"; 0.0 when all are ignored). In float32 whatever the
    logits' dtype, so that half precision does not overflow in the sum over V. Autograd takes the gradient."""
    epsilon, keep, safe_labels = check_loss_arguments(logits, labels, epsilon, ignore_index, reduction)
    return reduce_loss(smoothed_cross_entropy(F.log_softmax(logits.float(), dim=-1), safe_labels, epsilon), keep,
                       reduction)


def smoothed_cross_entropy(log_probs: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
    """H(q, p) per position from log p (..., V) and the gold tokens y (...)."""
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # −log p(y), (...)
    if epsilon == 0:  # skipped, so that masked (−inf) logits cannot produce 0 · ∞ = NaN
        return nll
    # H(q, p) = −Σ_j q(j) log p(j) with q(y) = 1 − ε and q(j) = ε/(V − 1) for j ≠ y, written
    # without building q: (1 − ε)·(−log p(y)) + ε/(V − 1)·(−Σ_{j≠y} log p(j)).
    others = -log_probs.sum(dim=-1) - nll  # −Σ_{j≠y} log p(j) = −Σ_j log p(j) + log p(y)
    return (1.0 - epsilon) * nll + (epsilon / (log_probs.shape[-1] - 1)) * others


def target_entropy(epsilon: float, vocab_size: int) -> float:
    """H(q), the entropy of the smoothed target, the floor of H(q, p): 1.22 nats at ε = 0.1, V = 8,000."""
    epsilon = check_epsilon(epsilon)
    if epsilon == 0:
        return 0.0
    return -(1 - epsilon) * math.log(1 - epsilon) - epsilon * math.log(epsilon / (vocab_size - 1))


def comparable_losses(label_smoothed: float, epsilon: float, vocab_size: int, nll: float | None = None,
                      prefix: str = "") -> dict[str, float]:
    """§5.4's loss per target token beside the numbers other implementations report, each named.

        loss      H(q, p), the label-smoothed cross-entropy this package trains on
        kl_loss   H(q, p) − H(q) = KL(q ‖ p): what tensor2tensor logs, and the Annotated Transformer's KLDivLoss
        nll_loss  −log p(reference token), given as `nll` (fairseq's nll_loss)
        ppl       exp(nll_loss), the perplexity per subword of Table 3 (fairseq's ppl)

    `prefix` ("eval", "test") is joined to each name with "_", as the Trainer names its metrics.
    """
    named = {"loss": label_smoothed, "kl_loss": label_smoothed - target_entropy(epsilon, vocab_size)}
    if nll is not None:
        named.update(nll_loss=nll, ppl=math.exp(nll))
    return {f"{prefix}_{name}" if prefix else name: value for name, value in named.items()}


def reduce_loss(loss: torch.Tensor, keep: torch.Tensor, reduction: str) -> torch.Tensor:
    """The loss per position, 0 where ignored, then summed or averaged over the positions kept."""
    loss = torch.where(keep, loss, torch.zeros_like(loss))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    # clamp keeps a batch of pure padding at 0.0 instead of 0/0 = NaN.
    return loss.sum() / keep.sum().clamp(min=1)

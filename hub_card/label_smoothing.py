"""§5.4 — label smoothing, ε_ls = 0.1.

The paper regularises training by smoothing the targets with ε_ls = 0.1. Rather than asking
the model to put all of its probability on the reference token, the target keeps 1 − ε on it
and hands the remaining ε to other tokens. The paper notes that this makes the model less
sure of itself, which costs perplexity but improves accuracy and BLEU.

The paper does not say how the ε is shared out. We follow tensor2tensor, the code the paper's
models were trained with: for a vocabulary of V tokens and a gold token y, the target is

    q(y) = 1 − ε,        q(j) = ε / (V − 1)   for every j ≠ y,

and the loss at a position is the cross-entropy H(q, p) = −Σ_j q(j) · log p(j), where p is the
model's softmax. (The Annotated Transformer instead spreads ε over V − 2 tokens, leaving out the
padding token as well; with V in the thousands the difference is tiny.)

This is not the same as Hugging Face's `label_smoothing_factor` (or `F.cross_entropy(...,
label_smoothing=ε)`), which mixes the one-hot target with a uniform distribution over all V
tokens, the gold one included: the gold token gets 1 − ε + ε/V and every other token ε/V.

Positions whose label equals `ignore_index` (padding) contribute nothing at all.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# §5.4: "we employed label smoothing of value ε_ls = 0.1"
LABEL_SMOOTHING = 0.1

_REDUCTIONS = ("mean", "sum", "none")


def _check_epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be a number in [0, 1) (the paper uses 0.1), got {epsilon!r}.")
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(
            f"epsilon must lie in [0, 1) (the paper uses 0.1), got {epsilon}; "
            "at 1 the gold token would get no probability at all."
        )
    return float(epsilon)


def label_smoothed_cross_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    epsilon: float = LABEL_SMOOTHING,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy against the smoothed target of §5.4 (ε over the other V − 1 tokens).

    Args:
        logits: unnormalised scores of shape (..., V).
        labels: gold token ids of shape (...), the shape of `logits` without its last axis.
        epsilon: the smoothing rate ε_ls, in [0, 1). With 0 this is plain cross-entropy.
        ignore_index: label value that marks positions to leave out (padding).
        reduction: "mean" (over the positions not ignored; 0.0 when every position is
            ignored), "sum", or "none" (a loss per position, 0 at ignored positions).

    The loss is computed in float32 whatever the dtype of `logits`, so half-precision logits
    do not overflow in the log-softmax or the sum over the vocabulary.

    Raises:
        ValueError: on a bad `epsilon` or `reduction`, mismatched shapes, a vocabulary of one
            token with ε > 0, or a label outside [0, V) that is not `ignore_index`.
    """
    epsilon = _check_epsilon(epsilon)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}.")
    if logits.dim() < 1 or logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits must have shape (..., V) and labels the same shape without V; got logits "
            f"{tuple(logits.shape)} and labels {tuple(labels.shape)}."
        )
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"labels must hold integer token ids, got dtype {labels.dtype}.")
    vocab_size = logits.shape[-1]
    if epsilon > 0 and vocab_size < 2:
        raise ValueError(f"label smoothing needs a vocabulary of at least 2 tokens, got V = {vocab_size}.")

    keep = labels != ignore_index
    bad = keep & ((labels < 0) | (labels >= vocab_size))
    # Branching on a tensor's value would split a torch.compile graph; compiled code skips the check.
    if not torch.compiler.is_compiling() and bad.any():
        raise ValueError(
            f"labels must be token ids in [0, {vocab_size}) or ignore_index={ignore_index}; "
            f"found {labels[bad][0].item()}."
        )
    # Ignored positions get a harmless id so gather works; their loss is zeroed below.
    safe_labels = torch.where(keep, labels, torch.zeros_like(labels)).long()
    loss = _SmoothedCrossEntropy.apply(logits, safe_labels, epsilon)
    loss = torch.where(keep, loss, torch.zeros_like(loss))

    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    # clamp keeps a batch of pure padding at 0.0 instead of 0/0 = NaN.
    return loss.sum() / keep.sum().clamp(min=1)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """H(q, p) per position, with its gradient written out (not from the paper).

    The gradient of the cross-entropy against q with respect to the logits is the textbook
    softmax(z) − q. Autograd through log_softmax, gather and sum would build three (N, V)
    gradients and add them; here one (N, V) tensor is written once. Over an 8,000-token
    vocabulary that was a sixth of a training step on CPU.
    """

    @staticmethod
    def forward(ctx, logits, labels, epsilon):
        # Work in float32 even for fp16/bf16 logits: the sum over V can overflow half precision.
        log_probs = F.log_softmax(logits.float(), dim=-1)  # (..., V)
        nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # −log p(y)
        loss = nll
        if epsilon > 0:
            # −Σ_{j≠y} log p(j) = −Σ_j log p(j) + log p(y)
            others = -log_probs.sum(dim=-1) - nll
            # §5.4 with q(y) = 1 − ε and q(j) = ε/(V − 1) for j ≠ y: H(q, p) = −Σ_j q(j) log p(j).
            # (Skipped at ε = 0, so that masked (−inf) logits cannot produce 0 · ∞ = NaN.)
            loss = (1.0 - epsilon) * nll + (epsilon / (log_probs.shape[-1] - 1)) * others
        ctx.save_for_backward(log_probs, labels)
        ctx.epsilon, ctx.logits_dtype = epsilon, logits.dtype
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        log_probs, labels = ctx.saved_tensors
        epsilon = ctx.epsilon
        other = epsilon / (log_probs.shape[-1] - 1) if epsilon > 0 else 0.0  # q(j) for j ≠ y
        grad = log_probs.exp()  # softmax(z), (..., V)
        if other:
            grad.sub_(other)
        gold = labels.unsqueeze(-1)  # (..., 1)
        grad.scatter_add_(-1, gold, grad.new_full(gold.shape, other - (1.0 - epsilon)))  # − q(y) there
        grad.mul_(grad_loss.unsqueeze(-1))  # (softmax − q) times the upstream gradient
        return grad.to(ctx.logits_dtype), None, None

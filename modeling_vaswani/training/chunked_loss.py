"""§3.4's pre-softmax projection and §5.4's loss a few rows at a time, without (N, V) float32 logits
(speed, not the paper): each chunk's logits give its loss and, at once, its gradient softmax − q
(model/label_smoothing.py). In float32 a chunk's logits come from a product of their own, stay in cache and
are multiplied into the gradients of the decoder states and of the projection before the next chunk; in bf16
the three products each run over all rows at once, through (N, V) bf16 logits. With c = ε/(V − 1) and
q(y) = 1 − ε the loss is written as

    H(q, p) = logsumexp(z) − (q(y) − c) · z_y − c · Σ_j z_j.

The Trainer takes `training_loss` for its training steps (trainer.py).
"""

from __future__ import annotations

import torch

from ..model.fast_loss import smoothed_gradient_
from ..model.inputs import check_label_ids
from .cpu_products import mm_t, weight_gradient

IGNORE_INDEX = -100
# exp() below this is clamped: exp(z) in (−103, −87) gives subnormals, some 30× slower on a CPU;
# the probabilities changed are below 1e−35, nothing at float32 precision.
EXP_FLOOR = -80.0
# Logits per chunk: 2^20 floats (4 MB) stay in a CPU's L2/L3 and under malloc's mmap threshold.
CHUNK_LOGITS = 1 << 20
# In bf16 the logits of all rows (then their softmax − q) are kept for one product each way (below) up to this many
# elements (256 MB); a larger batch or vocabulary takes the products a chunk at a time, as float32 does.
MAX_KEPT_GRADIENT = 1 << 27
# The batch keys the fast path knows; a batch with others goes through the model's own forward.
BATCH_KEYS = frozenset({"input_ids", "attention_mask", "labels", "decoder_input_ids", "decoder_attention_mask"})


def chunk_rows(vocab_size: int) -> int:
    # CHUNK_LOGITS logits, at least 16 rows so the products stay matrix products.
    return max(16, CHUNK_LOGITS // vocab_size)


class _ProjectedSmoothedLoss(torch.autograd.Function):
    """Σ over positions of H(q, softmax(h Wᵀ + b)); its gradients are computed in the forward pass."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, epsilon, rows, matmul_dtype):
        # hidden (N, d); weight (V, d); bias (V,) or None, not trained; labels (N,), IGNORE_INDEX at padding.
        other = epsilon / (weight.shape[0] - 1) if epsilon > 0 else 0.0  # c = q(j) for j ≠ y
        gold_weight = 1.0 - epsilon - other  # q(y) − c: the coefficient of z_y
        kept = (labels != IGNORE_INDEX).nonzero().squeeze(1)  # (M,) real positions
        states, gold = hidden.index_select(0, kept), labels.index_select(0, kept)  # (M, d), (M,)
        states, w = states.detach().to(matmul_dtype), weight.detach().to(matmul_dtype)
        grads = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        # In float32 each chunk's logits come from a product of their own, and ∂/∂W is added up chunk by chunk.
        # In bf16 all rows' logits are one product, (M, V) in bf16 (a quarter of the float32 logits; up to
        # MAX_KEPT_GRADIENT), each chunk's softmax − q is written over its logits, and ∂/∂h and ∂/∂W are one
        # product each at the end: products a chunk at a time cost more there (benchmarks/RESULTS.md).
        one_product = grads and matmul_dtype != torch.float32 and len(gold) * weight.shape[0] <= MAX_KEPT_GRADIENT
        all_logits = torch.mm(states, w.t()) if one_product else None  # (M, V)
        grad_states = torch.empty(states.shape, dtype=torch.float32) if grads and not one_product else None
        grad_weight = None  # (V, d), the first chunk's ∂/∂W, in its layout, then the others added
        total = hidden.new_zeros((), dtype=torch.float32)
        for start in range(0, states.shape[0], rows):
            h = states[start : start + rows]  # (n, d)
            y = gold[start : start + rows]  # (n,)
            z = (all_logits[start : start + rows] if one_product else mm_t(h, w)).float()  # (n, V) logits
            if bias is not None:
                z += bias.float()
            z_gold = z.gather(1, y.unsqueeze(1)).squeeze(1)
            z_sum = z.sum(1) if other else None
            top = z.amax(1, keepdim=True)  # (n, 1), for a softmax that cannot overflow
            p = z.sub_(top).clamp_(min=EXP_FLOOR).exp_()  # unnormalised softmax, in the logits' memory
            norm = p.sum(1, keepdim=True)  # (n, 1)
            loss = top.squeeze(1) + norm.log().squeeze(1) - gold_weight * z_gold  # logsumexp − (q(y) − c) z_y
            if other:
                loss = loss - other * z_sum
            total += loss.sum()
            if not grads:
                continue
            g = smoothed_gradient_(p.div_(norm), y, epsilon)  # softmax − q, (n, V)
            if one_product:
                all_logits[start : start + rows] = g
                continue
            g = g.to(matmul_dtype)
            grad_states[start : start + rows] = mm_t(g, w.t())  # ∂/∂h = (softmax − q) W, into float32
            part = weight_gradient(g, h)  # ∂/∂W = (softmax − q)ᵀ h, added up in float32
            grad_weight = part.float() if grad_weight is None else grad_weight.add_(part)
        if one_product:  # both products over all rows at once
            grad_states = torch.mm(all_logits, w).float()  # ∂/∂h = (softmax − q) W
            grad_weight = torch.mm(all_logits.t(), states).float()  # ∂/∂W = (softmax − q)ᵀ h
        if grads:
            if grad_weight is None:  # no position with a label
                grad_weight = torch.zeros(weight.shape, dtype=torch.float32)
            full = torch.zeros(hidden.shape, dtype=torch.float32)
            full.index_copy_(0, kept, grad_states)  # padding positions get no gradient
            ctx.save_for_backward(full, grad_weight)
            ctx.dtypes = hidden.dtype, weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_total):
        grad_hidden, grad_weight = ctx.saved_tensors
        hidden_dtype, weight_dtype = ctx.dtypes
        return ((grad_hidden * grad_total).to(hidden_dtype), (grad_weight * grad_total).to(weight_dtype),
                None, None, None, None, None)


def projected_smoothed_loss(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, epsilon: float,
                            bias: torch.Tensor | None = None, rows: int | None = None,
                            matmul_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Σ_positions H(q, softmax(hidden · weightᵀ + bias)) over labels ≠ −100; hidden (..., d), labels (...).
    Products in `matmul_dtype` (default: autocast's dtype when it is on, else float32), sums in float32."""
    vocab = weight.shape[0]
    labels = labels.reshape(-1)
    check_label_ids(labels, vocab, IGNORE_INDEX)
    if matmul_dtype is None:
        matmul_dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
    with torch.autocast("cpu", enabled=False):  # the dtypes are chosen above, not by autocast
        return _ProjectedSmoothedLoss.apply(hidden.reshape(-1, hidden.shape[-1]), weight,
                                            None if bias is None else bias.reshape(-1), labels.long(), epsilon,
                                            rows or chunk_rows(vocab), matmul_dtype)


def fast_path_applies(model, inputs: dict) -> bool:
    """Whether `training_loss` computes this batch's loss: the collator's keys with labels, and the model
    itself on the CPU (a data-parallel or compiled wrapper must run its own forward)."""
    from ..model.modeling_vaswani import VaswaniForConditionalGeneration

    return (type(model) is VaswaniForConditionalGeneration and inputs.get("labels") is not None
            and set(inputs) <= BATCH_KEYS and model.lm_head.weight.device.type == "cpu")


def training_loss(model, inputs: dict, num_items_in_batch=None) -> torch.Tensor:
    """The `loss` of `model(**inputs)` (its mean over labelled positions, or its sum over
    `num_items_in_batch`), without the (B, T, V) logits."""
    labels = inputs["labels"]
    decoder_input_ids = inputs.get("decoder_input_ids")
    if decoder_input_ids is None:  # §3.1: "the output embeddings are offset by one position"
        decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)
    states = model.model(input_ids=inputs.get("input_ids"), attention_mask=inputs.get("attention_mask"),
                         decoder_input_ids=decoder_input_ids,
                         decoder_attention_mask=inputs.get("decoder_attention_mask"),
                         use_cache=False, return_dict=True).last_hidden_state  # (B, T, d)
    total = projected_smoothed_loss(states, model.lm_head.weight, labels, model.config.label_smoothing,
                                    bias=model.final_logits_bias)
    count = num_items_in_batch if num_items_in_batch is not None else (labels != IGNORE_INDEX).sum()
    return total / torch.as_tensor(count, device=total.device).clamp(min=1)


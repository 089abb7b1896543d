"""Float32 matrix products through oneDNN on CPUs where that is faster (speed, not the paper: the same products,
their sums taken in another order). torch computes a float32 product on an x86 CPU with MKL, which on an AMD EPYC
(Zen 5, 2 cores) ran a (2,048, 128) · (128, 512) product at 220 GFLOP/s, oneDNN (which torch ships for its bf16
products) at 484; MKL there takes no AVX-512 code path (its banner under MKL_VERBOSE=1). So `onednn_pays` times
both at the model's widths, and the trainer's Linears and loss take oneDNN only where it was faster. Autocast's bf16
products are oneDNN's already and stay torch's. The figures are in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from ..machine import fastest

PROBE_ROWS = 2048  # the rows of the probe's products: a training batch's token positions
_use = {"onednn": None}  # what the process's first probe chose (None: no probe yet, torch.mm)


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x weightᵀ + bias through oneDNN: x (n, in), weight (out, in) → (n, out)."""
    if x.numel() == 0 or weight.numel() == 0:  # oneDNN has no empty product
        return F.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


# Under torch.compile the product is one opaque call: inductor's own lowering of oneDNN's op takes weights packed
# for inference only.
_onednn_linear_op = torch.library.custom_op("modeling_vaswani::onednn_linear", onednn_linear, mutates_args=())
_onednn_linear_op.register_fake(lambda x, weight, bias: x.new_empty(x.shape[0], weight.shape[0]))


def _onednn(x, weight, bias=None):
    return (_onednn_linear_op if torch.compiler.is_compiling() else onednn_linear)(x, weight, bias)


def mm_t(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a bᵀ: a (n, k), b (m, k) → (n, m), through oneDNN where `onednn_pays` said so."""
    if _use["onednn"] and a.dtype == torch.float32:
        return _onednn(a, b)
    return torch.mm(a, b.t())


def weight_gradient(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """gradᵀ x: grad (n, out), x (n, in) → (out, in). oneDNN copies a transposed operand of its own and is fastest
    with the wider of out and in as its output's columns, so for out ≥ in this is (xᵀ grad)ᵀ, a transposed view."""
    if not _use["onednn"] or grad.dtype != torch.float32:
        return torch.mm(grad.t(), x)
    if grad.shape[1] >= x.shape[1]:
        return mm_t(x.t(), grad.t()).t()
    return mm_t(grad.t(), x.t())


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):  # x (n, in), weight (out, in), bias (out,) or None
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn(x, weight, bias)  # (n, out)

    @staticmethod
    def backward(ctx, grad):  # grad (n, out)
        x, weight = ctx.saved_tensors
        grad_x = mm_t(grad, weight.t()) if ctx.needs_input_grad[0] else None  # (n, in)
        grad_weight = weight_gradient(grad, x) if ctx.needs_input_grad[1] else None  # (out, in)
        grad_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None  # (out,)
        return grad_x, grad_weight, grad_bias


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias), through oneDNN for float32 on a CPU where `onednn_pays` said so."""
    if (not _use["onednn"] or x.dtype != torch.float32 or x.device.type != "cpu"
            or torch.is_autocast_enabled("cpu")):
        return F.linear(x, weight, bias)
    y = _Linear.apply(x.reshape(-1, x.shape[-1]), weight, bias)  # (n, out)
    return y.view(*x.shape[:-1], weight.shape[0])  # (…, out)


@functools.cache
def onednn_pays(width: int, inner: int, rounds: int = 5) -> dict:
    """Time a (PROBE_ROWS, width) · (width, inner) float32 product and one back, torch.mm's (MKL on x86) and oneDNN's
    in turns, best of `rounds`. The process's first probe decides for all its products: oneDNN if it was faster.
    {"onednn": what the products use, "gflops": {"torch": …, "onednn": …}} ({} where torch has no oneDNN)."""
    if not torch.backends.mkldnn.is_available():
        return {"onednn": bool(_use["onednn"]), "gflops": {}}
    x, w, y = torch.randn(PROBE_ROWS, width), torch.randn(inner, width), torch.randn(PROBE_ROWS, inner)
    seconds = fastest({"torch": lambda: (torch.mm(x, w.t()), torch.mm(y, w)),
                       "onednn": lambda: (_onednn(x, w), _onednn(y, w.t()))}, rounds)
    if _use["onednn"] is None:
        _use["onednn"] = seconds["onednn"] < seconds["torch"]
    flops = 2 * 2.0 * PROBE_ROWS * width * inner
    return {"onednn": _use["onednn"], "gflops": {name: round(flops / s / 1e9) for name, s in seconds.items()}}

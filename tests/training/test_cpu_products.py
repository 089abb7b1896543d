"""cpu_products: float32 products through oneDNN give torch's outputs and gradients, and the probe's choice is
the path every product then takes."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from modeling_vaswani.training import cpu_products
from modeling_vaswani.training.chunked_loss import training_loss
from modeling_vaswani.training.cpu_products import linear, onednn_pays, weight_gradient
from modeling_vaswani.training.fast_modules import ProbedLinear, use_fast_modules
from tiny_data import MODEL


class OpNames(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def onednn(monkeypatch):
    monkeypatch.setitem(cpu_products._use, "onednn", True)


@pytest.mark.parametrize("shape, out, bias", [((4, 5, 16), 48, True), ((7, 16), 8, False), ((0, 16), 8, True)])
def test_linear_gives_torch_s_output_and_gradients(onednn, shape, out, bias):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=generator, requires_grad=True)
    weight = torch.randn(out, shape[-1], generator=generator, requires_grad=True)
    b = torch.randn(out, generator=generator, requires_grad=True) if bias else None
    upstream = torch.randn(*shape[:-1], out, generator=generator)
    results = []
    for function in (linear, F.linear):
        y = function(x, weight, b)
        grads = torch.autograd.grad(y, [t for t in (x, weight, b) if t is not None], upstream)
        results.append((y, *grads))
    torch.testing.assert_close(results[0], results[1])


@pytest.mark.parametrize("out, width", [(40, 8), (8, 40)])  # either of oneDNN's two orientations
def test_weight_gradient_is_the_product_of_the_transposed_gradient(onednn, out, width):
    grad, x = torch.randn(30, out), torch.randn(30, width)
    torch.testing.assert_close(weight_gradient(grad, x), grad.t() @ x)


def test_the_probe_s_choice_is_the_path_every_product_takes(monkeypatch):
    x, weight = torch.randn(6, 16), torch.randn(8, 16)
    for winner in ("onednn", "torch"):
        monkeypatch.setitem(cpu_products._use, "onednn", None)
        onednn_pays.cache_clear()
        monkeypatch.setattr(cpu_products, "fastest", lambda runs, rounds: {name: 1.0 + (name != winner) for name in runs})
        assert onednn_pays(16, 8)["onednn"] == (winner == "onednn")
        with OpNames() as ops:
            linear(x, weight)
        assert ("mkldnn._linear_pointwise" in ops.names) == (winner == "onednn"), ops.names
    onednn_pays.cache_clear()


def test_bf16_autocast_keeps_torch_s_product(onednn):
    with torch.autocast("cpu", dtype=torch.bfloat16), OpNames() as ops:
        y = linear(torch.randn(6, 16), torch.randn(8, 16))
    assert y.dtype == torch.bfloat16 and "mkldnn._linear_pointwise" not in ops.names


def test_the_training_loss_and_every_gradient_equal_torch_s(onednn, make_model):
    model = make_model(**MODEL)  # eval mode: no dropout, so both runs are the same
    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(3, 60, (3, 7), generator=generator),
             "labels": torch.randint(3, 60, (3, 5), generator=generator)}
    results = {}
    for use in (False, True):
        cpu_products._use["onednn"] = use
        model.zero_grad(set_to_none=True)
        loss = training_loss(model, batch)
        loss.backward()
        results[use] = loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
        use_fast_modules(model)  # the second run with every Linear a ProbedLinear
    assert all(type(m) is ProbedLinear for m in model.modules() if isinstance(m, torch.nn.Linear))
    torch.testing.assert_close(results[True], results[False])


def test_compiled_it_gives_eager_s_output_and_gradients(onednn):
    import torch._dynamo

    layer = ProbedLinear(16, 8)
    x = torch.randn(4, 3, 16, requires_grad=True)
    try:
        explanation = torch._dynamo.explain(layer)(x)
        compiled = torch.compile(layer, fullgraph=True)(x)
        compiled_grads = torch.autograd.grad(compiled.sum(), (x, layer.weight, layer.bias))
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons
    eager = layer(x)
    torch.testing.assert_close((compiled, *compiled_grads),
                               (eager, *torch.autograd.grad(eager.sum(), (x, layer.weight, layer.bias))))

"""ONNX: the encoder and the decoding steps export and run in onnxruntime with PyTorch's numbers."""

import numpy as np
import pytest
import torch
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

EOS = 2
SOURCE = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, 0, 0]])
SOURCE_MASK = (SOURCE != 0).long()


class EncoderGraph(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.encoder = model.get_encoder()

    def forward(self, input_ids, attention_mask):
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class StepGraph(nn.Module):
    """One decoding step: logits and every layer's keys/values (first step), or, given them (`*past`), the new ones."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, decoder_input_ids, encoder_hidden_states, attention_mask, *past):
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        for i in range(len(past) // 4):
            cache.self_attention_cache.update(past[4 * i], past[4 * i + 1], i)
            cache.cross_attention_cache.update(past[4 * i + 2], past[4 * i + 3], i)
            cache.is_updated[i] = True  # the encoder's keys and values are in the cache already
        out = self.model(encoder_outputs=(encoder_hidden_states,), attention_mask=attention_mask,
                         decoder_input_ids=decoder_input_ids, cache=cache, use_cache=True)
        layers = zip(out.cache.self_attention_cache.layers, out.cache.cross_attention_cache.layers)
        n = 2 if past else 4  # a later step returns what it adds only: its own keys and values
        return (out.logits, *(t for own, cross in layers for t in (own.keys, own.values, cross.keys, cross.values)[:n]))


def names(layers, kinds=("self_k", "self_v", "cross_k", "cross_v"), prefix="past"):
    return [f"{prefix}_{i}_{kind}" for i in range(layers) for kind in kinds]


def export(graph, arguments, path, inputs, outputs, axes, dynamo=False, **options):
    """torch.onnx.export with `axes` (name → {dimension: name}) as dynamic_axes or (dynamo) dynamic_shapes."""
    if not dynamo:
        return torch.onnx.export(graph, arguments, path, input_names=inputs, output_names=outputs,
                                 dynamic_axes=axes, dynamo=False, **options)
    from torch.export import Dim

    shapes = [{i: Dim.DYNAMIC for i in axes[name]} for name in inputs]
    shapes = (*shapes[:3], tuple(shapes[3:])) if len(shapes) > 3 else tuple(shapes)
    torch.onnx.export(graph, arguments, path, input_names=inputs, output_names=outputs, dynamo=True,
                      dynamic_shapes=shapes, **options)


def export_all(model, folder, **options):
    """The three graphs, with batch, source length and cache length dynamic."""
    layers = model.config.num_decoder_layers
    encoder, step = EncoderGraph(model).eval(), StepGraph(model).eval()  # one module, two graphs
    start = torch.ones(SOURCE.shape[0], 1, dtype=torch.long)
    with torch.no_grad():
        hidden = encoder(SOURCE, SOURCE_MASK)
        past = step(start, hidden, SOURCE_MASK)[1:]
    present, past_names = names(layers, prefix="present"), names(layers)
    batch_source = {0: "batch", 1: "source"}
    export(encoder, (SOURCE, SOURCE_MASK), folder / "encoder.onnx", ["input_ids", "attention_mask"],
           ["encoder_hidden_states"], {"input_ids": batch_source, "attention_mask": batch_source,
                                       "encoder_hidden_states": batch_source}, **options)
    step_inputs = ["decoder_input_ids", "encoder_hidden_states", "attention_mask"]
    common = {"decoder_input_ids": {0: "batch"}, "encoder_hidden_states": batch_source, "attention_mask": batch_source}
    export(step, (start, hidden, SOURCE_MASK), folder / "decoder_first.onnx", step_inputs, ["logits"] + present,
           {**common, **{n: {0: "batch", 2: "source" if "cross" in n else "target"} for n in present}}, **options)
    export(step, (start, hidden, SOURCE_MASK, *past), folder / "decoder_step.onnx", step_inputs + past_names,
           ["logits"] + names(layers, ("self_k", "self_v"), "present"),
           {**common, **{n: {0: "batch", 2: "source" if "cross" in n else "past"} for n in past_names}}, **options)


def greedy_in_onnxruntime(folder, input_ids, attention_mask, layers, max_new_tokens):
    """Greedy decoding with the three graphs; returns the tokens and the logits of every step."""
    encoder, first, step = (ort.InferenceSession(str(folder / f"{name}.onnx"))
                            for name in ("encoder", "decoder_first", "decoder_step"))
    feed = {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()}
    hidden = encoder.run(None, feed)[0]
    tokens = np.ones((input_ids.shape[0], 1), dtype=np.int64)
    outputs = first.run(None, {"decoder_input_ids": tokens, "encoder_hidden_states": hidden,
                               "attention_mask": feed["attention_mask"]})
    logits, cache = outputs[0], dict(zip(names(layers), outputs[1:]))
    wanted = {i.name for i in step.get_inputs()}  # the step reads the encoder output from the cache only
    all_logits = [logits[:, -1]]
    for _ in range(max_new_tokens - 1):
        tokens = np.concatenate([tokens, logits[:, -1].argmax(-1)[:, None]], axis=1)
        inputs = {"decoder_input_ids": tokens[:, -1:], "encoder_hidden_states": hidden,
                  "attention_mask": feed["attention_mask"], **cache}
        outputs = step.run(None, {k: v for k, v in inputs.items() if k in wanted})
        logits = outputs[0]
        cache.update(zip(names(layers, ("self_k", "self_v")), outputs[1:]))
        all_logits.append(logits[:, -1])
    tokens = np.concatenate([tokens, logits[:, -1].argmax(-1)[:, None]], axis=1)
    return tokens, all_logits


def check_against_pytorch(model, folder):
    layers = model.config.num_decoder_layers
    # Other batch sizes and lengths than the traced (2, 6): the graphs must not have kept them.
    for source in (torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12, 13, EOS]]),
                   torch.tensor([[5, 6, EOS, 0], [7, 8, 9, EOS], [10, EOS, 0, 0]])):
        mask = (source != 0).long()
        session = ort.InferenceSession(str(folder / "encoder.onnx"))
        hidden = session.run(None, {"input_ids": source.numpy(), "attention_mask": mask.numpy()})[0]
        expected = model.get_encoder()(input_ids=source, attention_mask=mask).last_hidden_state
        np.testing.assert_allclose(hidden, expected.detach().numpy(), rtol=0, atol=2e-5)
        tokens, logits = greedy_in_onnxruntime(folder, source, mask, layers, max_new_tokens=8)
        reference = model.generate(input_ids=source, attention_mask=mask, num_beams=1, max_new_tokens=8,
                                   suppress_tokens=[], output_logits=True, return_dict_in_generate=True)
        assert tokens.tolist() == reference.sequences.tolist()
        for got, want in zip(logits, reference.logits):
            np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=1e-4)


@pytest.fixture
def model(make_model):
    # Dropout on, as in a trained model: an export that left the model in training mode would show.
    model = make_model(seed=3, dropout=0.1)
    model.generation_config.eos_token_id = None  # decode the full length
    return model


@pytest.mark.parametrize("options", [
    dict(do_constant_folding=True), dict(do_constant_folding=False),
    pytest.param(dict(dynamo=True), marks=pytest.mark.slow),
], ids=["torchscript-folding", "torchscript", "dynamo"])
def test_export_matches_pytorch(model, tmp_path, options):
    if options.get("dynamo"):
        pytest.importorskip("onnxscript")
    export_all(model, tmp_path, **options)
    assert not model.training
    check_against_pytorch(model, tmp_path)

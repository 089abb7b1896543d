"""evaluation/fast_path.py: the speed options of the one translation loader."""

import logging

import pytest
import torch
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from modeling_vaswani.cli import ArgumentParser, add_engine_arguments, check_engine_arguments
from modeling_vaswani.evaluation.fast_path import FastPath, FastPathError
from modeling_vaswani.evaluation.translation import load_translator, translate

SENTENCES = ["A dog runs.", "Two young men are playing soccer in a park.", "People walk down the street."]
GREEDY = dict(num_beams=1, max_new_tokens=6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_each_dtype_loads_every_weight_in_it_and_translates(saved_model_dir, dtype):
    model, tokenizer = load_translator(str(saved_model_dir), **({} if dtype == "float32" else
                                                                {"fast_path": FastPath(dtype)}))
    assert {p.dtype for p in model.parameters()} == {getattr(torch, dtype)} and not model.training
    assert not any(isinstance(m, DynamicQuantizedLinear) for m in model.modules())
    assert getattr(model.generation_config, "cache_implementation", None) is None
    assert len(translate(model, tokenizer, SENTENCES, **GREEDY)) == len(SENTENCES)
    assert FastPath().is_default and FastPath().describe() == "float32"


def test_int8_replaces_every_linear_layer_and_stays_close_to_float32(saved_model_dir):
    exact, tokenizer = load_translator(str(saved_model_dir))
    model, _ = load_translator(str(saved_model_dir), fast_path=FastPath(quantize="int8"))
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    quantized = [m for m in model.modules() if isinstance(m, DynamicQuantizedLinear)]
    assert quantized and all(isinstance(m, DynamicQuantizedLinear) for m in linears)
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    start = torch.ones(len(SENTENCES), 1, dtype=torch.long) * model.config.decoder_start_token_id
    with torch.no_grad():
        a = exact(**batch, decoder_input_ids=start).logits
        b = model(**batch, decoder_input_ids=start).logits
    assert not torch.equal(a, b)  # the weights really are int8 ...
    assert (a - b).abs().max() < 0.1 * a.abs().max()  # ... and the logits close to float32's
    assert len(translate(model, tokenizer, SENTENCES, **GREEDY)) == len(SENTENCES)


def test_compile_chooses_the_static_cache_and_generates_compiled(saved_model_dir):
    model, _ = load_translator(str(saved_model_dir), fast_path=FastPath(compile=True))
    assert model.generation_config.cache_implementation == "static"
    assert model.generation_config.compile_config._compile_all_devices
    assert FastPath(compile=True).describe() == "float32, compiled"


@pytest.mark.parametrize("fast_path, device, match", [
    (FastPath(quantize="int8"), "meta", "CPU only"),
    (FastPath("bfloat16", quantize="int8"), "cpu", "float32"),
    (FastPath(quantize="int4"), "cpu", "only int8"),
    (FastPath("float8"), "cpu", "--dtype"),
])
def test_combinations_that_cannot_run_are_refused(fast_path, device, match):
    with pytest.raises(FastPathError, match=match):
        fast_path.check(torch.device(device))


@pytest.mark.parametrize("support, dtype, device, warns", [
    ("none", "bfloat16", "cpu", True), ("amx", "bfloat16", "cpu", False), ("avx512_bf16", "bfloat16", "cpu", False),
    ("none", "float32", "cpu", False), ("none", "bfloat16", "cuda", False),
])
def test_bf16_on_a_cpu_without_amx_or_avx512_bf16_warns_in_one_line(monkeypatch, caplog, support, dtype, device,
                                                                     warns):
    monkeypatch.setattr("modeling_vaswani.machine.bf16_support", lambda: support)
    with caplog.at_level(logging.WARNING):
        FastPath(dtype).check(torch.device(device))
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == warns
    if warns:
        assert "\n" not in lines[0] and "neither AMX nor AVX512-BF16" in lines[0] and "slower than float32" in lines[0]


def parse(argv):
    parser = ArgumentParser()
    add_engine_arguments(parser)
    return parser.parse_args(argv)


def test_the_scripts_flags_default_to_exact_float32_and_refuse_torch_options_for_ctranslate2():
    args = parse([])
    assert (args.dtype, args.quantize, args.compile) == ("float32", None, False)
    check_engine_arguments(args)
    with pytest.raises(ValueError, match="--ct2_compute_type"):
        check_engine_arguments(parse(["--engine", "ctranslate2", "--quantize", "int8"]))
    with pytest.raises(SystemExit):
        parse(["--dtype", "float64"])

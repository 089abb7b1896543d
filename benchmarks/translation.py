"""Figure 8: the shipped model (hub_card/) translating test_2016_flickr in every system on the same weights (ours
in PyTorch in five ways, Marian fp32 and bf16, CTranslate2 when installed), each decoding §6.1's way to its natural
end over the same batches, alternating. 8b: the two beam searches at equal work; 8c: what compiling costs and saves."""

from __future__ import annotations

import functools
import importlib.util
import statistics
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple

import torch

from modeling_vaswani import shipped_model_path
from modeling_vaswani.evaluation.fast_path import FastPath
from modeling_vaswani.evaluation.scoring import compute_bleu
from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.model.generation import NUM_BEAMS, PAPER_SEARCH, TRANSFORMERS_BEAM_SEARCH, max_new_tokens_for
from modeling_vaswani.training.data import multi30k_pairs

from .decoding import forced_search_speed
from .harness import (alternate, build_pair, corpus_config, forced_generation_config, forced_length, source_batches,
                      summary, timed)

OURS_FP32 = "ours fp32, transformers' search"
OURS_PAPER = "ours fp32, paper's search"
OURS_BF16 = "ours bf16"
OURS_INT8 = "ours int8"
OURS_STATIC = "ours fp32, static cache + compile setting"
MARIAN_FP32 = "Marian fp32"
MARIAN_BF16 = "Marian bf16"
CT2_FP32 = "CTranslate2 float32"
CT2_INT8 = "CTranslate2 int8"


class MarianTranslator:  # MarianMTModel with §6.1's input length + 50 limit, which its generate does not apply
    def __init__(self, marian, generation_config):
        self.model, self.generation_config, self.device = marian, generation_config, marian.device

    def generate(self, input_ids, attention_mask, **kwargs):
        limit = max_new_tokens_for(self.generation_config, input_ids.shape[1])
        return self.model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=limit,
                                   num_beams=NUM_BEAMS, **kwargs)


class System(NamedTuple):  # a row of figure 8: threads -> a translator, and generate's settings
    name: str
    build: Callable[[int], object]
    generate_kwargs: dict = {}


def systems(model_path: str, workdir: Path, log) -> list:
    """The systems that can run here (CTranslate2 only when installed), built lazily; each of ours loads once."""
    from modeling_vaswani.conversion.marian import to_marian

    def ours(fast_path=None):
        return functools.cache(lambda threads: load_translator(model_path, "cpu", fast_path=fast_path)[0])

    def marian(dtype):
        def build(threads):
            model, _ = load_translator(model_path, "cpu")
            return MarianTranslator(to_marian(model).to(dtype).eval(), model.generation_config)
        return build

    found = [System(OURS_FP32, ours(), dict(TRANSFORMERS_BEAM_SEARCH)), System(OURS_PAPER, ours(), dict(PAPER_SEARCH)),
             System(OURS_BF16, ours(FastPath("bfloat16")), dict(TRANSFORMERS_BEAM_SEARCH)),
             System(OURS_INT8, ours(FastPath(quantize="int8")), dict(TRANSFORMERS_BEAM_SEARCH)),
             System(OURS_STATIC, ours(FastPath(compile=True)), dict(TRANSFORMERS_BEAM_SEARCH)),
             System(MARIAN_FP32, marian(torch.float32)), System(MARIAN_BF16, marian(torch.bfloat16))]
    if importlib.util.find_spec("ctranslate2") is None:
        log("[8] ctranslate2 is not installed: its rows are skipped (pip install ctranslate2)")
        return found
    from modeling_vaswani.conversion.ctranslate2 import convert_ctranslate2
    from modeling_vaswani.evaluation.ctranslate2_engine import CTranslate2Engine

    convert_ctranslate2(model_path, workdir / "ctranslate2", force=True)
    return found + [System(name, lambda threads, c=compute_type: CTranslate2Engine(
        workdir / "ctranslate2", device="cpu", compute_type=c, threads=threads))
        for name, compute_type in ((CT2_FP32, "float32"), (CT2_INT8, "int8"))]


def test_set_translation(settings, log, model_path: str | None = None) -> dict:
    """Figure 8: sentences/s, tokens/s and BLEU of every system at each thread count."""
    model_path = model_path or shipped_model_path()
    sources, references = multi30k_pairs("test", "en", "de", settings.translate_sentences)
    _, tokenizer = load_translator(model_path, "cpu")
    results = {"model": Path(model_path).name, "sentences": len(sources), "batch_size": settings.translate_batch_size,
               "num_beams": NUM_BEAMS, "reps": settings.translate_reps, "threads": {}}
    saved_threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory(prefix="vaswani-bench-translate-") as workdir:
        rows = systems(model_path, Path(workdir), log)
        results["systems"] = [system.name for system in rows]
        for threads in settings.translate_threads:
            torch.set_num_threads(threads)
            translators, outputs = {system.name: system.build(threads) for system in rows}, {}

            def job(system, sentences=sources):
                def run():
                    torch.set_num_threads(threads)
                    done = translate(translators[system.name], tokenizer, sentences,
                                     batch_size=settings.translate_batch_size, **system.generate_kwargs)
                    if sentences is sources:  # BLEU and tokens of the first timed repetition
                        outputs.setdefault(system.name, done)
                return run

            seconds = alternate({s.name: job(s) for s in rows}, settings.translate_reps, torch.device("cpu"),
                                warmup={s.name: job(s, sources[: settings.translate_batch_size]) for s in rows})
            entry = {name: summary(seconds[name], len(sources), "sentences_per_second") for name in outputs}
            for name, done in outputs.items():
                # Tokens as the model emits them (</s> included), one count for every system.
                tokens = sum(len(ids) for ids in tokenizer(done)["input_ids"])
                entry[name].update(tokens_per_second=tokens / entry[name]["median_seconds"], generated_tokens=tokens,
                                   bleu=compute_bleu(done, references)["bleu"])
            for name, e in entry.items():
                e["identical_outputs_to_ours_fp32"] = sum(a == b for a, b in zip(outputs[name], outputs[OURS_FP32]))
                e["speed_over_ours_fp32"] = e["sentences_per_second"] / entry[OURS_FP32]["sentences_per_second"]
            results["threads"][str(threads)] = entry
            log(f"[8] {threads} thread(s): " + ", ".join(
                f"{name} {e['sentences_per_second']:.1f} sent/s BLEU {e['bleu']:.2f}" for name, e in entry.items()))
            translators.clear()  # free this count's models before the next count's
    torch.set_num_threads(saved_threads)
    return results


def search_speed(settings, corpus, device, log) -> dict:
    """Figure 8b: our model's two beam searches at `search_preset`, random weights, forced to the same length."""
    length = forced_length(settings, corpus, settings.search_sentences)
    batches = source_batches(corpus, settings.search_sentences, settings.beam_batch_size, device)
    model = build_pair(corpus_config(corpus, settings.search_preset), device)["modeling_vaswani"].eval()
    searches = {"transformers' beam search": TRANSFORMERS_BEAM_SEARCH, "paper's beam search": PAPER_SEARCH}
    with torch.inference_mode():
        speeds = forced_search_speed({name: (model, kwargs) for name, kwargs in searches.items()}, batches,
                                     forced_generation_config(corpus.tokenizer, length, num_beams=NUM_BEAMS), length,
                                     settings.beam_reps, device)
    results = {"preset": settings.search_preset, "sentences": sum(len(ids) for ids, _ in batches),
               "forced_output_length": length, "batch_size": settings.beam_batch_size, **speeds}
    results["ratio_paper_over_transformers"] = (results["paper's beam search"]["sentences_per_second"]
                                                / results["transformers' beam search"]["sentences_per_second"])
    log(f"[8] search at {settings.search_preset}: paper/transformers {results['ratio_paper_over_transformers']:.3f}")
    return results


def compile_payoff(settings, log, model_path: str | None = None) -> dict:
    """Figure 8c: greedy search, eager against static cache + torch.compile, per batch. Each new batch shape
    compiles again, so the first length-sorted test batches' first compiled calls include compiling."""
    model_path = model_path or shipped_model_path()
    sources, _ = multi30k_pairs("test", "en", "de", settings.translate_sentences)
    order = sorted(sources, key=len)
    size = settings.translate_batch_size
    batches = [order[i:i + size] for i in range(0, min(len(order), settings.compile_batches * size), size)]
    eager, tokenizer = load_translator(model_path, "cpu")
    compiled, _ = load_translator(model_path, "cpu", fast_path=FastPath(compile=True))
    results = {"batch_size": size, "batches": []}
    for number, batch in enumerate(batches):
        encoded = tokenizer(batch, return_tensors="pt", padding=True)
        row = {"source_length": int(encoded["input_ids"].shape[1])}
        for name, model in (("eager", eager), ("compiled", compiled), ("compiled_again", compiled)):
            with torch.inference_mode():
                row[f"{name}_seconds"] = timed(lambda: model.generate(**encoded, num_beams=1), torch.device("cpu"))
        results["batches"].append(row)
        log(f"[8] compile, batch {number}: eager {row['eager_seconds']:.2f} s, first compiled call "
            f"{row['compiled_seconds']:.2f} s, again {row['compiled_again_seconds']:.2f} s")
    rows = results["batches"]
    results["compile_seconds"] = sum(r["compiled_seconds"] - r["compiled_again_seconds"] for r in rows)
    results["saved_seconds_per_batch"] = statistics.median(r["eager_seconds"] - r["compiled_again_seconds"] for r in rows)
    results["test_set_batches"] = -(-len(sources) // size)  # what compiling would have to win back over
    results["saved_seconds_on_the_test_set"] = results["saved_seconds_per_batch"] * results["test_set_batches"]
    results["pays_off_on_the_test_set"] = results["saved_seconds_on_the_test_set"] > results["compile_seconds"]
    return results

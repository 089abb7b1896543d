"""The Hub model card, rendered from the model's config and its results.json (collect_results.py writes it).
The shipped configuration is the evaluation with "averaged": true and "num_beams": 4; its scores go into the
card's model-index. Nothing in the card is typed by hand.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..model.configuration_vaswani import VaswaniConfig
from ..model.generation import LENGTH_PENALTY, PAPER_DECODING_TEXT
from ..model.strict_json import read_json
from ..model.label_smoothing import comparable_losses, target_entropy

TEMPLATE_PATH = Path(__file__).resolve().parent / "model_card_template.md"
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French"}
REQUIRED_SCORES = ("bleu", "signature", "chrf", "bleu_lowercase_tokenized", "bleu_paper_tokenized")


def load_results(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no results file; scripts/collect_results.py writes it (python "
                                "scripts/collect_results.py --run_dir <training output folder>).")
    results = read_json(path)
    check_results(results, path)
    return results


def check_results(results: dict, origin="results") -> None:
    for key in ("source_lang", "target_lang", "evaluations", "training"):
        if key not in results:
            raise ValueError(f"{origin}: missing the key {key!r}.")
    for i, evaluation in enumerate(results["evaluations"]):
        missing = [k for k in REQUIRED_SCORES if k not in evaluation.get("scores", {})]
        if missing:
            raise ValueError(f"{origin}: evaluation {i} lacks the scores {missing}.")
    if not shipped_evaluations(results):
        raise ValueError(f"{origin}: no evaluation of the shipped configuration (averaged, beam 4).")


def shipped_evaluations(results: dict) -> list[dict]:
    return [e for e in results["evaluations"] if e.get("averaged") and e.get("num_beams") == 4]


def render_model_card(model_dir, results: dict, repo_id: str) -> ModelCard:
    """A `ModelCard` for the model saved in `model_dir`, with the scores of `results`."""
    check_results(results)
    config = VaswaniConfig.from_pretrained(model_dir)
    src, tgt = results["source_lang"], results["target_lang"]
    model_name = repo_id.split("/")[-1]
    shipped = shipped_evaluations(results)
    example_source = results.get("example_source", "Two dogs are playing in the snow.")
    card_data = ModelCardData(
        language=[src, tgt], license="apache-2.0", library_name="transformers", pipeline_tag="translation",
        tags=["translation", "transformer", "attention-is-all-you-need", "vaswani", "seq2seq", "custom_code"],
        datasets=["multi30k"], metrics=["bleu", "chrf"],
        # The Hub's example for the translation widget, as Hub translation models carry one.
        widget=[{"text": example_source, "example_title": f"{LANGUAGE_NAMES.get(src, src)} → "
                 f"{LANGUAGE_NAMES.get(tgt, tgt)}"}],
        model_name=model_name,
        eval_results=[result for e in shipped for result in _eval_results(e, src, tgt)],
    )
    training = results["training"]
    return ModelCard.from_template(
        card_data, template_path=str(TEMPLATE_PATH), model_name=model_name, repo_id=repo_id,
        source_name=LANGUAGE_NAMES.get(src, src), target_name=LANGUAGE_NAMES.get(tgt, tgt), source_lang=src,
        target_lang=tgt, example_source=example_source,
        **{name: getattr(config, name) for name in ("num_layers", "num_decoder_layers", "d_model", "d_ff",
                                                    "num_heads", "d_k", "dropout", "label_smoothing",
                                                    "positional_encoding", "share_embeddings", "tie_word_embeddings")},
        target_entropy=f"{target_entropy(config.label_smoothing, config.vocab_size):.3f}",
        vocab_size=f"{config.vocab_size:,}", parameters=training.get("parameters", "?"),
        **{f"training_{key}": training.get(key, default) for key, default in (
            ("procedure", ""), ("hardware", ""), ("minutes", "?"), ("steps", "?"), ("epochs", "?"), ("command", ""))},
        training_tokens=f"{training['target_tokens'] / 1e6:.1f}M" if training.get("target_tokens") else "",
        decoding=results.get("decoding", PAPER_DECODING_TEXT), signature=shipped[0]["scores"]["signature"],
        # The template writes the tables' rows.
        shipped=shipped, evaluations=results["evaluations"], length_penalty=LENGTH_PENALTY,
        curve_table=_curve_table(training.get("log_history", []), config),
        losses=results.get("losses", []), speed=results.get("speed"),
        comparison_table=_comparison_table(shipped, src, tgt),
    )


# Published English→German scores on Multi30k's test_2016_flickr: (system, trained on, metric, score).
PUBLISHED_EN_DE = (
    ("Transformer-Tiny, text only (Wu et al., 2021)", "Multi30k", "lc-tok BLEU", 41.02),
    ("Helsinki-NLP/opus-mt-en-de (Helsinki-NLP leaderboard)", "OPUS, general domain", "BLEU", 36.3),
    ("facebook/wmt19-en-de (Helsinki-NLP leaderboard)", "WMT19 news, general domain", "BLEU", 39.7),
)


def _comparison_table(shipped: list[dict], src: str, tgt: str) -> list[tuple]:
    """This model beside the published scores, where they exist (English→German, test_2016_flickr)."""
    test = [e for e in shipped if e.get("split_name") == "test_2016_flickr"]
    if (src, tgt) != ("en", "de") or not test:
        return []
    scores = test[0]["scores"]
    return [("this model", "Multi30k", "BLEU", scores["bleu"]),
            ("this model", "Multi30k", "lc-tok BLEU", scores["bleu_lowercase_tokenized"]), *PUBLISHED_EN_DE]


def _eval_results(evaluation: dict, src: str, tgt: str) -> list[EvalResult]:
    scores = evaluation["scores"]
    common = dict(
        task_type="translation",
        task_name=f"Translation {src}→{tgt}",
        dataset_type="multi30k",
        dataset_name=f"Multi30k {evaluation.get('split_name', evaluation['split'])}",
        dataset_config=f"{src}-{tgt}",
        dataset_split=evaluation["split"],
    )
    metrics = [("bleu", "BLEU (cased, detokenized sacreBLEU)", "bleu", {"metric_config": scores["signature"]}),
               ("bleu", "BLEU (lowercased, tokenized)", "bleu_lowercase_tokenized", {}), ("chrf", "chrF", "chrf", {})]
    return [EvalResult(metric_type=kind, metric_name=name, metric_value=round(scores[key], 2), **extra, **common)
            for kind, name, key, extra in metrics]


def _curve_table(log_history: list[dict], config: VaswaniConfig) -> str:
    """The card's training curve: each validation with the last training loss, H(q, p) − H(q) and val ppl."""
    with_ppl = any("eval_ppl" in entry for entry in log_history)
    rows, train_loss = [], None
    for entry in log_history:
        if "loss" in entry:
            train_loss = entry["loss"]
        if "eval_loss" in entry:
            bleu = f"{entry['eval_bleu']:.2f}" if "eval_bleu" in entry else ""
            loss = "" if train_loss is None else f"{train_loss:.3f}"
            kl = comparable_losses(entry["eval_loss"], config.label_smoothing, config.vocab_size)["kl_loss"]
            ppl = [f"{entry['eval_ppl']:.2f}" if "eval_ppl" in entry else ""] if with_ppl else []
            cells = [str(entry["step"]), f"{entry.get('epoch', 0):.1f}", loss, f"{entry['eval_loss']:.3f}", f"{kl:.3f}",
                     *ppl, bleu]
            rows.append(f"| {' | '.join(cells)} |")
    if not rows:
        return ""
    head = ["step", "epoch", "training loss", "val loss", "val loss − H(q)", *(["val ppl"] if with_ppl else []),
            "val BLEU (greedy)"]
    return "\n".join([f"| {' | '.join(head)} |", "|" + "---|" * len(head), *rows])


BENCHMARK_KEY = "figure_8_test_set_translation"


def speed_from_benchmark(benchmark: dict, source: str) -> dict:
    """What the card needs of a benchmark's results (machine, settings, speeds); `source` names its file."""
    if BENCHMARK_KEY not in benchmark:
        raise ValueError(f"{source}: no test-set translation results ({BENCHMARK_KEY!r}); run "
                         "python -m benchmarks.run --only translation and pass its results.json.")
    measured = benchmark[BENCHMARK_KEY]
    rows = [{"system": system, "threads": int(threads), "sentences_per_second": row["sentences_per_second"],
             "tokens_per_second": row["tokens_per_second"], "bleu": row.get("bleu")}
            for threads, systems in measured["threads"].items() for system, row in systems.items()]
    machine = benchmark.get("machine", {})
    return {"source": source, "command": benchmark.get("command", ""), "cpu": machine.get("cpu_model_name", "?"),
            **{key: machine.get(key, "?") for key in ("cpu_cores", "cpu_bf16", "torch")},
            "model": measured.get("model", "?"),
            **{key: measured.get(key) for key in ("sentences", "batch_size", "num_beams")}, "rows": rows}

"""The untrained model each row starts from (scripts/train.py has no flag for d_k alone): one BPE vocabulary
shared by every row, so perplexities per subword compare, and weights drawn after seeding with the row's seed."""

from __future__ import annotations

from pathlib import Path

import transformers

from modeling_vaswani.model.configuration_vaswani import VaswaniConfig
from modeling_vaswani.model.modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.data import load_translation_dataset, select_first
from modeling_vaswani.training.tokenization import train_tokenizer_for_dataset

TOKENIZER_MARK = "tokenizer.json"


def shared_tokenizer(folder: Path, source_lang: str, target_lang: str, vocab_size: int,
                     max_train_samples: int | None = None):
    """The vocabulary of every row: loaded from `folder`, or learned on the (first `max_train_samples`
    pairs of the) embedded Multi30k training split and saved there first."""
    folder = Path(folder)
    if not (folder / TOKENIZER_MARK).is_file():
        data = load_translation_dataset(source_lang, target_lang)
        train = select_first(data["train"], max_train_samples)
        tokenizer = train_tokenizer_for_dataset(train, source_lang, target_lang, vocab_size=vocab_size)
        folder.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(folder)
    return load_tokenizer(folder)


def write_starting_model(folder: Path, config_values: dict, tokenizer, seed: int) -> int:
    """Save an untrained model of `config_values` with `tokenizer` into `folder`; its parameter count."""
    config = VaswaniConfig(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.bos_token_id, **config_values,
    )
    transformers.set_seed(seed)  # the initial weights, as scripts/train.py draws a new model's
    model = VaswaniForConditionalGeneration(config)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model.num_parameters()

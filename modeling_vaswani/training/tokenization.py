"""§5.1: byte-pair encoding, one vocabulary of about 37,000 tokens shared by source and target (which lets §3.4
tie the embeddings and the output projection), trained with `tokenizers` and wrapped as a transformers fast
tokenizer: NFC; spaces kept inside the tokens as "▁" (so decode(encode(s)) == s for seen characters); </s>
after every sequence; ids <pad> 0, <s> 1 (decoder start), </s> 2, <unk> 3.

Deviation: the default size is 8,000, not 37,000: Multi30k is about 150 times smaller than WMT 2014.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Union

import datasets
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<s>", "</s>", "<unk>"
# Order fixes the ids: the trainer assigns special tokens the first ids, in this order.
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN]
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3

MIN_VOCAB_SIZE = 16
_SPACE = "\u2581"  # "▁", the SentencePiece word-boundary mark
_TRAIN_BATCH = 1000


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2,
                        model_max_length: int = 1024) -> PreTrainedTokenizerFast:
    """One BPE vocabulary on ``texts`` (source and target sentences mixed); unseen characters become ``<unk>``."""
    if not isinstance(vocab_size, int) or vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be an integer of at least {MIN_VOCAB_SIZE} (the {len(SPECIAL_TOKENS)} "
                         f"special tokens plus the alphabet and some merges); got {vocab_size!r}. The paper uses "
                         "about 37,000 (§5.1).")
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise ValueError(f"min_frequency must be a positive integer, got {min_frequency!r}.")
    if isinstance(texts, str):
        raise ValueError("texts must be an iterable of sentences, not a single string; wrap it in a list.")

    tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    # Spaces become "▁" inside the tokens, and one "▁" is put in front of the text so the first
    # word is spelled like every other word; the decoder removes exactly that one again. Doing
    # this in the normalizer (not the pre-tokenizer) keeps leading spaces, so decoding is exact.
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Prepend(_SPACE),
                                                 normalizers.Replace(" ", _SPACE)])
    # Punctuation is a token of its own: "▁dog." would otherwise be learnt beside "▁dog", "▁dog," and
    # "▁dog!", spending merges on combinations and splitting the counts of one word.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=_SPACE, prepend_scheme="never"),
        pre_tokenizers.Punctuation(behavior="isolated")])
    tokenizer.decoder = decoders.Metaspace(replacement=_SPACE, prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS,
                                  show_progress=False)
    count = 0

    def checked() -> Iterator[str]:
        nonlocal count  # counted, so that an empty corpus is reported
        for text in texts:
            if not isinstance(text, str):
                raise ValueError(f"texts must contain strings; found {type(text).__name__}: {text!r}.")
            count += 1
            yield text

    tokenizer.train_from_iterator(checked(), trainer=trainer)
    if count == 0:
        raise ValueError("No training text: texts was empty. Pass the source and target sentences.")

    actual = tokenizer.get_vocab_size()
    if actual > vocab_size:
        # The trainer never drops characters, so a tiny vocab_size is silently exceeded.
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {actual} special tokens and distinct "
                         f"characters in the training text; use a vocab_size well above {actual}.")

    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS_TOKEN}", pair=f"$A {EOS_TOKEN} $B {EOS_TOKEN}", special_tokens=[(EOS_TOKEN, EOS_ID)])
    # The Metaspace decoder restores spaces exactly; the English clean-up ("word ." -> "word.") would not.
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD_TOKEN, bos_token=BOS_TOKEN,
                                   eos_token=EOS_TOKEN, unk_token=UNK_TOKEN, model_max_length=model_max_length,
                                   clean_up_tokenization_spaces=False)


def train_tokenizer_for_dataset(dataset: Union[datasets.DatasetDict, datasets.Dataset], source_lang: str,
                                target_lang: str, vocab_size: int = 8000, min_frequency: int = 2,
                                model_max_length: int = 1024) -> PreTrainedTokenizerFast:
    """The shared vocabulary of both sides of the `translation` pairs (of the train split of a DatasetDict)."""
    if isinstance(dataset, datasets.DatasetDict):
        dataset = dataset["train"]

    def pairs() -> Iterator[str]:
        for start in range(0, len(dataset), _TRAIN_BATCH):
            for pair in dataset[start : start + _TRAIN_BATCH]["translation"]:
                yield pair[source_lang]
                yield pair[target_lang]

    return train_bpe_tokenizer(pairs(), vocab_size=vocab_size, min_frequency=min_frequency,
                               model_max_length=model_max_length)


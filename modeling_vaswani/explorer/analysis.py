"""What the explorer accepts as a sentence, and the numbers it shows for one: §6.1's beam search traced
step by step, transformers' search beside it, and one teacher-forced pass with `output_attentions=True`
for Eq. (1)'s weights."""

import unicodedata
from dataclasses import dataclass

import torch

from ..model.generation import PAPER_SEARCH, TRANSFORMERS_BEAM_SEARCH
from ..model.masking import causal_mask, padding_mask

# The page translates one sentence; a longer paste is refused before the model sees it (Multi30k's
# longest training sentences are ~200 characters).
MAX_CHARACTERS = 500


class InputRejected(ValueError):
    """Text the explorer will not translate; str(error) is the message the page shows."""


def check_text(text) -> str:
    """The sentence to translate (stripped), or InputRejected saying why not."""
    text = (text or "").strip()
    if not text:
        raise InputRejected("Type an English sentence to translate.")
    if len(text) > MAX_CHARACTERS:
        raise InputRejected(f"The text has {len(text)} characters; the explorer takes one sentence of at most "
                            f"{MAX_CHARACTERS}.")
    if not any(unicodedata.category(c)[0] in "LN" for c in text):
        raise InputRejected("The text has no letters or digits, only punctuation or symbols; type a sentence.")
    return text


def unknown_characters(text: str, encoding, unk_token_id: int) -> list[str]:
    """The parts of `text` the vocabulary has no piece for (<unk>), in order, each once; `encoding` has offsets."""
    found = []
    for piece_id, (start, end) in zip(encoding["input_ids"], encoding["offset_mapping"]):
        if piece_id == unk_token_id and text[start:end] not in found:
            found.append(text[start:end])
    return found


# The two searches the page compares; the first is the one beam_trace records.
SEARCHES = {"gnmt": PAPER_SEARCH, "transformers": TRANSFORMERS_BEAM_SEARCH}


@dataclass
class Analysis:
    text: str
    source_pieces: list[str]  # BPE pieces of the input, </s> included
    unknown: list[str]  # parts of the text the vocabulary has no piece for
    translations: dict[str, str]  # per search
    sequences: dict[str, list[int]]  # per search: generated ids, decoder start token first
    trace: list[dict]  # beam_trace's steps of §6.1's search
    target_pieces: list[str]  # the paper's translation, one piece per decoder position (row of the heat-maps)
    attentions: dict[str, list[torch.Tensor]]  # "encoder", "decoder", "cross": per layer (heads, queries, keys)
    positional: torch.Tensor  # (source length, d_model): §3.5's encodings added to the input embeddings
    masks: dict[str, torch.Tensor]  # same keys as attentions: (queries, keys), True where attention may look
    alpha: float


@torch.no_grad()
def analyse(model, tokenizer, text) -> Analysis:
    """Everything the page shows for `text`; InputRejected (with the page's message) for text it refuses."""
    text = check_text(text)
    encoding = tokenizer(text, return_offsets_mapping=True)
    unknown = unknown_characters(text, encoding, tokenizer.unk_token_id)
    special = set(tokenizer.all_special_ids)
    # A piece that is only the word-start mark "▁" carries no character of the text.
    if not any(i not in special and piece.strip("▁") for i, piece in
               zip(encoding["input_ids"], tokenizer.convert_ids_to_tokens(encoding["input_ids"]))):
        raise InputRejected(f"The vocabulary has no piece for any of {' '.join(unknown)!r}: the model reads only "
                            "the scripts of its training data (English).")
    batch = tokenizer([text], return_tensors="pt").to(model.device)

    trace = []
    sequences = {name: model.generate(**batch, **search, **({"beam_trace": trace} if name == "gnmt" else {}))[0]
                 .tolist() for name, search in SEARCHES.items()}
    translations = {name: tokenizer.decode(ids, skip_special_tokens=True) for name, ids in sequences.items()}

    # Teacher-forced on the paper's translation: row t is the decoder predicting token t + 1.
    output = torch.tensor([sequences["gnmt"]], device=model.device)
    forward = model(**batch, decoder_input_ids=output[:, :-1], output_attentions=True, return_dict=True)
    attentions = {"encoder": forward.encoder_attentions, "decoder": forward.decoder_attentions,
                  "cross": forward.cross_attentions}

    source_length, target_length = batch["input_ids"].shape[1], output.shape[1] - 1
    allowed = padding_mask(batch["attention_mask"], torch.float32)[0, 0] == 0  # (1, S)
    return Analysis(
        text=text, source_pieces=tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist()), unknown=unknown,
        translations=translations, sequences=sequences, trace=trace,
        target_pieces=tokenizer.convert_ids_to_tokens(sequences["gnmt"][1:]),
        attentions={name: [layer[0].float().cpu() for layer in weights] for name, weights in attentions.items()},
        positional=model.get_encoder().embed_positions(source_length).float().cpu(),
        masks={"encoder": allowed.expand(source_length, source_length).cpu(),
               "decoder": (causal_mask(target_length, target_length, "cpu", torch.float32)[0, 0] == 0),
               "cross": allowed.expand(target_length, source_length).cpu()},
        alpha=model.generation_config.length_penalty,
    )


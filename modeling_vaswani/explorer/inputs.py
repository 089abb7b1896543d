"""What the explorer accepts as a sentence, and the message it shows for what it refuses."""

import unicodedata

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
    """The parts of `text` the vocabulary has no piece for (they become <unk>), in order, each once.

    `encoding` is the tokenizer's output for `text` with `return_offsets_mapping=True` (one sentence).
    """
    found = []
    for piece_id, (start, end) in zip(encoding["input_ids"], encoding["offset_mapping"]):
        if piece_id == unk_token_id and text[start:end] not in found:
            found.append(text[start:end])
    return found

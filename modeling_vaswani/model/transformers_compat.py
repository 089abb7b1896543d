"""Differences between transformers 5.x releases, kept out of the model's reading path (glue).

transformers 5.24 renamed the generation cache: it passes `cache=` to `forward` and names the
output field `cache`; earlier 5.x releases use `past_key_values` for both. A `forward` that read
only one name would silently decode without the cached prefix on the other releases.
"""

import warnings

from transformers.modeling_outputs import Seq2SeqLMOutput

CACHE_FIELD = "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"


def pop_cache(cache, kwargs: dict):
    """The cache given as `cache=` or (before 5.24) as `past_key_values=`, removed from `kwargs`.

    On releases that use `cache`, the old name still works and warns, as transformers' own models do.
    """
    legacy = kwargs.pop("past_key_values", None)
    if legacy is not None and CACHE_FIELD == "cache":
        warnings.warn("`past_key_values` is deprecated: transformers 5.24 and later name it `cache`; pass cache=...",
                      FutureWarning, stacklevel=3)
    return cache if cache is not None else legacy


def cache_field(cache) -> dict:
    """Keyword arguments that put `cache` into a model output under this release's field name."""
    return {CACHE_FIELD: cache}

"""modeling_vaswani — the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Read it in the paper's order: positional_encoding (§3.5), embeddings (§3.4), attention (§3.2),
masking (§3.2.3), feed_forward (§3.3), sublayer, encoder and decoder (§3.1), modeling_vaswani (§3,
Figure 1); then training: tokenization and data and batching (§5.1), optimization (§5.3),
label_smoothing (§5.4), checkpoint_averaging (§6.1), trainer.

Importing the package registers the model with the Auto classes, and marks the classes so that
`save_pretrained` writes `auto_map` and copies this code into the checkpoint; a saved folder then
loads with `trust_remote_code=True` where this package is not installed.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .model.configuration_vaswani import VaswaniConfig
from .model.modeling_vaswani import VaswaniForConditionalGeneration, VaswaniModel, VaswaniPreTrainedModel

AutoConfig.register("vaswani", VaswaniConfig, exist_ok=True)
AutoModel.register(VaswaniConfig, VaswaniModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VaswaniConfig, VaswaniForConditionalGeneration, exist_ok=True)
VaswaniConfig.register_for_auto_class()
VaswaniModel.register_for_auto_class("AutoModel")
VaswaniForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = ["VaswaniConfig", "VaswaniModel", "VaswaniForConditionalGeneration", "VaswaniPreTrainedModel"]
__version__ = "0.1.0"

"""Hugging Face layer: the base class of both models (modeling_vaswani.py) and what transformers asks of it.

The config class, the flags transformers reads, weight initialisation (initialization.py), strict
loading and saving (loading.py), and the getters transformers uses to find the embeddings and
the two stacks (resize_token_embeddings, generate, tying).
"""

from transformers import PreTrainedModel

from .configuration_vaswani import VaswaniConfig
from .initialization import initialize_module
from .loading import StrictCheckpoints


class VaswaniPreTrainedModel(StrictCheckpoints, PreTrainedModel):
    """Hugging Face base of both models: config class, weight initialisation, strict loading (loading.py)."""

    config_class = VaswaniConfig
    # The classes a saved folder's config.json names in auto_map (loading.py), for trust_remote_code.
    _auto_map = {"AutoModel": "VaswaniModel", "AutoModelForSeq2SeqLM": "VaswaniForConditionalGeneration"}
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True  # the layers are GradientCheckpointingLayers (stacks.py)
    _supports_sdpa = True  # attention_kernels.py
    # generate(cache_implementation="static") and torch.compile(fullgraph=True) of a decoding step work;
    # transformers' generation tests read this flag.
    _can_compile_fullgraph = True
    _no_split_modules = ["VaswaniEncoderLayer", "VaswaniDecoderLayer"]

    def _init_weights(self, module):
        """Initialisation is not in the paper; ours, and tensor2tensor's and fairseq's: initialization.py."""
        initialize_module(module, self.config)

    def get_input_embeddings(self):
        """The shared matrix (§3.4), or the source embedding when nothing is shared."""
        model = self.base_model
        return model.shared if self.config.share_embeddings else model.encoder.embed_tokens

    def set_input_embeddings(self, value):
        model = self.base_model
        if self.config.share_embeddings:
            model.shared = value
            model.decoder.embed_tokens = value
        model.encoder.embed_tokens = value

    def get_encoder(self, modality: str | None = None):
        """The encoder stack; for a `modality` (image, video, audio) transformers' own lookup, which finds none."""
        return self.base_model.encoder if modality is None else super().get_encoder(modality=modality)

    def get_decoder(self):
        return self.base_model.decoder

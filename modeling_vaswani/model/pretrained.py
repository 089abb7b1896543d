"""Hugging Face layer: the base class of both models (modeling_vaswani.py) and what transformers asks of it:
the config class, weight initialisation (initialization.py), strict loading (loading.py), the embeddings.
"""

from transformers import PreTrainedModel

from .configuration_vaswani import VaswaniConfig
from .initialization import initialize_module
from .loading import StrictCheckpoints


class VaswaniPreTrainedModel(StrictCheckpoints, PreTrainedModel):
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

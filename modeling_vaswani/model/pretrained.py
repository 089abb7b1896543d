"""Hugging Face layer: the base class of both models (modeling_vaswani.py) and what transformers asks of it:
the config class, weight initialisation, strict loading (loading.py), the getters for the embeddings and stacks.

Initialisation is not in the paper. Ours: embeddings ~ Normal(0, d_model^-0.5), so that after the √d_model
scale of §3.4 each entry has unit scale; every Linear Xavier-uniform with zero bias; LayerNorm the identity.
tensor2tensor (the paper's code) and fairseq start the same way: their embeddings likewise, and Xavier-uniform
for the rest (tensor2tensor's "uniform_unit_scaling" setting is variance scaling with fan_avg, uniform), though
over one combined d_model × 3·d_model Q/K/V matrix, whose fan_out gives those entries a smaller variance.
"""

from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init

from .configuration_vaswani import VaswaniConfig
from .embeddings import ScaledEmbedding
from .loading import StrictCheckpoints
from .positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table


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
        std = self.config.init_std if self.config.init_std is not None else self.config.d_model ** -0.5
        if isinstance(module, SinusoidalPositionalEncoding):  # §3.5's table is a buffer: recomputed
            init.copy_(module.table, sinusoidal_table(module.table.shape[0], module.d_model))
        elif isinstance(module, (ScaledEmbedding, LearnedPositionalEmbedding)):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif getattr(module, "final_logits_bias", None) is not None:
            init.zeros_(module.final_logits_bias)

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

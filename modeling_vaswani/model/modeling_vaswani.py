"""§3, Figure 1 — the whole Transformer, as Hugging Face models.

"Most competitive neural sequence transduction models have an encoder-decoder structure. Here,
the encoder maps an input sequence of symbol representations (x_1, …, x_n) to a sequence of
continuous representations z = (z_1, …, z_n). Given z, the decoder then generates an output
sequence (y_1, …, y_m) of symbols one element at a time. At each step the model is
auto-regressive, consuming the previously generated symbols as additional input when generating
the next." (§3)

`VaswaniForConditionalGeneration` is Figure 1 whole: embeddings (§3.4) → encoder and decoder (§3.1) →
the pre-softmax projection (§3.4) → the label-smoothed loss (§5.4); `generate` decodes as §6.1 does.
`VaswaniModel` is Figure 1 without the projection. Below the forward passes sits what transformers needs.
"""

import torch
from torch import nn
from transformers import GenerationMixin
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.utils import can_return_tuple
from transformers.utils.deprecation import deprecate_kwarg

from .configuration_vaswani import VaswaniConfig
from .embeddings import ScaledEmbedding
from .fast_loss import fast_label_smoothed_cross_entropy
from .generation import (
    check_decoding, choose_decoding, decoding_settings, length_limit_chosen, max_new_tokens_for, paper_generation_config,
)
from .generation_cache import new_cache, source_length_varies
from .inputs import check_batch, check_inputs, check_labels
from .label_smoothing import label_smoothed_cross_entropy
from .pipeline_vaswani import VaswaniTranslationPipeline  # noqa: F401  (copied into checkpoints for pipeline())
from .pretrained import VaswaniPreTrainedModel
from .stacks import VaswaniDecoder, VaswaniEncoder


class VaswaniForConditionalGeneration(VaswaniPreTrainedModel, GenerationMixin):
    """The full model of Figure 1: `VaswaniModel` + the pre-softmax projection to the vocabulary."""

    # `generate` below chooses the beam search itself (custom_generate/generate.py defers to it).
    chooses_beam_search = True

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        self.model = VaswaniModel(config)  # embeddings, encoder, decoder
        # §3.4: the pre-softmax projection; no bias, it is the (transposed) embedding matrix itself when shared.
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # Deviation (opt-in, `final_logits_bias=True`): a fixed per-token bias added to the logits, as
        # Marian's models carry; the paper's projection has none. A buffer, like Marian's: saved, not trained.
        bias = torch.zeros(1, config.vocab_size) if config.final_logits_bias else None
        self.register_buffer("final_logits_bias", bias)
        # Deviation (opt-in, tie_word_embeddings=False): a projection of its own, saved as lm_head.weight.
        # Without a shared matrix (share_embeddings=False) a tied projection is the target embedding's.
        if not config.share_embeddings:
            self._tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}
        self.generation_config = paper_generation_config(config)
        self.post_init()

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    @deprecate_kwarg("past_key_values", "6.0.0", new_name="cache")  # its name before transformers 5.24
    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, decoder_attention_mask=None,
                encoder_outputs=None, cache=None, inputs_embeds=None, decoder_inputs_embeds=None, labels=None,
                use_cache=None, output_attentions=None, output_hidden_states=None, num_items_in_batch=None,
                **kwargs) -> Seq2SeqLMOutput:
        check_labels(labels, input_ids, inputs_embeds, encoder_outputs, decoder_input_ids, decoder_inputs_embeds)
        if labels is not None and decoder_input_ids is None and decoder_inputs_embeds is None:
            # §3.1: "the output embeddings are offset by one position" (teacher forcing).
            decoder_input_ids, use_cache = self.prepare_decoder_input_ids_from_labels(labels), False
        cache, flags = self.model.call_settings(cache, use_cache, output_attentions, output_hidden_states)
        # Embed the source and encode it: z (B, S, d_model) (§3.4, §3.5, §3.1)
        encoder_outputs = self.model.encode(input_ids, attention_mask, inputs_embeds, encoder_outputs, flags)
        # Embed the target (shifted right) and decode it, attending to z: (B, T, d_model)
        decoder_outputs = self.model.decode(decoder_input_ids, decoder_inputs_embeds, decoder_attention_mask,
                                            encoder_outputs, attention_mask, cache, flags)
        # Project to the vocabulary (§3.4); softmax is left to the loss / generate. (B, T, V)
        logits = self.lm_head(decoder_outputs.last_hidden_state)
        if self.final_logits_bias is not None:
            logits = logits + self.final_logits_bias.to(logits.dtype)  # Deviation: Marian's logits bias (see __init__)

        loss = None
        if labels is not None:
            # §5.4: label smoothing with ε_ls = config.label_smoothing; positions labelled -100 are ignored.
            # Training takes the same loss with its gradient written out: equal values, faster backward.
            smoothed_loss = fast_label_smoothed_cross_entropy if self.training else label_smoothed_cross_entropy
            total = smoothed_loss(logits, labels, self.config.label_smoothing, reduction="sum")
            count = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
            loss = total / torch.as_tensor(count, device=total.device).clamp(min=1)

        return Seq2SeqLMOutput(loss=loss, logits=logits, **seq2seq_fields(encoder_outputs, decoder_outputs, cache))

    # --- What transformers needs besides the forward pass ---

    # §3.4: "... and the pre-softmax linear transformation": transformers ties (and saves once) only
    # what this declares.
    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}
    # The Trainer passes num_items_in_batch to the loss above only when told (gradient accumulation).
    accepts_loss_kwargs = True

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """The projection's tie, read from the config (as VaswaniModel's)."""
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels)
        if not self.config.tie_word_embeddings:
            return {}
        source = "model.shared.weight" if self.config.share_embeddings else "model.decoder.embed_tokens.weight"
        return {"lm_head.weight": source}

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """Used by forward and by transformers' data collators: labels shifted right (Figure 1)."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @torch.no_grad()
    def generate(self, inputs=None, generation_config=None, **kwargs):
        """`GenerationMixin.generate` with §6.1's length limit when the caller sets none, and §6.1's beam search
        (beam_search.py) when the generation config asks for it. `beam_trace=[]` records it step by step."""
        source = inputs if inputs is not None else kwargs.get("input_ids")
        if source is not None:
            check_batch(source, "input_ids")  # its shape is read below, before generate() runs the encoder
        config = generation_config if generation_config is not None else self.generation_config
        length_given = any(kwargs.get(k) is not None for k in ("max_new_tokens", "max_length"))
        if source is not None and not length_given and not length_limit_chosen(config):
            kwargs["max_new_tokens"] = max_new_tokens_for(config, source.shape[1])
        shape = tuple(source.shape[:2]) if source is not None else (1, 1)
        check_decoding(decoding_settings(config, kwargs), "generate()", *shape)  # before anything is allocated
        decoding = choose_decoding(self, generation_config, kwargs)  # takes the two settings out of kwargs
        if decoding is not None and kwargs.get("custom_generate") is None:
            kwargs["custom_generate"] = decoding
        return super().generate(inputs, generation_config=generation_config, **kwargs)


class VaswaniModel(VaswaniPreTrainedModel):
    """Encoder and decoder with their embeddings (§3, Figure 1 without the final Linear + Softmax)."""

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        def embedding():
            return ScaledEmbedding(config.vocab_size, config.d_model, config.scale_embedding)

        if config.share_embeddings:
            self.shared = embedding()  # the one matrix of §3.4
        else:
            self._tied_weights_keys = None
        # With share_embeddings, post_init ties both stacks' weights to self.shared.weight (one Parameter).
        self.encoder = VaswaniEncoder(config, embedding())
        self.decoder = VaswaniDecoder(config, embedding())
        self.post_init()

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    @deprecate_kwarg("past_key_values", "6.0.0", new_name="cache")  # its name before transformers 5.24
    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, decoder_attention_mask=None,
                encoder_outputs=None, cache=None, inputs_embeds=None, decoder_inputs_embeds=None, use_cache=None,
                output_attentions=None, output_hidden_states=None, **kwargs) -> Seq2SeqModelOutput:
        """Figure 1 up to the decoder output, as in VaswaniForConditionalGeneration.forward."""
        cache, flags = self.call_settings(cache, use_cache, output_attentions, output_hidden_states)
        encoder_outputs = self.encode(input_ids, attention_mask, inputs_embeds, encoder_outputs, flags)
        decoder_outputs = self.decode(decoder_input_ids, decoder_inputs_embeds, decoder_attention_mask,
                                      encoder_outputs, attention_mask, cache, flags)
        return Seq2SeqModelOutput(last_hidden_state=decoder_outputs.last_hidden_state,
                                  **seq2seq_fields(encoder_outputs, decoder_outputs, cache))

    def encode(self, input_ids, attention_mask, inputs_embeds, encoder_outputs, flags) -> BaseModelOutput:
        """The encoder's output: computed (its inputs checked in stacks.py), or given (generate computes it once)."""
        if encoder_outputs is None:
            return self.encoder(input_ids, attention_mask, inputs_embeds, **flags, return_dict=True)
        if not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        return encoder_outputs

    def decode(self, input_ids, inputs_embeds, decoder_attention_mask, encoder_outputs, attention_mask, cache, flags):
        """The decoder's output for the target (its inputs checked here, the model's entry) over the encoder's."""
        check_inputs("decoder_", input_ids, inputs_embeds, decoder_attention_mask, self.config.vocab_size,
                     cache.get_seq_length() if cache is not None else 0)
        if cache is not None:
            source_length_varies(encoder_outputs.last_hidden_state, attention_mask)
        return self.decoder(input_ids, encoder_outputs.last_hidden_state, attention_mask, decoder_attention_mask,
                            inputs_embeds, cache, **flags, return_dict=True)

    # --- What transformers needs besides the forward pass ---

    # §3.4: "we share the same weight matrix between the two embedding layers ...". transformers 5
    # shares a matrix only through this declaration: it ties the Parameters and saves one copy.
    # Deviation (opt-in, share_embeddings=False): separate source and target embeddings.
    _tied_weights_keys = {"encoder.embed_tokens.weight": "shared.weight", "decoder.embed_tokens.weight": "shared.weight"}

    def call_settings(self, cache, use_cache, output_attentions, output_hidden_states):
        """The cache to fill (a new one when none is given, as transformers' models return one) and the flags."""
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        cache = (cache if cache is not None else new_cache(self.config)) if use_cache else None
        flags = {name: bool(value if value is not None else getattr(self.config, name)) for name, value in
                 (("output_attentions", output_attentions), ("output_hidden_states", output_hidden_states))}
        return cache, flags

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """`shared` whenever share_embeddings is true: transformers ties only while tie_word_embeddings is, which
        here is about the projection alone. From the config, so that saving can tell when the model disagrees."""
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels)
        return dict(VaswaniModel._tied_weights_keys) if self.config.share_embeddings else {}


def seq2seq_fields(encoder_outputs, decoder_outputs, cache) -> dict:
    """The fields transformers' Seq2Seq output classes share."""
    return dict(
        decoder_hidden_states=decoder_outputs.hidden_states,
        decoder_attentions=decoder_outputs.attentions,
        cross_attentions=decoder_outputs.cross_attentions,
        encoder_last_hidden_state=encoder_outputs.last_hidden_state,
        encoder_hidden_states=encoder_outputs.hidden_states,
        encoder_attentions=encoder_outputs.attentions,
        cache=cache,
    )


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: [start, y_1, …, y_{m−1}] — "outputs shifted right" (Figure 1)."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)  # ignored label positions become padding

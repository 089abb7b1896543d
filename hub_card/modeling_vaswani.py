"""§3, Figure 1 — the whole Transformer, as Hugging Face models.

"Most competitive neural sequence transduction models have an encoder-decoder structure. Here,
the encoder maps an input sequence of symbol representations (x_1, …, x_n) to a sequence of
continuous representations z = (z_1, …, z_n). Given z, the decoder then generates an output
sequence (y_1, …, y_m) of symbols one element at a time. At each step the model is
auto-regressive, consuming the previously generated symbols as additional input when generating
the next." (§3)

- `VaswaniModel`: embeddings (§3.4) → encoder (§3.1) and decoder (§3.1) → decoder states.
- `VaswaniForConditionalGeneration`: adds the pre-softmax linear projection (§3.4, its weight
  shared with both embeddings), the label-smoothed training loss (§5.4) and `generate` with the
  paper's decoding defaults (§6.1: beam 4, length penalty 0.6, output length ≤ input length + 50).

Everything else is Hugging Face glue: output classes here; weight initialisation in
`initialization.py`; strict loading and saving in `loading.py`; §6.1's decoding settings in
`generation.py`.
"""

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.utils import can_return_tuple

from .configuration_vaswani import VaswaniConfig
from .decoder import Decoder
from .embeddings import ScaledEmbedding
from .encoder import Encoder
from .generation import choose_decoding, length_limit_chosen, max_new_tokens_for, paper_generation_config
from .initialization import initialize_module
from .inputs import check_attention_mask, check_batch, check_decoder_inputs, check_encoder_inputs, check_labels
from .label_smoothing import label_smoothed_cross_entropy
from .loading import StrictCheckpoints
from .masking import attention_dtype, padding_mask
from .pipeline_vaswani import VaswaniTranslationPipeline  # noqa: F401  (copied into checkpoints for pipeline())
from .transformers_compat import CACHE_FIELD, cache_field, pop_cache


class VaswaniPreTrainedModel(StrictCheckpoints, PreTrainedModel):
    """Hugging Face base of both models: config class, weight initialisation, strict loading (loading.py)."""

    config_class = VaswaniConfig
    # The classes a saved folder's config.json names in auto_map (loading.py), for trust_remote_code.
    _auto_map = {"AutoModel": "VaswaniModel", "AutoModelForSeq2SeqLM": "VaswaniForConditionalGeneration"}
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    # generate(cache_implementation="static") and torch.compile(fullgraph=True) of a decoding step work;
    # transformers' generation tests read this flag.
    _can_compile_fullgraph = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]

    def _init_weights(self, module):
        """Initialisation is not in the paper; ours, and tensor2tensor's and fairseq's: initialization.py."""
        initialize_module(module, self.config)


class VaswaniModel(VaswaniPreTrainedModel):
    """Encoder and decoder with their embeddings (§3, Figure 1 without the final Linear + Softmax)."""

    # §3.4: "we share the same weight matrix between the two embedding layers ...". transformers 5
    # shares a matrix only through this declaration: it ties the Parameters and saves one copy.
    # Deviation (opt-in, share_embeddings=False): separate source and target embeddings.
    _tied_weights_keys = {
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        def embedding():
            return ScaledEmbedding(config.vocab_size, config.d_model, config.scale_embedding)

        if config.share_embeddings:
            self.shared = embedding()  # the one matrix of §3.4
        else:
            self._tied_weights_keys = None
        # With share_embeddings, post_init ties both stacks' weights to self.shared.weight (one Parameter).
        self.encoder = Encoder(config, embedding())
        self.decoder = Decoder(config, embedding())
        self.post_init()

    def get_input_embeddings(self):
        """The shared matrix (§3.4), or the source embedding when nothing is shared."""
        return self.shared if self.config.share_embeddings else self.encoder.embed_tokens

    def set_input_embeddings(self, value):
        if self.config.share_embeddings:
            self.shared = value
            self.decoder.embed_tokens = value
        self.encoder.embed_tokens = value

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """The encoder and decoder share `shared` whenever the config's share_embeddings is true.

        transformers applies a model's `_tied_weights_keys` only while `tie_word_embeddings` is
        true; here that flag is about the pre-softmax projection alone
        (VaswaniForConditionalGeneration), so a model with its own projection keeps §3.4's shared
        embedding matrix. Read from the config, not from how the model was built, so that saving
        can tell when the two disagree (loading.py).
        """
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels)
        return dict(VaswaniModel._tied_weights_keys) if self.config.share_embeddings else {}

    def get_encoder(self, modality: str | None = None):
        """The encoder stack; for a `modality` (image, video, audio) transformers' own lookup, which finds none."""
        return self.encoder if modality is None else super().get_encoder(modality=modality)

    def get_decoder(self):
        return self.decoder

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        decoder_input_ids=None,
        decoder_attention_mask=None,
        encoder_outputs=None,
        cache=None,
        inputs_embeds=None,
        decoder_inputs_embeds=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        cache = pop_cache(cache, kwargs)  # `past_key_values=` before transformers 5.24
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if not use_cache:
            cache = None
        elif cache is None:
            # A cache to return, as transformers' models do: the next call continues from it.
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        output_attentions = bool(output_attentions if output_attentions is not None else self.config.output_attentions)
        output_hidden_states = bool(
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )

        if encoder_outputs is None:
            check_encoder_inputs(input_ids, inputs_embeds, attention_mask)
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                return_dict=True,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        check_decoder_inputs(decoder_input_ids, decoder_inputs_embeds, decoder_attention_mask)

        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            decoder_attention_mask=decoder_attention_mask,
            inputs_embeds=decoder_inputs_embeds,
            cache=cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
            **cache_field(cache),
        )


class VaswaniForConditionalGeneration(VaswaniPreTrainedModel, GenerationMixin):
    """The full model of Figure 1: `VaswaniModel` + the pre-softmax projection to the vocabulary."""

    # §3.4: "... and the pre-softmax linear transformation".
    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}
    # The loss below divides by num_items_in_batch when the Trainer gives it (gradient accumulation).
    accepts_loss_kwargs = True
    # `generate` below chooses the beam search itself (custom_generate/generate.py defers to it).
    chooses_beam_search = True

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        self.model = VaswaniModel(config)
        # Deviation (opt-in, tie_word_embeddings=False): a projection of its own, saved as lm_head.weight.
        # Without a shared matrix (share_embeddings=False) a tied projection is the target embedding's.
        if not config.share_embeddings:
            self._tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}
        # No bias: the projection is the (transposed) embedding matrix itself when shared.
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # Deviation (opt-in, `final_logits_bias=True`): a fixed per-token bias added to the logits, as
        # Marian's models carry; the paper's projection has none. A buffer, like Marian's: saved, not trained.
        bias = torch.zeros(1, config.vocab_size) if config.final_logits_bias else None
        self.register_buffer("final_logits_bias", bias)
        self.generation_config = paper_generation_config(config)
        self.post_init()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """The projection's tie, read from the config (see VaswaniModel.get_expanded_tied_weights_keys)."""
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels)
        if not self.config.tie_word_embeddings:
            return {}
        source = "model.shared.weight" if self.config.share_embeddings else "model.decoder.embed_tokens.weight"
        return {"lm_head.weight": source}

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def get_encoder(self, modality: str | None = None):
        """The encoder stack; for a `modality` (image, video, audio) transformers' own lookup, which finds none."""
        return self.model.encoder if modality is None else super().get_encoder(modality=modality)

    def get_decoder(self):
        return self.model.decoder

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        decoder_input_ids=None,
        decoder_attention_mask=None,
        encoder_outputs=None,
        cache=None,
        inputs_embeds=None,
        decoder_inputs_embeds=None,
        labels=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        num_items_in_batch=None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        check_labels(labels, input_ids, inputs_embeds, encoder_outputs, decoder_input_ids, decoder_inputs_embeds)
        if labels is not None and decoder_input_ids is None and decoder_inputs_embeds is None:
            # §3.1: "the output embeddings are offset by one position" (teacher forcing).
            decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
            use_cache = False
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=pop_cache(cache, kwargs),
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        logits = self.lm_head(outputs.last_hidden_state)  # (B, T, V); softmax is left to the loss / generate
        if self.final_logits_bias is not None:
            logits = logits + self.final_logits_bias.to(logits.dtype)  # Deviation: Marian's logits bias (see __init__)

        loss = None
        if labels is not None:
            # §5.4: label smoothing with ε_ls = config.label_smoothing; positions labelled -100 are ignored.
            total = label_smoothed_cross_entropy(logits, labels, self.config.label_smoothing, reduction="sum")
            count = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
            loss = total / torch.as_tensor(count, device=total.device).clamp(min=1)

        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
            **cache_field(getattr(outputs, CACHE_FIELD)),
        )

    @torch.no_grad()
    def generate(self, inputs=None, generation_config=None, **kwargs):
        """`GenerationMixin.generate` with the paper's length limit when the caller sets none, and
        the paper's beam search when the generation config asks for it.

        §6.1: the output may be at most input length + 50 tokens ("terminating early when
        possible", i.e. at the end-of-sentence token); the 50 is the generation config's
        `max_output_length_offset`. With padded batches the longest input sets the limit for the
        batch.

        Beam search (num_beams > 1, no sampling) is beam_search.py's when the generation config
        (or the call) sets `length_penalty_formula="gnmt"` or `beam_termination="bound"` — every new
        model's does (generation.py); with neither set (files saved before they existed), and with
        TRANSFORMERS_BEAM_SEARCH, it is transformers' own. `beam_trace=[]` records the paper's search
        step by step (beam_search.py).
        """
        source = inputs if inputs is not None else kwargs.get("input_ids")
        if source is not None:
            # generate() runs the encoder itself, bypassing forward(); check the batch here.
            check_batch(source, "input_ids")
        check_attention_mask(kwargs.get("attention_mask"), "attention_mask")
        config = generation_config if generation_config is not None else self.generation_config
        length_given = any(kwargs.get(k) is not None for k in ("max_new_tokens", "max_length"))
        if source is not None and not length_given and not length_limit_chosen(config):
            kwargs["max_new_tokens"] = max_new_tokens_for(config, source.shape[1])
        decoding = choose_decoding(self, generation_config, kwargs)  # takes the two settings out of kwargs
        if decoding is not None and kwargs.get("custom_generate") is None:
            kwargs["custom_generate"] = decoding
        return super().generate(inputs, generation_config=generation_config, **kwargs)

    def encoder_decoder_attention_mask(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """§3.2.3's padding mask for encoder–decoder attention, additive (B, 1, 1, S), in the dtype of
        the attention scores; beam search builds it once and the decoder takes it as it is."""
        return padding_mask(attention_mask, attention_dtype(self.model.decoder.embed_tokens.weight))


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: [start, y_1, …, y_{m−1}] — "outputs shifted right" (Figure 1)."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)  # ignored label positions become padding

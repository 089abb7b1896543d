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

Everything else is Hugging Face glue: weight initialisation and output classes here; strict
loading and saving in `loading.py`; §6.1's decoding settings in `generation.py`.
"""

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput

from .configuration_vaswani import VaswaniConfig
from .decoder import Decoder
from .embeddings import ScaledEmbedding
from .encoder import Encoder
from .generation import length_limit_chosen, max_new_tokens_for, paper_generation_config
from .inputs import check_batch
from .label_smoothing import label_smoothed_cross_entropy
from .loading import StrictCheckpoints
from .pipeline_vaswani import VaswaniTranslationPipeline  # noqa: F401  (copied into checkpoints for pipeline())
from .positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from .transformers_compat import CACHE_FIELD, cache_field, pop_cache


class VaswaniPreTrainedModel(StrictCheckpoints, PreTrainedModel):
    """Hugging Face base of both models: config class, weight initialisation, strict loading (loading.py)."""

    config_class = VaswaniConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]

    def _init_weights(self, module):
        """Initialisation is not in the paper; we follow tensor2tensor and fairseq.

        Embeddings ~ Normal(0, d_model^-0.5), so that after the √d_model scale of §3.4 each entry
        has unit scale; every Linear Xavier-uniform with zero bias; LayerNorm the identity.
        """
        std = self.config.init_std if self.config.init_std is not None else self.config.d_model ** -0.5
        if isinstance(module, SinusoidalPositionalEncoding):
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


class VaswaniModel(VaswaniPreTrainedModel):
    """Encoder and decoder with their embeddings (§3, Figure 1 without the final Linear + Softmax)."""

    # §3.4: "we share the same weight matrix between the two embedding layers ...". transformers 5
    # shares a matrix only through this declaration: it ties the Parameters and saves one copy.
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

    def get_encoder(self):
        return self.encoder

    def get_decoder(self):
        return self.decoder

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
        return_dict=None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        cache = pop_cache(cache, kwargs)  # `past_key_values=` before transformers 5.24
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if not use_cache:
            cache = None
        output_attentions = bool(output_attentions if output_attentions is not None else self.config.output_attentions)
        output_hidden_states = bool(
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )

        if encoder_outputs is None:
            if input_ids is not None:
                check_batch(input_ids, "input_ids")
            else:
                check_batch(inputs_embeds, "inputs_embeds", is_ids=False)
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        if decoder_input_ids is not None:
            check_batch(decoder_input_ids, "decoder_input_ids")

        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            decoder_attention_mask=decoder_attention_mask,
            inputs_embeds=decoder_inputs_embeds,
            cache=cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
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

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        self.model = VaswaniModel(config)
        # No bias: the projection is the (transposed) embedding matrix itself when shared.
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.generation_config = paper_generation_config(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def get_encoder(self):
        return self.model.encoder

    def get_decoder(self):
        return self.model.decoder

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

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
        return_dict=None,
        num_items_in_batch=None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
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
        )
        logits = self.lm_head(outputs.last_hidden_state)  # (B, T, V); softmax is left to the loss / generate

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
        """`GenerationMixin.generate` with the paper's length limit when the caller sets none.

        §6.1: the output may be at most input length + 50 tokens ("terminating early when
        possible", i.e. at the end-of-sentence token); the 50 is the generation config's
        `max_output_length_offset`. With padded batches the longest input sets the limit for the
        batch.
        """
        source = inputs if inputs is not None else kwargs.get("input_ids")
        if source is not None:
            # generate() runs the encoder itself, bypassing forward(); check the batch here.
            check_batch(source, "input_ids")
        config = generation_config if generation_config is not None else self.generation_config
        length_given = any(kwargs.get(k) is not None for k in ("max_new_tokens", "max_length"))
        if source is not None and not length_given and not length_limit_chosen(config):
            kwargs["max_new_tokens"] = max_new_tokens_for(config, source.shape[1])
        return super().generate(inputs, generation_config=generation_config, **kwargs)


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: [start, y_1, …, y_{m−1}] — "outputs shifted right" (Figure 1)."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)  # ignored label positions become padding

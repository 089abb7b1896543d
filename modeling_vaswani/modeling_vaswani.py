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

Everything else is Hugging Face glue: weight initialisation, the generation cache, output classes.
"""

from pathlib import Path

import torch
from safetensors import SafetensorError
from torch import nn
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput

from .configuration_vaswani import VaswaniConfig
from .decoder import Decoder
from .embeddings import ScaledEmbedding
from .encoder import Encoder
from .label_smoothing import label_smoothed_cross_entropy
from .pipeline_vaswani import VaswaniTranslationPipeline  # noqa: F401  (copied into checkpoints for pipeline())
from .positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table

# transformers 5.24 names the cache field of model outputs "cache"; earlier 5.x "past_key_values".
_CACHE_FIELD = "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"

# §6.1: "We set the maximum output length during inference to input length + 50".
MAX_OUTPUT_LENGTH_OFFSET = 50
# The max_length (20) that GenerationMixin.generate falls back to when none is set.
GENERATE_FALLBACK_MAX_LENGTH = GenerationConfig._get_default_generation_params()["max_length"]


class VaswaniPreTrainedModel(PreTrainedModel):
    config_class = VaswaniConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """`PreTrainedModel.from_pretrained`, strict about the weights (Hugging Face glue, not from the paper).

        Hugging Face only logs a warning when the weights file lacks some parameters, and fills them
        with random values. `save_pretrained` writes config.json first and model.safetensors last,
        so a save that was interrupted would then load as a valid-looking but untrained model.
        Here a loaded model is complete or loading fails:
        - a folder without model.safetensors → FileNotFoundError;
        - a truncated or corrupted safetensors file → ValueError naming it;
        - weights that do not cover every parameter → ValueError naming the missing tensors;
        - a tensor whose shape differs from the one config.json implies → ValueError naming it
          (pass `ignore_mismatched_sizes=True` to re-initialise such tensors on purpose).
        Weights are read from safetensors only: pickled `pytorch_model.bin` files are never
        unpickled, because unpickling can run arbitrary code.
        """
        if kwargs.get("use_safetensors") is False:
            raise ValueError("use_safetensors=False is not supported: weights are loaded from safetensors only.")
        kwargs["use_safetensors"] = True
        folder = Path(pretrained_model_name_or_path) if pretrained_model_name_or_path is not None else None
        reinit_mismatched = kwargs.pop("ignore_mismatched_sizes", False)
        return_info = kwargs.pop("output_loading_info", False)
        try:
            # Mismatched shapes are let through here and reported below with their names.
            model, info = super().from_pretrained(
                pretrained_model_name_or_path, *model_args, ignore_mismatched_sizes=True, output_loading_info=True,
                **kwargs,
            )
        except OSError:
            if folder is not None and folder.is_dir() and (folder / "config.json").is_file():
                _check_weights_file(folder)  # a clearer message when the weights file is what is missing
            raise
        except SafetensorError as error:
            local = folder is not None and folder.is_dir()
            where = folder / "model.safetensors" if local else pretrained_model_name_or_path
            raise ValueError(
                f"Cannot read the weights {str(where)!r}: {error}. The file is truncated or corrupted (an "
                "interrupted save or download?); save or download the model again."
            ) from None
        missing = sorted(info["missing_keys"])
        if missing:
            raise ValueError(
                f"The weights of {str(pretrained_model_name_or_path)!r} lack {len(missing)} of the model's tensors "
                f"(first: {missing[0]!r}); they would start from random values. The weights file is incomplete or "
                "belongs to another model; save the model again or point to a complete folder."
            )
        if info["mismatched_keys"] and not reinit_mismatched:
            name, stored, expected = sorted(info["mismatched_keys"], key=lambda item: item[0])[0]
            raise ValueError(
                f"The weights of {str(pretrained_model_name_or_path)!r} do not match its config: tensor {name!r} has "
                f"shape {tuple(stored)} in the file but {tuple(expected)} in the model the config describes "
                f"({len(info['mismatched_keys'])} such tensors). Fix config.json (e.g. d_model, d_ff, vocab_size) "
                "or pass ignore_mismatched_sizes=True to re-initialise those tensors."
            )
        return (model, info) if return_info else model

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, never leaving old weights beside a new config (Hugging Face glue).

        A folder is a model once its model.safetensors is whole, and `save_pretrained` writes that
        file last. Saving over an earlier model (a re-saved checkpoint, a rerun into the same
        output folder), the old weights are removed first: a save stopped half-way then leaves a
        folder that refuses to load, not the earlier weights under the new config.json. The saved
        generation_config.json lists only what was set (`drop_generate_fallbacks`) and always the
        §6.1 length offset.
        """
        if kwargs.get("is_main_process", True):
            for name in ("model.safetensors", "model.safetensors.index.json"):
                (Path(save_directory) / name).unlink(missing_ok=True)
        drop_generate_fallbacks(self.generation_config)
        if getattr(self.generation_config, "max_output_length_offset", None) is None:
            # A model loaded from a file written before the entry existed: save the limit generate applies.
            self.generation_config.max_output_length_offset = MAX_OUTPUT_LENGTH_OFFSET
        return super().save_pretrained(save_directory, *args, **kwargs)

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

    # §3.4: "we share the same weight matrix between the two embedding layers ..."
    _tied_weights_keys = {
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        if config.share_embeddings:
            # The one matrix of §3.4; Hugging Face ties the encoder's and decoder's copies to it.
            self.shared = ScaledEmbedding(config.vocab_size, config.d_model, config.scale_embedding)
        self.encoder = Encoder(config, ScaledEmbedding(config.vocab_size, config.d_model, config.scale_embedding))
        self.decoder = Decoder(config, ScaledEmbedding(config.vocab_size, config.d_model, config.scale_embedding))
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
        past_key_values=None,
        inputs_embeds=None,
        decoder_inputs_embeds=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        # Generation hands the cache over as `cache=` (transformers ≥ 5.24) or `past_key_values=`
        # (earlier 5.x); dropping either would silently decode without the cached prefix.
        cache = cache if cache is not None else past_key_values
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if not use_cache:
            cache = None
        output_attentions = bool(output_attentions if output_attentions is not None else self.config.output_attentions)
        output_hidden_states = bool(
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )

        if encoder_outputs is None:
            if input_ids is not None:
                _check_batch(input_ids, "input_ids")
            else:
                _check_batch(inputs_embeds, "inputs_embeds", is_ids=False)
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
            _check_batch(decoder_input_ids, "decoder_input_ids")

        hidden, decoder_hidden, self_attentions, cross_attentions = self.decoder(
            decoder_input_ids,
            encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            decoder_attention_mask=decoder_attention_mask,
            inputs_embeds=decoder_inputs_embeds,
            cache=cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=hidden,
            decoder_hidden_states=tuple(decoder_hidden) if output_hidden_states else None,
            decoder_attentions=tuple(self_attentions) if output_attentions else None,
            cross_attentions=tuple(cross_attentions) if output_attentions else None,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
            **{_CACHE_FIELD: cache},
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
        past_key_values=None,
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
            cache=cache if cache is not None else past_key_values,
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
            **{_CACHE_FIELD: getattr(outputs, _CACHE_FIELD)},
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
            _check_batch(source, "input_ids")
        config = generation_config if generation_config is not None else self.generation_config
        length_given = any(kwargs.get(k) is not None for k in ("max_new_tokens", "max_length"))
        # Checkpoints saved by earlier versions during Trainer evaluation carry generate's fallback
        # max_length of 20: that means "no limit chosen" here.
        limit_set = config.max_new_tokens is not None or config.max_length not in (None, GENERATE_FALLBACK_MAX_LENGTH)
        if not length_given and not limit_set:
            if source is not None:
                # The "+ 50" is stored in generation_config.json; older files without it get the paper's.
                offset = getattr(config, "max_output_length_offset", None)
                offset = MAX_OUTPUT_LENGTH_OFFSET if offset is None else offset
                kwargs["max_new_tokens"] = source.shape[1] + offset
        return super().generate(inputs, generation_config=generation_config, **kwargs)


# §6.1: "beam search with a beam size of 4 and length penalty α = 0.6" and "maximum output length
# during inference to input length + 50". GenerationConfig has no field for a limit relative to
# the input, so max_output_length_offset is our own entry, saved with the rest and read by generate.
PAPER_DECODING = dict(
    num_beams=4,
    length_penalty=0.6,
    early_stopping=True,
    use_cache=True,  # the Trainer may switch config.use_cache off; decoding reads this one
    max_output_length_offset=MAX_OUTPUT_LENGTH_OFFSET,
)


def paper_generation_config(config: VaswaniConfig) -> GenerationConfig:
    """§6.1 decoding: beam search with beam size 4 and length penalty α = 0.6, outputs of at most
    input length + 50 tokens (`max_output_length_offset`, applied by `generate`).

    Deviation: Hugging Face divides a hypothesis' log-probability by |Y|^α, while the paper (after
    GNMT) divides by ((5 + |Y|) / 6)^α; both favour longer outputs as α grows, but the numbers
    differ.
    """
    return GenerationConfig(
        **PAPER_DECODING,
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
    )


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: [start, y_1, …, y_{m−1}] — "outputs shifted right" (Figure 1)."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)  # ignored label positions become padding


def drop_generate_fallbacks(generation_config: GenerationConfig) -> None:
    """Unset the values that equal generate()'s own fallbacks, keeping §6.1's (Hugging Face glue).

    Seq2SeqTrainer's evaluation used to write every fallback (max_length 20, top_k 50, ...) into
    the model's generation config, and checkpoints saved them as if chosen. generate() fills an
    unset value with that same fallback, so decoding is unchanged; the saved file lists only what
    was set. Changes `generation_config` in place.
    """
    for key, fallback in generation_config._get_default_generation_params().items():
        if key not in PAPER_DECODING and fallback is not None and getattr(generation_config, key, None) == fallback:
            setattr(generation_config, key, None)


def _check_batch(tensor, name, is_ids=True):
    """Reject malformed inputs at the model's entry, where the message can name the argument."""
    if tensor is None:
        raise ValueError("Pass input_ids (B, S) or inputs_embeds (B, S, d_model) for the encoder.")
    if is_ids and tensor.dim() != 2:
        raise ValueError(
            f"{name} must have shape (batch, length), got {tuple(tensor.shape)}; "
            "for one sentence add a batch dimension, e.g. ids[None]."
        )
    if is_ids and (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool):
        raise ValueError(f"{name} must hold integer token ids, got dtype {tensor.dtype}; use torch.long.")
    if tensor.shape[0] == 0:
        raise ValueError(f"{name} holds an empty batch (0 sentences); pass at least one sentence.")
    if tensor.dim() > 1 and tensor.shape[1] == 0:
        raise ValueError(f"{name} has sequences of length 0; every sequence needs at least one token (e.g. </s>).")


def _check_weights_file(folder: Path) -> None:
    """A local model folder must hold safetensors weights (see `VaswaniPreTrainedModel.from_pretrained`)."""
    if (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file():
        return
    if any(folder.glob("pytorch_model*.bin")):
        raise ValueError(
            f"{str(folder)!r} holds only pickled weights (pytorch_model.bin), which are not loaded because "
            "unpickling can run arbitrary code; convert them to model.safetensors with a trusted tool."
        )
    raise FileNotFoundError(
        f"{str(folder)!r} has no model.safetensors: the folder holds no weights (save_pretrained writes them "
        "last, so an interrupted save leaves this state). Save the model again or point to a complete folder."
    )

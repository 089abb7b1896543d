"""The one difference between Marian and ours that is no setting: the layout of the sinusoids (§3.5),
and the table of every weight's name on both sides.

The one difference that is no setting is the layout of the sinusoids (§3.5): ours interleave,
PE(pos, 2i) = sin and PE(pos, 2i+1) = cos, while Marian puts all the sines in the first half of
d_model and all the cosines in the second. One permutation of the d_model coordinates maps the
one layout onto the other, and every part of the model is equivariant under it: a Linear whose
input (or output) coordinates are permuted gives the same result when its weight's columns (or
rows and bias) are permuted alike; LayerNorm's mean and variance do not depend on the order of
the coordinates, so permuting its input, γ and β permutes its output; the FFN and attention act
on d_model only through such Linears (the head dimensions are untouched); and the embeddings,
shared with the output projection, are rows of d_model coordinates. So converting permutes the
d_model side of every weight — embedding columns, the input columns of W^Q, W^K, W^V and W_1, the
output rows and biases of W^O and W_2, every γ and β — and nothing else. The two models then do
the same arithmetic in a different order: logits agree to float rounding (about 1e-6 relative in
float32), greedy and beam outputs are the same, and ours → Marian → ours gives back the same
tensors bit for bit (a permutation and its inverse only move numbers).
"""

from __future__ import annotations

import torch

# How each weight's d_model side is laid out: IN = its last dimension (embedding columns, a Linear's
# input), OUT = its first dimension (a Linear's output rows, or a d_model vector), NONE = no d_model side.
IN, OUT, NONE = "in", "out", "none"


def marian_order(d_model: int) -> torch.Tensor:
    """The permutation from our d_model coordinates to Marian's: marian[..., j] = ours[..., order[j]].

    Marian's coordinate j < ⌈d/2⌉ holds sin(pos / 10000^(2j/d)), ours at 2j; Marian's ⌈d/2⌉ + i holds
    the cosine of frequency i, ours at 2i + 1.
    """
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def weight_names(num_layers: int, num_decoder_layers: int) -> list[tuple[str, str, str]]:
    """(our state_dict name, Marian's, layout of the d_model side) for every weight of both models.

    Ours may lack the attention biases and the logits bias (Marian's are all zeros then).
    """
    names = [(name, name, IN) for name in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                          "model.decoder.embed_tokens.weight", "lm_head.weight")]

    def attention(ours: str, theirs: str):
        for projection in ("q_proj", "k_proj", "v_proj"):
            names.append((f"{ours}.{projection}.weight", f"{theirs}.{projection}.weight", IN))
            names.append((f"{ours}.{projection}.bias", f"{theirs}.{projection}.bias", NONE))
        names.append((f"{ours}.out_proj.weight", f"{theirs}.out_proj.weight", OUT))
        names.append((f"{ours}.out_proj.bias", f"{theirs}.out_proj.bias", OUT))

    def norm(ours: str, theirs: str):
        names.append((f"{ours}.weight", f"{theirs}.weight", OUT))
        names.append((f"{ours}.bias", f"{theirs}.bias", OUT))

    def feed_forward(prefix: str):
        names.append((f"{prefix}.feed_forward.linear_1.weight", f"{prefix}.fc1.weight", IN))
        names.append((f"{prefix}.feed_forward.linear_1.bias", f"{prefix}.fc1.bias", NONE))
        names.append((f"{prefix}.feed_forward.linear_2.weight", f"{prefix}.fc2.weight", OUT))
        names.append((f"{prefix}.feed_forward.linear_2.bias", f"{prefix}.fc2.bias", OUT))

    for i in range(num_layers):
        prefix = f"model.encoder.layers.{i}"
        attention(f"{prefix}.self_attn", f"{prefix}.self_attn")
        norm(f"{prefix}.self_attn_sublayer.norm", f"{prefix}.self_attn_layer_norm")
        feed_forward(prefix)
        norm(f"{prefix}.feed_forward_sublayer.norm", f"{prefix}.final_layer_norm")
    for i in range(num_decoder_layers):
        prefix = f"model.decoder.layers.{i}"
        attention(f"{prefix}.self_attn", f"{prefix}.self_attn")
        norm(f"{prefix}.self_attn_sublayer.norm", f"{prefix}.self_attn_layer_norm")
        attention(f"{prefix}.cross_attn", f"{prefix}.encoder_attn")
        norm(f"{prefix}.cross_attn_sublayer.norm", f"{prefix}.encoder_attn_layer_norm")
        feed_forward(prefix)
        norm(f"{prefix}.feed_forward_sublayer.norm", f"{prefix}.final_layer_norm")
    names.append(("final_logits_bias", "final_logits_bias", NONE))
    return names


def is_attention_bias(name: str) -> bool:
    """Whether `name` is a bias of W^Q, W^K, W^V or W^O (ours may do without them)."""
    return name.endswith("_proj.bias")


def permute(tensor: torch.Tensor, layout: str, order: torch.Tensor) -> torch.Tensor:
    """`tensor` with its d_model side (`layout`) in the coordinate order `order`; a copy when it has none."""
    if layout == IN:
        return tensor.index_select(tensor.dim() - 1, order.to(tensor.device))
    if layout == OUT:
        return tensor.index_select(0, order.to(tensor.device))
    return tensor.clone()

"""Example 06 — §3.1: one encoder layer and one decoder layer, followed tensor by tensor.

Encoder layer:  x → LayerNorm(x + Dropout(SelfAttention(x))) → LayerNorm(x + Dropout(FFN(x)))
Decoder layer:  y → LayerNorm(y + Dropout(MaskedSelfAttention(y)))
                  → LayerNorm(y + Dropout(EncoderDecoderAttention(y, z)))   (z: encoder output)
                  → LayerNorm(y + Dropout(FFN(y)))

What this script shows: a small model (d_model 32, h 4, d_ff 64, 2 layers per stack) translating
a batch of 2 padded source sentences, with a forward hook on every step of the first encoder
layer and the first decoder layer. Each step prints its output shape in the order it finishes,
so you can follow ids → embeddings → layers → logits. Notice that every sub-layer returns
(B, length, d_model): that is what lets the residual connections add x + Sublayer(x), and it is
why the paper makes "all sub-layers ... produce outputs of dimension d_model". Only the
cross-attention mixes the two lengths: queries from T target positions, keys and values from S
source positions. The picture draws the same steps as boxes, wide by their last dimension.

Code: `modeling_vaswani/model/encoder.py` (`EncoderLayer`, `Encoder`), `modeling_vaswani/model/decoder.py`
(`DecoderLayer`, `Decoder`), `modeling_vaswani/model/sublayer.py` (`SublayerConnection`).

    python examples/06_encoder_decoder_layers.py
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))

# (module path inside VaswaniForConditionalGeneration, what the step is)
ENCODER_STEPS = [
    ("model.encoder.embed_tokens", "token embedding × √d_model (§3.4)"),
    ("model.encoder.embed_positions", "positional encoding (§3.5), one row per position"),
    ("model.encoder.layers.0.self_attn.q_proj", "self-attention: Q = x W^Q, all heads"),
    ("model.encoder.layers.0.self_attn", "self-attention output, heads concatenated · W^O"),
    ("model.encoder.layers.0.self_attn_sublayer", "LayerNorm(x + Dropout(SelfAttn(x)))"),
    ("model.encoder.layers.0.feed_forward.linear_1", "FFN inner layer x W_1 + b_1 (d_ff wide)"),
    ("model.encoder.layers.0.feed_forward", "FFN output (Eq. 2)"),
    ("model.encoder.layers.0.feed_forward_sublayer", "LayerNorm(x + Dropout(FFN(x)))  = layer 1 output"),
    ("model.encoder", "encoder output z after N layers (no final LayerNorm in post-LN)"),
]
DECODER_STEPS = [
    ("model.decoder.embed_tokens", "target embedding × √d_model (inputs shifted right)"),
    ("model.decoder.embed_positions", "positional encoding (§3.5)"),
    ("model.decoder.layers.0.self_attn", "masked self-attention (causal mask)"),
    ("model.decoder.layers.0.self_attn_sublayer", "LayerNorm(y + Dropout(MaskedSelfAttn(y)))"),
    ("model.decoder.layers.0.cross_attn.q_proj", "cross-attention queries from the decoder"),
    ("model.decoder.layers.0.cross_attn.k_proj", "cross-attention keys from the encoder output z"),
    ("model.decoder.layers.0.cross_attn", "encoder–decoder attention output"),
    ("model.decoder.layers.0.cross_attn_sublayer", "LayerNorm(y + Dropout(CrossAttn(y, z)))"),
    ("model.decoder.layers.0.feed_forward.linear_1", "FFN inner layer (d_ff wide)"),
    ("model.decoder.layers.0.feed_forward_sublayer", "LayerNorm(y + Dropout(FFN(y)))  = layer 1 output"),
    ("lm_head", "pre-softmax projection to the vocabulary (tied, §3.4)"),
]


def main():
    torch.manual_seed(0)
    config = VaswaniConfig(vocab_size=100, d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.1)
    model = VaswaniForConditionalGeneration(config).eval()
    print(f"config: N={config.num_layers}, d_model={config.d_model}, d_ff={config.d_ff}, h={config.num_heads}, "
          f"d_k=d_v={config.d_k}, vocabulary {config.vocab_size}")

    # Two source sentences (S = 7, the first padded) and their targets (T = 5).
    input_ids = torch.tensor([[15, 27, 33, 48, 2, 0, 0], [12, 19, 44, 51, 66, 70, 2]])
    attention_mask = (input_ids != config.pad_token_id).long()
    labels = torch.tensor([[21, 34, 55, 2, 0], [17, 28, 39, 61, 2]])
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)  # [<s>, y_1, …, y_{T−1}]
    print(f"input_ids {tuple(input_ids.shape)} (B, S); decoder_input_ids {tuple(decoder_input_ids.shape)} (B, T)")
    print(f"labels[0]            = {labels[0].tolist()}")
    print(f"decoder_input_ids[0] = {decoder_input_ids[0].tolist()}   (shifted right, starts with <s> = 1)")

    modules = dict(model.named_modules())
    descriptions = dict(ENCODER_STEPS + DECODER_STEPS)
    trace = []  # (name, shape) in the order the modules finish

    def record(name):
        def hook(module, inputs, output):
            tensor = output[0] if isinstance(output, tuple) else getattr(output, "last_hidden_state", output)
            trace.append((name, tuple(tensor.shape)))
        return hook

    for name in descriptions:
        modules[name].register_forward_hook(record(name))
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits

    print("\nstep by step (B = 2, S = 7 source positions, T = 5 target positions):")
    for name, shape in trace:
        print(f"  {str(shape):>13}  {descriptions[name]:<66} [{name}]")
    print(f"\nlogits {tuple(logits.shape)} = (B, T, vocabulary): one next-token distribution per target position")
    shapes = dict(trace)
    assert shapes["model.encoder"] == (2, 7, config.d_model)
    assert shapes["model.decoder.layers.0.cross_attn"] == (2, 5, config.d_model)
    assert shapes["model.decoder.layers.0.cross_attn.k_proj"] == (2, 7, config.num_heads * config.d_k)

    fig, axes = plt.subplots(1, 2, figsize=(15, 7))
    for axis, steps, title in ((axes[0], ENCODER_STEPS, "encoder: embeddings + layer 1"),
                               (axes[1], DECODER_STEPS, "decoder: embeddings + layer 1 + lm_head")):
        rows = [(name, shapes[name]) for name, _ in steps]
        widest = max(shape[-1] for _, shape in rows)
        for row, (name, shape) in enumerate(rows):
            width = 0.15 + 0.85 * shape[-1] / widest
            color = "tab:orange" if "attn" in name else "tab:green" if "feed_forward" in name else "tab:blue"
            axis.add_patch(Rectangle((0, -row - 0.8), width, 0.65, color=color, alpha=0.35))
            axis.text(0.01, -row - 0.47, f"{shape}  {descriptions[name]}", va="center", fontsize=8.5)
        axis.set(xlim=(0, 1.6), ylim=(-len(rows) - 0.2, 0.2), title=title)
        axis.axis("off")
    fig.suptitle("Output shape of each step (box width ∝ last dimension; orange attention, green FFN)")
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "06_encoder_decoder_layers.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"saved {path}")


if __name__ == "__main__":
    main()

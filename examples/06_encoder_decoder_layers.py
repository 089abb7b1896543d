"""Example 06 — §3.1: one encoder layer and one decoder layer, followed tensor by tensor.

Forward hooks print each step's output shape: every sub-layer returns (B, length, d_model), so the residual
can add x + Sublayer(x), and only cross-attention mixes the two lengths. The picture: both layers' data flow,
post-LN (§3.1, §5.4). Code: `model/encoder.py`, `model/decoder.py`.
"""

import torch

from common import plt, save
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration

E, D = "model.encoder.layers.0.", "model.decoder.layers.0."
STEPS = {  # module inside VaswaniForConditionalGeneration: what the step is
    "model.encoder.embed_tokens": "token embedding × √d_model (§3.4)",
    "model.encoder.embed_positions": "positional encoding (§3.5), one row per position",
    E + "self_attn": "self-attention output, heads concatenated · W^O",
    E + "self_attn_sublayer": "LayerNorm(x + Dropout(SelfAttn(x)))",
    E + "feed_forward.linear_1": "FFN inner layer x W_1 + b_1 (d_ff wide)",
    E + "feed_forward_sublayer": "LayerNorm(x + Dropout(FFN(x)))  = layer 1 output",
    "model.encoder": "encoder output z after N layers (no final LayerNorm in post-LN)",
    "model.decoder.embed_tokens": "target embedding × √d_model (inputs shifted right)",
    D + "self_attn_sublayer": "LayerNorm(y + Dropout(MaskedSelfAttn(y)))",
    D + "cross_attn.q_proj": "cross-attention queries from the decoder",
    D + "cross_attn.k_proj": "cross-attention keys from the encoder output z",
    D + "cross_attn": "encoder–decoder attention output",
    D + "cross_attn_sublayer": "LayerNorm(y + Dropout(CrossAttn(y, z)))",
    D + "feed_forward.linear_1": "FFN inner layer (d_ff wide)",
    D + "feed_forward_sublayer": "LayerNorm(y + Dropout(FFN(y)))  = layer 1 output",
    "lm_head": "pre-softmax projection to the vocabulary (tied, §3.4)",
}

torch.manual_seed(0)
config = VaswaniConfig(vocab_size=100, d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.1)
model = VaswaniForConditionalGeneration(config).eval()
input_ids = torch.tensor([[15, 27, 33, 48, 2, 0, 0], [12, 19, 44, 51, 66, 70, 2]])  # S = 7, the first padded
labels = torch.tensor([[21, 34, 55, 2, 0], [17, 28, 39, 61, 2]])  # T = 5
decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)  # [<s>, y_1, …, y_{T−1}]
print(f"labels[0] = {labels[0].tolist()} → decoder_input_ids[0] = {decoder_input_ids[0].tolist()} (shifted right)")

trace = []  # (name, output shape) in the order the modules finish
for name in STEPS:  # an output is a tensor, a tuple (output first) or a model output (last_hidden_state)
    model.get_submodule(name).register_forward_hook(lambda module, inputs, out, name=name: trace.append((name, tuple(
        (out[0] if isinstance(out, tuple) else getattr(out, "last_hidden_state", out)).shape))))
with torch.no_grad():
    logits = model(input_ids=input_ids, attention_mask=(input_ids != config.pad_token_id).long(),
                   decoder_input_ids=decoder_input_ids).logits
print("\nstep by step (B = 2, S = 7 source positions, T = 5 target positions):")
for name, shape in trace:
    print(f"  {str(shape):>13}  {STEPS[name]:<66} [{name}]")
print(f"  {str(tuple(logits.shape)):>13}  logits (B, T, vocabulary): a next-token distribution per target position")
shapes = dict(trace)
assert shapes["model.encoder"] == (2, 7, config.d_model) and shapes[D + "cross_attn"] == (2, 5, config.d_model)
assert shapes[D + "cross_attn.k_proj"] == (2, 7, config.num_heads * config.d_k)

# The picture (Figure 1's layers): boxes bottom-up, each sub-layer followed by Dropout, + its input, LayerNorm.
ADD_NORM = ("Dropout, + input (residual), LayerNorm", "gold")
columns = {2.5: [(f"x: embeddings × √d_model + PE, dropout\n{shapes[E[:-9] + 'embed_tokens']} (B, S, d_model)", "white"),
                 ("multi-head self-attention\nQ = K = V = x, padding mask", "tab:orange"), ADD_NORM,
                 (f"feed-forward (Eq. 2)\ninner {shapes[E + 'feed_forward.linear_1']} (B, S, d_ff)", "tab:green"),
                 ADD_NORM, (f"layer output {shapes[E + 'feed_forward_sublayer']}\n→ layer 2 … N; after N: z", "white")],
           8: [(f"y: target embeddings (shifted right) × √d_model\n+ PE, dropout {shapes[D[:-9] + 'embed_tokens']}",
                "white"), ("masked multi-head self-attention\nQ = K = V = y, causal mask", "tab:orange"), ADD_NORM,
               (f"encoder–decoder attention\nQ from y {shapes[D + 'cross_attn.q_proj']}, K, V from z "
                f"{shapes[D + 'cross_attn.k_proj']}", "tab:orange"), ADD_NORM,
               (f"feed-forward (Eq. 2)\ninner {shapes[D + 'feed_forward.linear_1']} (B, T, d_ff)", "tab:green"), ADD_NORM,
               (f"layer output {shapes[D + 'feed_forward_sublayer']}\n→ layer 2 … N; after N: lm_head → logits", "white")]}
fig, axis = plt.subplots(figsize=(12, 10))
boxes = {}
for x, steps in columns.items():
    boxes[x] = [axis.text(x, 1.7 * y, text, ha="center", va="center", fontsize=8.5, bbox=dict(
        boxstyle="round,pad=0.4", fc=color, ec="0.3", alpha=0.9)) for y, (text, color) in enumerate(steps)]
    for y, box in enumerate(boxes[x][1:], start=1):
        axis.annotate("", xy=(0.5, 0), xycoords=box, xytext=(0.5, 1), textcoords=boxes[x][y - 1],
                      arrowprops=dict(arrowstyle="-|>", color="0.2"))
        if steps[y] is ADD_NORM:  # the residual: the sub-layer's input goes around it to the sum
            side = 1 if x > 5 else 0
            axis.annotate("", xy=(side, 0.5), xycoords=box, xytext=(side, 0.5), textcoords=boxes[x][y - 2],
                          arrowprops=dict(arrowstyle="-|>", color="tab:blue", connectionstyle=f"arc3,rad={1.2 * side - 0.6}"))
axis.annotate("", xy=(0, 0.5), xycoords=boxes[8][3], xytext=(1, 0.5), textcoords=boxes[2.5][-1],
              arrowprops=dict(arrowstyle="-|>", color="tab:red"))
axis.text(5.4, 6.8, "z: keys and values", color="tab:red", fontsize=8, rotation=-33, ha="center")
axis.set(xlim=(-0.5, 11), ylim=(-0.8, 1.7 * 7 + 0.8))
axis.axis("off")
fig.suptitle("Encoder layer (left) and decoder layer (right), post-LN as in §3.1: LayerNorm(x + Dropout(Sublayer(x)))\n"
             f"shapes of this run: B = 2, S = 7, T = 5, d_model = {config.d_model}, d_ff = {config.d_ff}")
save(fig, "06_encoder_decoder_layers.png")

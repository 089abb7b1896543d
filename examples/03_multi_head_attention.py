"""Example 03 — §3.2.2: MultiHead = Concat(head_1, …, head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

On a trained encoder layer: every tensor's shape; "all heads in one Linear, then reshape" equals the paper's h
separate projections; every head's map (shipped model, layer 2: head 4 looks back, heads 1 and 3 ahead).
Code: `model/attention.py`.
"""

import math

import torch
import torch.nn.functional as F

from common import plt, run, save, trained_model

SENTENCE = "Two dogs are playing in the snow."


@torch.no_grad()
def main():
    args, model, tokenizer = trained_model(__doc__, {"layer": (2, "which encoder layer, from 1")},
                                           attn_implementation="eager")
    config, encoder = model.config, model.model.encoder
    if not 1 <= args.layer <= len(encoder.layers):
        raise ValueError(f"--layer must be in [1, {len(encoder.layers)}], got {args.layer}")
    attention = encoder.layers[args.layer - 1].self_attn
    h, d_k, d_v = config.num_heads, config.d_k, config.d_v
    print(f"{config.name_or_path}: d_model = {config.d_model}, h = {h} heads, d_k = d_v = {d_k}  (§3.2.2: 512 / 8 = 64 in base)")

    encoded = tokenizer(SENTENCE, return_tensors="pt")
    words = [token.lstrip("▁") for token in tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])]
    outputs = encoder(**encoded, output_hidden_states=True)
    x = outputs.hidden_states[args.layer - 1]  # this layer's input (B=1, T, d_model)
    module_output, module_weights = attention(x, attention_mask=None)[:2]  # (B, T, d_model), (B, h, T, T)
    B, T = x.shape[:2]

    def project(linear, rows):  # x W_i: head i's rows of the Linear (and of its bias, if any; §3.2.2 has none)
        return F.linear(x, linear.weight[rows], None if linear.bias is None else linear.bias[rows])

    # The paper's view: separate matrices W_i^Q (d_model × d_k), ... for each head i.
    heads, weights = [], []
    for i in range(h):
        rows_k, rows_v = slice(i * d_k, (i + 1) * d_k), slice(i * d_v, (i + 1) * d_v)
        q_i, k_i = project(attention.q_proj, rows_k), project(attention.k_proj, rows_k)
        weights.append(torch.softmax(q_i @ k_i.transpose(-2, -1) / math.sqrt(d_k), dim=-1))  # Eq. (1)
        heads.append(weights[-1] @ project(attention.v_proj, rows_v))
    concat = torch.cat(heads, dim=-1)  # Concat(head_1, …, head_h)
    by_hand = attention.out_proj(concat)  # · W^O
    q = attention.q_proj(x)
    print(f"\nShapes inside the self-attention of encoder layer {args.layer} on {SENTENCE!r} (T = {T} tokens):")
    for name, shape, note in (
            ("x", x.shape, "(B, T, d_model)"), ("x W^Q (all heads at once)", q.shape, "(B, T, h·d_k)"),
            ("split into heads", q.view(B, T, h, d_k).transpose(1, 2).shape, "(B, h, T, d_k)  a reshape: no weights"),
            ("scores Q Kᵀ / √d_k", module_weights.shape, "(B, h, T, T)  one T×T map per head"),
            ("heads' outputs", heads[0].shape, f"(B, T, d_v) each, × {h}"),
            ("Concat(head_1 … head_h)", concat.shape, "(B, T, h·d_v)"), ("· W^O", by_hand.shape, "(B, T, d_model)")):
        print(f"  {name:<26} {str(tuple(shape)):<14} {note}")
    difference = (by_hand - module_output).abs().max().item()
    weight_difference = (torch.stack(weights, dim=1) - module_weights).abs().max().item()
    print(f"\nhead-by-head formula of §3.2.2 vs the module: max difference {difference:.1e} (output), "
          f"{weight_difference:.1e} (weights)")
    assert difference < 1e-4 and weight_difference < 1e-5

    fig, axes = plt.subplots(1, h, figsize=(3.6 * h, 4), squeeze=False)
    for i, axis in enumerate(axes[0]):
        axis.imshow(module_weights[0, i].numpy(), cmap="Blues", vmin=0, vmax=1)
        axis.set_xticks(range(T), words, rotation=90)
        axis.set_yticks(range(T), words)
        axis.set(title=f"head {i + 1}", xlabel="key (attended to)", ylabel="query" if i == 0 else None)
    fig.suptitle(f"Self-attention weights of the {h} heads of encoder layer {args.layer}, trained model "
                 f"(d_model={config.d_model})")
    save(fig, "03_multi_head_attention.png")


run(main)

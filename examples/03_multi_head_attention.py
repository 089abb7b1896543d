"""Example 03 — §3.2.2 multi-head attention: h heads, each Eq. (1) in its own d_k-sized subspace.

    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,   head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

What this script shows:
1. the shape of every tensor inside `MultiHeadAttention` as one sequence passes through
   self-attention: projection, split into h heads, scores, weights, concatenation, W^O;
2. that the module's "all heads in one Linear, then reshape" is exactly the paper's h separate
   projections W_i^Q, W_i^K, W_i^V: the script slices the Linear weights into per-head matrices,
   runs Eq. (1) head by head, concatenates, multiplies by W^O and compares;
3. the attention maps of all heads (untrained, random weights, fed with token embeddings plus
   positional encodings): each head looks at the sequence differently, which is the point of
   having several ("to jointly attend to information from different representation subspaces").

The weights come from Eq. (1) written out, the module's default (a model passes it the fused
"sdpa" kernel unless `output_attentions=True`; that kernel computes the same output, not the weights).

Code: `modeling_vaswani/model/attention.py` (`MultiHeadAttention`, `scaled_dot_product_attention`).

    python examples/03_multi_head_attention.py
"""

import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from modeling_vaswani import VaswaniConfig
from modeling_vaswani.model.attention import MultiHeadAttention, scaled_dot_product_attention
from modeling_vaswani.model.positional_encoding import sinusoidal_table

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
WORDS = ["<s>", "two", "dogs", "are", "playing", "in", "the", "snow", "."]


def main():
    torch.manual_seed(0)
    config = VaswaniConfig(vocab_size=64, d_model=32, d_ff=64, num_heads=4, num_layers=1)
    h, d_k, d_v, d_model = config.num_heads, config.d_k, config.d_v, config.d_model
    print(f"d_model = {d_model}, h = {h} heads, d_k = d_v = d_model / h = {d_k}  (§3.2.2: 512 / 8 = 64 in base)")
    attention = MultiHeadAttention(config).eval()

    # A "sentence": random token vectors (the same word → the same vector) × √d_model, plus PE (§3.4, §3.5).
    vocabulary = {word: i for i, word in enumerate(dict.fromkeys(WORDS))}
    table = torch.randn(len(vocabulary), d_model) * d_model**-0.5
    ids = torch.tensor([vocabulary[w] for w in WORDS])
    x = (table[ids] * math.sqrt(d_model) + sinusoidal_table(len(WORDS), d_model)).unsqueeze(0)  # (B=1, T, d_model)
    B, T = x.shape[:2]

    print("\nShapes inside MultiHeadAttention (B batch, T positions, h heads):")
    q = attention.q_proj(x)
    print(f"  x                          {tuple(x.shape)}   (B, T, d_model)")
    print(f"  x W^Q (all heads at once)  {tuple(q.shape)}   (B, T, h·d_k)")
    q_heads = attention._split_heads(q, d_k)
    k_heads = attention._split_heads(attention.k_proj(x), d_k)
    v_heads = attention._split_heads(attention.v_proj(x), d_v)
    print(f"  split into heads           {tuple(q_heads.shape)}   (B, h, T, d_k)  a reshape: no weights, no arithmetic")
    scores = q_heads @ k_heads.transpose(-2, -1) / math.sqrt(d_k)
    print(f"  scores Q Kᵀ / √d_k         {tuple(scores.shape)}   (B, h, T, T)  one T×T map per head")
    head_outputs, weights = scaled_dot_product_attention(q_heads, k_heads, v_heads)
    print(f"  heads' outputs             {tuple(head_outputs.shape)}   (B, h, T, d_v)")
    concat = head_outputs.transpose(1, 2).reshape(B, T, h * d_v)
    print(f"  Concat(head_1 … head_h)    {tuple(concat.shape)}   (B, T, h·d_v)")
    print(f"  · W^O                      {tuple(attention.out_proj(concat).shape)}   (B, T, d_model)")

    with torch.no_grad():
        output, module_weights = attention(x)  # Eq. (1) written out (the default): weights come back
        # The paper's view: separate matrices W_i^Q (d_model × d_k), ... for each head i.
        heads = []
        for i in range(h):
            rows_k, rows_v = slice(i * d_k, (i + 1) * d_k), slice(i * d_v, (i + 1) * d_v)
            # The W are matrices: §3.2.2 has no biases (neither has the module, by default).
            q_i = x @ attention.q_proj.weight[rows_k].T  # Q W_i^Q
            k_i = x @ attention.k_proj.weight[rows_k].T  # K W_i^K
            v_i = x @ attention.v_proj.weight[rows_v].T  # V W_i^V
            heads.append(torch.softmax(q_i @ k_i.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ v_i)
        by_hand = attention.out_proj(torch.cat(heads, dim=-1))  # Concat(head_1, …, head_h) W^O
    difference = (by_hand - output).abs().max().item()
    print(f"\nhead-by-head formula of §3.2.2 vs the module: max difference {difference:.1e}")
    assert difference < 1e-5
    print(f"attention weights {tuple(module_weights.shape)}; every row sums to 1: "
          f"{torch.allclose(module_weights.sum(-1), torch.ones(B, h, T))}")
    for i in range(h):
        top = module_weights[0, i].argmax(-1)
        print(f"  head {i + 1}: each word's most-attended word: "
              + ", ".join(f"{WORDS[t]}→{WORDS[j]}" for t, j in enumerate(top.tolist())))

    fig, axes = plt.subplots(1, h, figsize=(4 * h, 4.2))
    for i, axis in enumerate(axes):
        axis.imshow(module_weights[0, i].numpy(), cmap="Blues", vmin=0)
        axis.set_xticks(range(T), WORDS, rotation=90)
        axis.set_yticks(range(T), WORDS)
        axis.set_title(f"head {i + 1}")
        axis.set_xlabel("key (attended to)")
    axes[0].set_ylabel("query")
    fig.suptitle(f"Self-attention weights of {h} heads of a random MultiHeadAttention (d_model={d_model})")
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "03_multi_head_attention.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()

"""Example 11 — encoder–decoder attention of a trained model (§3.2.3), drawn as a word alignment.

A validation sentence is translated (§6.1), then run again on its own translation with `output_attentions`;
each decoder layer's weights, averaged over the heads, line up like an alignment.
"""

import torch

from common import plt, run, save, trained_model, validation_lines


@torch.no_grad()
def main():
    args, model, tokenizer = trained_model(__doc__, {"index": (6, "which Multi30k validation sentence"), "source_lang": (
        "en", "the model's source language")}, attn_implementation="eager")
    sentences = validation_lines(args.source_lang)
    if not 0 <= args.index < len(sentences):
        raise ValueError(f"--index must be in [0, {len(sentences)}), got {args.index}")
    encoded = tokenizer(sentences[args.index], return_tensors="pt")
    generated = model.generate(**encoded)  # the model's own decoding settings (§6.1)
    # Decoder input = [<s>, y_1, …, y_m−1]; row t of the attention belongs to predicting y_t.
    outputs = model(**encoded, decoder_input_ids=generated[:, :-1], output_attentions=True)
    source, target = (tokenizer.convert_ids_to_tokens(ids) for ids in (encoded["input_ids"][0], generated[0, 1:]))
    print(f"source (validation #{args.index}): {sentences[args.index]}\n"
          f"translation: {tokenizer.decode(generated[0], skip_special_tokens=True).strip()}")
    layers = [weights[0].mean(0) for weights in outputs.cross_attentions]  # per layer (B=1, h, T, S) → (T, S)
    print(f"cross-attention: {len(layers)} layers × {outputs.cross_attentions[0].shape[1]} heads, each "
          f"(T={len(target)} output tokens, S={len(source)} source tokens); every row sums to 1")

    columns = min(3, len(layers))  # the paper's N = 6: two rows of three
    rows = -(-len(layers) // columns)
    fig, axes = plt.subplots(rows, columns, squeeze=False,
                             figsize=(0.45 * len(source) * columns + 3, rows * (0.38 * len(target) + 2.5)))
    for axis in axes.flat[len(layers):]:
        axis.axis("off")
    for layer, (axis, weights) in enumerate(zip(axes.flat, layers), start=1):
        axis.imshow(weights.numpy(), cmap="Greys", vmin=0, vmax=1)
        axis.set_xticks(range(len(source)), source, rotation=90, fontsize=8)
        axis.set_yticks(range(len(target)), target, fontsize=8)
        axis.set(title=f"decoder layer {layer}", xlabel="source token (keys)",
                 ylabel="output token (queries)" if (layer - 1) % columns == 0 else None)
    fig.suptitle("Encoder–decoder attention, mean over heads (§3.2.3)")
    save(fig, "11_trained_attention.png")


run(main)

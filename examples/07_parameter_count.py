"""Example 07 — Table 3: where the parameters of the base (65M) and big (213M) models are.

Built on the "meta" device (shapes only) with §5.1's 37,000-token vocabulary and counted by part; for each
Table 3 row with a size, the vocabulary at which our count rounds to the paper's (about 41,100 for the rows
from base, 35,900 for big: no one vocabulary gives both). Code: `model/configuration_vaswani.py`.
"""

import math

import torch

from common import plt, save
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration

VOCAB = 37000  # §5.1: "a shared source-target vocabulary of about 37000 tokens"
# Table 3 rows with a reported size: (label, changes from base (None: big), millions of parameters in the paper)
TABLE_3_ROWS = [("base", {}, 65), ("(B) d_k=16", {"d_k": 16}, 58), ("(B) d_k=32", {"d_k": 32}, 60),
                ("(C) N=2", {"num_layers": 2}, 36), ("(C) N=4", {"num_layers": 4}, 50), ("(C) N=8", {"num_layers": 8}, 80),
                ("(C) d_model=256", {"d_model": 256, "d_k": 32, "d_v": 32}, 28),
                ("(C) d_model=1024", {"d_model": 1024, "d_k": 128, "d_v": 128}, 168),
                ("(C) d_ff=1024", {"d_ff": 1024}, 53), ("(C) d_ff=4096", {"d_ff": 4096}, 90), ("big", None, 213)]


def build_on_meta(preset, **changes):
    with torch.device("meta"):  # shapes only: no memory is allocated, no initialisation is computed
        return VaswaniForConditionalGeneration(VaswaniConfig.from_preset(preset, vocab_size=VOCAB, **changes))


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())  # parameters() lists a shared tensor once


breakdowns = {}
for preset, paper in (("base", 65), ("big", 213)):
    model = build_on_meta(preset)
    config, enc, dec, total = model.config, model.model.encoder.layers, model.model.decoder.layers, count(model)
    parts = breakdowns[preset] = {"embeddings (shared ×3)": count(model.model.shared), **{
        name: sum(count(getattr(layer, kind)) for layer in layers) for name, layers, kind in (
            ("encoder self-attention", enc, "self_attn"), ("encoder FFN", enc, "feed_forward"),
            ("decoder self-attention", dec, "self_attn"), ("decoder enc–dec attention", dec, "cross_attn"),
            ("decoder FFN", dec, "feed_forward"))},
        "LayerNorms": sum(count(m) for m in model.modules() if isinstance(m, torch.nn.LayerNorm))}
    assert model.lm_head.weight is model.model.shared.weight, "§3.4: the projection is the embedding matrix"
    assert sum(parts.values()) == total and not config.attention_bias  # §3.2.2: W^Q, W^K, W^V, W^O have no biases
    print(f"{preset}: N={config.num_layers}, d_model={config.d_model}, d_ff={config.d_ff}, V={VOCAB:,} → {total:,} "
          f"parameters (Table 3: {paper}M; the lm_head is the embedding, §3.4)")

# Which vocabulary would make each row's count round to the paper's? Layers + V·d_model within ±0.5M.
fits = {}
for label, changes, paper in TABLE_3_ROWS:
    model = build_on_meta("big") if changes is None else build_on_meta("base", **changes)
    total, d_model = count(model), model.config.d_model
    layers = total - VOCAB * d_model
    fits[label] = [math.ceil(((paper - 0.5) * 1e6 - layers) / d_model), math.floor(((paper + 0.5) * 1e6 - layers) / d_model)]
from_base = [fits[label] for label, changes, _ in TABLE_3_ROWS if changes is not None]
shared_fit = [max(low for low, _ in from_base), min(high for _, high in from_base)]
print(f"\nEvery Table 3 row derived from base rounds to the paper's size with one shared embedding of "
      f"{shared_fit[0]:,}–{shared_fit[1]:,} rows\n(more than the {VOCAB:,} here); big only with {fits['big'][0]:,}–"
      f"{fits['big'][1]:,}: no one vocabulary gives 65M and 213M.")

fig, axes = plt.subplots(1, 2, figsize=(15, 5), gridspec_kw={"width_ratios": [1, 2]})
bottoms = [0.0, 0.0]
for name in breakdowns["base"]:
    values = [breakdowns[p][name] / 1e6 for p in ("base", "big")]
    axes[0].bar(["base", "big"], values, bottom=bottoms, label=name)
    bottoms = [b + v for b, v in zip(bottoms, values)]
axes[0].scatter(["base", "big"], [65, 213], color="black", marker="_", s=900, zorder=3, label="Table 3")
axes[0].set(ylabel="parameters (millions)", title=f"by component (V = {VOCAB:,})")
axes[0].legend(fontsize=8, markerscale=0.3)
for position, (label, (low, high)) in enumerate(fits.items()):
    axes[1].plot([position, position], [low, high], color="tab:red" if label == "big" else "tab:blue", lw=6)
axes[1].axhspan(*shared_fit, color="tab:blue", alpha=0.15, label="fits every row derived from base")
axes[1].axhline(VOCAB, color="black", linestyle="--", label=f"§5.1: about {VOCAB:,}")
axes[1].set_xticks(range(len(fits)), list(fits), rotation=35, ha="right")
axes[1].set(ylabel="vocabulary size V", title="V at which our count rounds to the paper's (one shared embedding)")
axes[1].legend()
save(fig, "07_parameter_count.png")

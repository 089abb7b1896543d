"""Drawing an `Analysis`: HTML (every piece of text escaped, so typed HTML shows as text) and
matplotlib figures. Nothing here runs the model."""

from html import escape

import matplotlib

matplotlib.use("Agg")  # drawn into images on a server, never a window
import matplotlib.pyplot as plt  # noqa: E402

from ..model.beam_search import gnmt_length_penalty  # noqa: E402

# What each search is, in words, and the length penalty lp(|Y|) it divides log P by.
SEARCH_NAMES = {"gnmt": "§6.1: GNMT's lp = ((5 + |Y|) / 6)^α, the paper's stopping rule",
                "transformers": "transformers: |Y|^α, stop once k hypotheses finished"}
PENALTIES = {"gnmt": gnmt_length_penalty, "transformers": lambda length, alpha: length ** alpha}
ATTENTION_NAMES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention (masked)",
                   "cross": "encoder–decoder attention"}


def pieces_html(pieces) -> str:
    return " ".join(f"<code>{escape(piece)}</code>" for piece in pieces)


def message_html(text: str, kind: str = "error") -> str:
    return f'<p class="explorer-{kind}">{escape(text)}</p>'


def attention_matrix(analysis, kind: str, layer: int, head):
    """(queries, keys) weights of `kind`, layer `layer` (from 1), head `head` (from 1) or "average"."""
    weights = analysis.attentions[kind][layer - 1]  # (heads, queries, keys)
    return weights.mean(dim=0) if head == "average" else weights[int(head) - 1]


def axis_labels(analysis, kind: str):
    """(row labels, column labels) of an attention matrix of `kind`."""
    source, target = analysis.source_pieces, analysis.target_pieces
    return (source if kind == "encoder" else target), (target if kind == "decoder" else source)


def heatmap(matrix, rows, columns, title: str, colour_map="viridis", value_range=(0.0, 1.0)):
    size = (max(4.0, 0.45 * len(columns) + 2), max(3.0, 0.4 * len(rows) + 1.5))
    figure, axes = plt.subplots(figsize=size, layout="constrained")
    image = axes.imshow(matrix, cmap=colour_map, vmin=value_range[0], vmax=value_range[1], aspect="auto")
    axes.set_xticks(range(len(columns)), columns, rotation=90)
    axes.set_yticks(range(len(rows)), rows)
    axes.set_title(title, fontsize=10)
    figure.colorbar(image, ax=axes, shrink=0.8)
    plt.close(figure)  # the page keeps the figure; pyplot need not
    return figure


def attention_figure(analysis, kind: str, layer: int, head):
    rows, columns = axis_labels(analysis, kind)
    head_name = "average of the heads" if head == "average" else f"head {head}"
    return heatmap(attention_matrix(analysis, kind, layer, head).numpy(), rows, columns,
                   f"{ATTENTION_NAMES[kind]}, layer {layer}, {head_name}")


def positional_figure(analysis):
    encoding = analysis.positional.numpy()
    figure = heatmap(encoding, analysis.source_pieces, [], f"PE of the {len(encoding)} input positions "
                     f"(d_model = {encoding.shape[1]})", colour_map="RdBu", value_range=(-1.0, 1.0))
    figure.axes[0].set_xlabel("dimension (even: sin, odd: cos)")
    return figure


def mask_figure(analysis, kind: str):
    rows, columns = axis_labels(analysis, kind)
    return heatmap(analysis.masks[kind].float().numpy(), rows, columns,
                   f"{ATTENTION_NAMES[kind]}: may attend (1) or −∞ (0)", colour_map="Greys")


def _hypotheses_html(hypotheses, decode, score, chosen=False) -> str:
    mark = ' class="explorer-chosen"'
    rows = [f"<li{mark if chosen and i == 0 else ''}>{escape(decode(tokens))} <small>log P {log_prob:.3f}, score "
            f"{score(log_prob, len(tokens)):.3f}</small></li>" for i, (tokens, log_prob, _) in enumerate(hypotheses)]
    return f"<ol>{''.join(rows)}</ol>" if rows else "—"


def beam_html(analysis, search: str, decode) -> str:
    """§6.1's beam search step by step: live and finished hypotheses, the bound, where it stopped. Scores are
    log P / lp(|Y|) with `search`'s penalty: under transformers' the table shows how |Y|^α would rank the same
    hypotheses (transformers' own search, whose translation the summary names, keeps no trace)."""
    def score(log_prob, length):
        return log_prob / PENALTIES[search](length, analysis.alpha)

    chosen, other = analysis.translations[search], analysis.translations[_other(search)]
    summary = (f"<p><b>{escape(SEARCH_NAMES[search])}</b> returns “{escape(chosen)}”; "
               + ("the other search returns the same." if chosen == other else
                  f"the other ({escape(SEARCH_NAMES[_other(search)])}) returns “{escape(other)}”.") + "</p>")
    body, stopped = [], False
    for step in analysis.trace:
        finished = sorted(step["finished"][0], key=lambda h: -score(h[1], len(h[0])))
        done = step["done"][0] and not stopped
        stopped = stopped or step["done"][0]
        state = "<b>stopped here</b>" if done else ("done" if stopped else "searching")
        body.append(f"<tr{' class=explorer-stop' if done else ''}><td>{step['step']}</td>"
                    f"<td>{_hypotheses_html(step['alive'][0], decode, score)}</td>"
                    f"<td>{_hypotheses_html(finished, decode, score, chosen=done)}</td>"
                    f"<td>{step['bound'][0]:.3f}</td><td>{state}</td></tr>")
    header = ("<tr><th>step</th><th>live hypotheses</th><th>finished</th>"
              "<th>bound: best live log P / lp(max length)</th><th></th></tr>")
    return f'{summary}<table class="explorer-beam">{header}{"".join(body)}</table>'


def _other(search: str) -> str:
    return next(name for name in SEARCH_NAMES if name != search)

"""The explorer's page (Gradio Blocks): one sentence in, every panel drawn from `analyse`'s numbers. The model
runs once per sentence; the switches redraw from the stored analysis; bad input gets its message on the page."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # the page runs offline: no usage reports
import gradio as gr  # noqa: E402

from .analysis import MAX_CHARACTERS, InputRejected, analyse  # noqa: E402
from .views import (ATTENTION_NAMES, SEARCH_NAMES, attention_figure, beam_html, mask_figure, message_html,  # noqa: E402
                    pieces_html, positional_figure)

EXAMPLE = "Two young children are playing soccer in the park."
# Multi30k validation sentences; on the last two the length penalties choose different translations.
EXAMPLES = [EXAMPLE, "A three man band is performing on stage.", "Three children watch a man on stage playing guitar."]


def build_app(model, tokenizer, title: str = "Transformer explorer") -> gr.Blocks:
    config = model.config
    layers = {"encoder": config.num_layers, "decoder": config.num_decoder_layers, "cross": config.num_decoder_layers}
    heads = ["average", *map(str, range(1, config.num_heads + 1))]

    def decode(tokens):
        return tokenizer.decode(tokens, skip_special_tokens=True)

    def submit(text, kind, layer, head, search, mask_kind):
        try:
            analysis = analyse(model, tokenizer, text)
        except InputRejected as error:
            return (None, message_html(str(error)), "", "", "", None, None, None)
        note = (message_html("Not in the vocabulary (read as <unk>): " + " ".join(analysis.unknown), "warning")
                if analysis.unknown else "")
        return (analysis, note, pieces_html(analysis.source_pieces), analysis.translations["gnmt"],
                *redraw(analysis, kind, layer, head, search, mask_kind))

    def redraw(analysis, kind, layer, head, search, mask_kind):
        if analysis is None:
            return "", None, None, None
        layer = min(int(layer), layers[kind])
        return (beam_html(analysis, search, decode), attention_figure(analysis, kind, layer, head),
                positional_figure(analysis), mask_figure(analysis, mask_kind))

    with gr.Blocks(title=title) as page:
        gr.Markdown(f"# {title}\nType an English sentence: the model ({config.num_layers} + "
                    f"{config.num_decoder_layers} layers, d_model = {config.d_model}) translates it, and every "
                    "panel below shows the numbers it computed on the way.")
        analysis = gr.State()
        with gr.Row():
            # No max_length here: a browser would cut a long paste silently; check_text refuses it with a message.
            text = gr.Textbox(label=f"English sentence (at most {MAX_CHARACTERS} characters)", value=EXAMPLE,
                              scale=4, elem_id="sentence")
            button = gr.Button("Translate", variant="primary", scale=1, elem_id="translate")
        gr.Examples(EXAMPLES, inputs=text)
        note = gr.HTML(elem_id="message")
        gr.Markdown("**BPE pieces** — §5.1: byte-pair encoding into a shared source–target vocabulary.")
        pieces = gr.HTML(elem_id="pieces")
        translation = gr.Textbox(label="Translation — §6.1: beam search, beam 4, α = 0.6", interactive=False,
                                 elem_id="translation")

        gr.Markdown("## Attention — Eq. (1): softmax(QKᵀ/√d_k)·V, the weights of §3.2.2's heads")
        with gr.Row():
            kind = gr.Radio([(name, key) for key, name in ATTENTION_NAMES.items()], value="cross",
                            label="attention")
            layer = gr.Dropdown([str(i) for i in range(1, max(layers.values()) + 1)], value=str(layers["cross"]),
                                label="layer")
            head = gr.Dropdown(heads, value="average", label="head")
        attention = gr.Plot(label="weights: rows attend to columns", elem_id="attention")

        gr.Markdown("## Beam search, step by step — §6.1: “beam size of 4 and length penalty α = 0.6 … "
                    "terminate early when possible”")
        search = gr.Radio([(name, key) for key, name in SEARCH_NAMES.items()], value="gnmt",
                          label="length penalty and stopping rule")
        beam = gr.HTML(elem_id="beam")

        gr.Markdown("## Positional encoding — §3.5: PE(pos, 2i) = sin(pos/10000^(2i/d_model)), "
                    "PE(pos, 2i+1) = cos(…)")
        positional = gr.Plot(elem_id="positional")
        gr.Markdown("## Masks — §3.2.3: padding hidden, and in the decoder every later position (set to −∞)")
        mask_kind = gr.Radio([(name, key) for key, name in ATTENTION_NAMES.items()], value="decoder", label="mask")
        masks = gr.Plot(elem_id="masks")

        switches = [kind, layer, head, search, mask_kind]
        drawn = [beam, attention, positional, masks]
        for event in (button.click, text.submit):
            event(submit, [text, *switches], [analysis, note, pieces, translation, *drawn])
        for switch in switches:
            switch.change(redraw, [analysis, *switches], drawn)
    return page

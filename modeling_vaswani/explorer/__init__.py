"""The explorer: a local web page that runs a trained model on one sentence and shows every step.

`inputs` checks what was typed, `analysis` pulls the numbers out of the model (BPE pieces, §6.1's beam
search step by step, Eq. (1)'s attention weights, §3.5's positional encoding, §3.2.3's masks), `views`
draws them (HTML and matplotlib), and `app` lays them out as a Gradio page (the one module that
imports gradio, an optional extra: pip install -e ".[explorer]").
"""

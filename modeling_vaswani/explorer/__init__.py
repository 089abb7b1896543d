"""The explorer: a local web page showing every step of one translation. `analysis` checks the text and
takes the numbers from the model, `views` draws them, `app` is the Gradio page (optional extra)."""

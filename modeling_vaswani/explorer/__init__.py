"""The explorer: a local web page showing every step of one translation. `inputs` checks the text,
`analysis` takes the numbers from the model, `views` draws them, `app` is the Gradio page (optional extra)."""

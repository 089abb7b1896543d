"""The model itself — one module per section of the paper, and exactly the files a checkpoint carries.

`save_pretrained` copies these files, flat, into every saved model folder (they import each other
only as `from .module import name`), so that a folder loads with `trust_remote_code=True` where
this package is not installed. Nothing here imports training, evaluation or publishing code.

Read it in the paper's order: positional_encoding (§3.5), embeddings (§3.4), attention (§3.2),
masking (§3.2.3), feed_forward (§3.3), sublayer, encoder and decoder (§3.1), modeling_vaswani (§3,
Figure 1), label_smoothing (§5.4, the training loss), generation (§6.1 decoding settings);
configuration_vaswani holds Table 3. Hugging Face glue: loading (strict from_pretrained /
save_pretrained), transformers_compat (version differences), pipeline_vaswani (translation pipeline).
"""

"""The model itself — one module per section of the paper, and exactly the files a checkpoint carries.

`save_pretrained` copies these files, flat, into every saved model folder (they import each other
only as `from .module import name`), so that a folder loads with `trust_remote_code=True` where
this package is not installed. Nothing here imports training, evaluation or publishing code
(docs/architecture.md draws the imports from the code).

The order to read these modules in, the paper's, is in README.md ("Read the code in this order").
"""

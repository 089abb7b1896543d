"""The model itself: one module per section of the paper, and exactly the files a checkpoint carries.

`save_pretrained` copies these files, flat, into every saved folder (they import each other only as
`from .module import name`), so that it loads with `trust_remote_code=True` where this package is not
installed. The order to read them in, the paper's, is in README.md; the imports in docs/architecture.md.
"""

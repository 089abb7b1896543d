"""custom_generate/generate.py of a saved model folder: transformers makes `generate` below the model's
`generate` when the folder is loaded with trust_remote_code=True (GenerationMixin.load_custom_generate).

§6.1's search is the folder's beam_search.py, imported by the model's code. transformers 5.24 cannot
import it here: it resolves relative imports inside custom_generate/ only (`from ..beam_search import`
makes it look for custom_generate/.beam_search.py, and from_pretrained then silently drops this
file), and it loads a local folder's generate.py into another module package than the model's code.
So this file reaches the search through the model it is given: the model's own `generate`.
"""


def generate(*args, model, **kwargs):
    if not getattr(type(model), "chooses_beam_search", False):
        raise TypeError(f"This custom_generate decodes the folder's own model class, not {type(model).__name__}; "
                        "load the model from the folder with trust_remote_code=True.")
    return type(model).generate(model, *args, **kwargs)

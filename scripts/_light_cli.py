"""modeling_vaswani.cli and .outputs loaded by file, without the package's __init__ (which imports torch): a
script run as `python scripts/<name>.py` finds this file first on sys.path, so --help answers at once."""

import importlib.util
import sys
from pathlib import Path


def load_light(name: str):
    """The package's module `name` without any package `__init__`: it may import only the standard library
    and modules already loaded this way (registered under their own names)."""
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("modeling_vaswani")  # finds the package; does not import it
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("modeling_vaswani is not installed; install it with pip install -e . "
                                  "in the repository", name="modeling_vaswani")
    root = Path(list(package.submodule_search_locations)[0])
    spec = importlib.util.spec_from_file_location(name, root.joinpath(*name.split(".")[1:]).with_suffix(".py"))
    sys.modules[name] = module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


cli = load_light("modeling_vaswani.cli")
outputs = load_light("modeling_vaswani.outputs")  # how every script claims and writes its outputs

"""The scripts' command-line plumbing, modeling_vaswani/cli.py, loaded without the package.

`import modeling_vaswani` registers the model with transformers' Auto classes, so it imports
transformers and torch: many seconds before anything else can happen. cli.py imports only the
standard library, so a script loads it alone, parses its arguments (--help and a wrong flag answer
at once) and checks what it can, and imports the package only for the work. The module is
registered under its own name, modeling_vaswani.cli, so the package, once imported, uses this same
module.

Other modules of the package written the same way (standard library only at import, such as
training/recipe/flags.py) load through `load_light` too, each under its own name; a module that
imports such a sibling is loaded after it, so the sibling is found in sys.modules and no package
`__init__` runs.

A script imports this file when it runs as `python scripts/<name>.py` (scripts/ is then first on
sys.path); run in-process by another program, it imports `modeling_vaswani.cli` as usual.
"""

import importlib.util
import sys
from pathlib import Path

def load_light(name: str):
    """The package's module `name` (say "modeling_vaswani.cli"), loaded from the installed package's
    folder without running any package `__init__`; the module itself must import only the standard
    library and modules already loaded this way."""
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("modeling_vaswani")  # finds the package; does not import it
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("modeling_vaswani is not installed; install it with pip install -e . "
                                  "in the repository", name="modeling_vaswani")
    root = Path(list(package.submodule_search_locations)[0])
    spec = importlib.util.spec_from_file_location(name, root.joinpath(*name.split(".")[1:]).with_suffix(".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


cli = load_light("modeling_vaswani.cli")
outputs = load_light("modeling_vaswani.outputs")  # how every script claims and writes its outputs

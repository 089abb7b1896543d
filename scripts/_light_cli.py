"""The scripts' command-line plumbing, modeling_vaswani/cli.py, loaded without the package.

`import modeling_vaswani` registers the model with transformers' Auto classes, so it imports
transformers and torch: many seconds before anything else can happen. cli.py imports only the
standard library, so a script loads it alone, parses its arguments (--help and a wrong flag answer
at once) and checks what it can, and imports the package only for the work. The module is
registered under its own name, modeling_vaswani.cli, so the package, once imported, uses this same
module.

A script imports this file when it runs as `python scripts/<name>.py` (scripts/ is then first on
sys.path); run in-process by another program, it imports `modeling_vaswani.cli` as usual.
"""

import importlib.util
import sys
from pathlib import Path

NAME = "modeling_vaswani.cli"


def load_cli():
    """modeling_vaswani.cli, loaded from the installed package's folder without running its __init__."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    package = importlib.util.find_spec("modeling_vaswani")  # finds the package; does not import it
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("modeling_vaswani is not installed; install it with pip install -e . "
                                  "in the repository", name="modeling_vaswani")
    spec = importlib.util.spec_from_file_location(NAME, Path(list(package.submodule_search_locations)[0]) / "cli.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    return module


cli = load_cli()

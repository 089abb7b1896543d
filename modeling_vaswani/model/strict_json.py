"""The one reader of every JSON file the package reads: a model folder, a run folder or a results file may
come from anyone. `read_json` refuses, in one line naming the file (and the key), what `json.loads` would let
through or crash on: a file too large, nesting too deep, NaN / Infinity, a top level of the wrong type.
"""

import json
import math
import os
from pathlib import Path

MAX_BYTES = 64 * 2**20  # the largest file we write is a trainer_state.json of a few MB
MAX_DEPTH = 32  # ours nest at most 5 deep


class JSONFileError(ValueError):
    """A JSON file that is malformed, too large or too deep, or holds a non-finite number."""


def read_json(path: str | os.PathLike, expected: type = dict):
    """The value of the JSON file `path`, checked as above, of type `expected`; a missing file is an OSError."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise JSONFileError(f"{path}: {size} bytes, more than the {MAX_BYTES} a JSON file of ours can hold.")
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise JSONFileError(f"{path} is not valid JSON ({' '.join(str(error).split())}).") from None
    except RecursionError:
        raise JSONFileError(f"{path}: nested more than {MAX_DEPTH} levels deep.") from None
    check_json_value(value, str(path))
    if not isinstance(value, expected):
        raise JSONFileError(f"{path} must hold a JSON {_NAMES.get(expected, expected.__name__)}, "
                            f"not {_NAMES.get(type(value), type(value).__name__)}.")
    return value


def check_json_value(value, where: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH and non-finite numbers, naming the key (`log_history[3].loss`)."""
    stack = [(value, "", 0)]
    while stack:
        item, key, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise JSONFileError(f"{where}: nested more than {MAX_DEPTH} levels deep (at {key or 'the top'}).")
        if isinstance(item, float) and not math.isfinite(item):
            raise JSONFileError(f"{where}: {key or 'the value'} is {item}; only finite numbers are accepted.")
        if isinstance(item, dict):
            stack += [(child, f"{key}.{name}" if key else str(name), depth + 1) for name, child in item.items()]
        elif isinstance(item, list):
            stack += [(child, f"{key}[{index}]", depth + 1) for index, child in enumerate(item)]


_NAMES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean",
          type(None): "null"}

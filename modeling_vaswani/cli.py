"""Shared plumbing for the command-line scripts (not from the paper).

A user's mistake — a wrong flag value, a missing file, a bad language code — should end the
program with one line that says what was wrong, not a traceback. `run_main` does that for the
errors this package raises on bad input; anything else is a bug and keeps its traceback.
"""

import argparse
import sys
from typing import Callable

from .training.checkpoint_averaging import CheckpointMismatchError
from .training.data import DataError

# OSError covers missing or unreadable files and folders, permissions and full disks: all fixed
# by the user, not in the code.
USER_ERRORS = (ValueError, OSError, DataError, CheckpointMismatchError)


class OneLineErrors:
    """Mixin for argument parsers: a bad flag is reported as one `error: ...` line, without the usage block."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


class ArgumentParser(OneLineErrors, argparse.ArgumentParser):
    """`argparse.ArgumentParser` with one-line errors."""


def run_main(main: Callable[[], object]) -> None:
    try:
        main()
    except USER_ERRORS as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)

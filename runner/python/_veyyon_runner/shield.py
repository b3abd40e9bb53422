"""The standard modules the runner loads on first use, found where they were at start, never in a cell's directory.

The runner imports its introspection, the snapshot's code, restore, the magics and tracebacks
only when first used, to start sooner. By then ``init`` has put the cell's directory at the
front of ``sys.path``, where a user's ``inspect.py`` or ``pickle.py`` would stand in for the
standard module. ``install`` puts a finder just before the path-based finder on
``sys.meta_path`` that looks ``NAMES``, and only them, up in ``sys.path`` as it was at start.
They are the modules the runner's start loaded before any cell ran, so no cell could shadow
them then either, and the ``pickle`` and ``hashlib`` that snapshots and restores import when
they run (a cell's directory could shadow those before). Every other name, and every
submodule (found through its package's ``__path__``), passes through; built-in and frozen
modules are found ahead of it as before; a name missing from the start-up path passes
through too, as one missing at start did.
"""

import os
import sys
from importlib.machinery import PathFinder

# Top-level modules that the runner's start loaded before they were deferred, or that its deferred code (introspection,
# magics, tracebacks, snapshot and restore, the latter's pickle and hashlib included) loads, on CPython 3.8-3.13 run
# with -S (site loads more, so needs fewer); test_shield checks the interpreter running the tests needs no other.
NAMES = frozenset((
    "_blake2", "_colorize", "_compat_pickle", "_hashlib", "_heapq", "_opcode", "_opcode_metadata", "_pickle",
    "_sha3", "_struct", "_tokenize", "_typing", "array", "ast", "atexit", "base64", "binascii", "contextlib", "dis",
    "gc", "hashlib", "heapq", "inspect", "opcode", "pickle", "pkgutil", "queue", "readline", "rlcompleter",
    "signal", "struct", "textwrap", "token", "tokenize", "traceback", "typing", "weakref",
))


class BootPathFinder:
    """Finds the top-level modules in names on path (sys.path at start, relative entries made absolute), and nothing else."""

    def __init__(self, path, names):
        self.path = [os.path.abspath(entry) if isinstance(entry, str) else entry for entry in path]
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        """The spec of fullname on the start-up path when it is one of names, else None."""
        if path is not None or fullname not in self.names:
            return None
        return PathFinder.find_spec(fullname, self.path)


def install(path, names=NAMES):
    """Put a BootPathFinder over path just before the path-based finder on sys.meta_path; returns it."""
    finder = BootPathFinder(path, names)
    meta_path = sys.meta_path
    index = next((i for i, entry in enumerate(meta_path) if entry is PathFinder), len(meta_path))
    meta_path.insert(index, finder)
    return finder

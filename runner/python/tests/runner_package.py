"""Loads the runner package for tests: one view over all its modules, optionally a fresh copy."""

import glob
import importlib
import importlib.util
import itertools
import os
import shutil
import sys

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "_veyyon_runner"
PACKAGE_DIR = os.path.join(SOURCE_DIR, PACKAGE)
MODULES = ("state", "protocol", "output", "display", "bridge", "transform", "execution", "magics", "introspect",
           "server", "egress", "definitions", "snapshot", "restore")
SOURCE_FILES = sorted(glob.glob(os.path.join(PACKAGE_DIR, "*.py"))) + [os.path.join(SOURCE_DIR, "runner.py")]
_copies = itertools.count()


class RunnerView:
    """Attribute reads find a name in the first module defining it; writes go to every module holding it
    (a name one module imports from another is a copy, so both must change)."""

    def __init__(self, modules):
        object.__setattr__(self, "_modules", modules)

    def __getattr__(self, name):
        for module in self._modules.values():
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        holders = [module for module in self._modules.values() if hasattr(module, name)]
        if not holders:
            raise AttributeError("no runner module has %s" % name)
        for module in holders:
            setattr(module, name, value)

    def module(self, name):
        """One module of the package."""
        return self._modules[name]


def load(fresh=False):
    """The package under its own name (shared), or with fresh=True a new copy under a new name."""
    name = "veyyon_runner_copy_%d" % next(_copies) if fresh else PACKAGE
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(PACKAGE_DIR, "__init__.py"),
                                                      submodule_search_locations=[PACKAGE_DIR])
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    return RunnerView({part: importlib.import_module("%s.%s" % (name, part)) for part in MODULES})


def copy_runner(into):
    """boot.py, runner.py, prelude.py and the package's modules copied into the private directory into, as the
    host's runner cache holds them (the package's directory made 0700); returns the copy's boot.py."""
    for name in ("boot.py", "runner.py", "prelude.py"):
        shutil.copyfile(os.path.join(SOURCE_DIR, name), os.path.join(into, name))
    os.mkdir(os.path.join(into, PACKAGE), 0o700)
    for name in os.listdir(PACKAGE_DIR):
        if name.endswith(".py"):
            shutil.copyfile(os.path.join(PACKAGE_DIR, name), os.path.join(into, PACKAGE, name))
    return os.path.join(into, "boot.py")

"""veyyon runner boot: serves the runner package beside this file from cached code objects.

Standard library only, Python 3.8+. Spawned as ``python3 -u boot.py`` from the host's cache
directory. The runner is the package ``_veyyon_runner/`` beside this file; boot puts a finder
first on ``sys.meta_path`` that serves that package name, and only it, from this directory, so
no file of the same name elsewhere on ``sys.path`` (a cell's directory) can shadow a module of
it. Each module's compiled code is kept beside its source as
``_veyyon_runner/<module>.<cache_tag>.pyc``. A cache file holds the magic number, the optimize
level, the source's path and its full text, then the marshalled code; anything else (another
interpreter, an edited module, a moved directory, a torn file) recompiles and rewrites it
through a temp file (created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600) and ``os.replace``.
Write failures (a read-only directory) only cost the cache. The runner's server gets ``load``
as ``_boot_load`` to cache the prelude's code the same way (``prelude.<cache_tag>.pyc``).
``python3 boot.py --warm`` only compiles every module of the package into its cache entry and
exits, running none: the runner loads some of them only when first used, after the host may
have made this directory read-only.

Nothing is loaded unless this directory and the package directory are private: owned by the
running user, not symbolic links, not writable by group or others (the host creates them that
way). Otherwise boot exits with a message naming the directory and what is wrong.
"""

import sys

if sys.version_info < (3, 8):
    sys.exit("veyyon runner: Python 3.8 or newer is required, this is %d.%d" % sys.version_info[:2])

import marshal
import os
import stat

try:
    from importlib._bootstrap_external import MAGIC_NUMBER
except ImportError:
    from importlib.util import MAGIC_NUMBER

from importlib.machinery import ModuleSpec

_DIR = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "_veyyon_runner"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def dir_problem(path):
    """Why path is not a private directory of the running user, or None (always None without uids)."""
    if not hasattr(os, "geteuid"):
        return None
    try:
        st = os.lstat(path)
    except OSError as exc:
        return "it cannot be examined (%s)" % exc
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return "it is owned by uid %d, not by the running user (uid %d)" % (st.st_uid, os.geteuid())
    if st.st_mode & 0o022:
        return "it is writable by group or others (mode %04o)" % stat.S_IMODE(st.st_mode)
    return None


def _read(path):
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def load(name, key, build):
    """build()'s code object, cached in <dir>/<name>.<cache_tag>.pyc under the interpreter's magic and key (bytes)."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return build()
    path = os.path.join(_DIR, "%s.%s.pyc" % (name, tag))
    header = MAGIC_NUMBER + b"%d\0%d\0" % (sys.flags.optimize, len(key)) + key
    try:
        data = _read(path)
        if data.startswith(header):
            return marshal.loads(data[len(header):])
    except Exception:
        pass
    code = build()
    temp = "%s.%d-%s.tmp" % (path, os.getpid(), os.urandom(6).hex())
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except OSError:
        return code
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(header + marshal.dumps(code))
        os.replace(temp, path)
    except BaseException as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if not isinstance(exc, OSError):
            raise
    return code


class _CachedSource:
    """Loader of one module of the package: its source file, run from the cached code."""

    def __init__(self, name, filename):
        self.name = name
        self.filename = filename

    def create_module(self, spec):
        return None

    def code(self):
        """The module's code object, from its cache entry or compiled (and cached)."""
        filename = self.filename
        source = _read(filename)
        return load(self.name, filename.encode("utf-8", "surrogateescape") + b"\0" + source,
                    lambda: compile(source, filename, "exec", dont_inherit=True))

    def exec_module(self, module):
        exec(self.code(), module.__dict__)


def _module_source(part):
    """The loader of the package's module part (``__init__`` for the package), under its cache entry's name."""
    return _CachedSource("%s/%s" % (PACKAGE, part), os.path.join(_DIR, PACKAGE, part + ".py"))


class PackageFinder:
    """Finds PACKAGE and its modules in this directory only; nothing else."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname == PACKAGE:
            part = "__init__"
        elif fullname.startswith(PACKAGE + ".") and "." not in fullname[len(PACKAGE) + 1:]:
            part = fullname[len(PACKAGE) + 1:]
        else:
            return None
        source = _module_source(part)
        filename = source.filename
        if not os.path.isfile(filename):
            raise ModuleNotFoundError("No module named %r" % fullname, name=fullname)
        spec = ModuleSpec(fullname, source, origin=filename, is_package=part == "__init__")
        if part == "__init__":
            spec.submodule_search_locations = [os.path.join(_DIR, PACKAGE)]
        spec.has_location = True
        spec.cached = os.path.join(_DIR, "%s.%s.pyc" % (source.name, sys.implementation.cache_tag))
        return spec


def warm():
    """Compile every module of the package into its cache entry without running any (the runner loads some late)."""
    for name in sorted(os.listdir(os.path.join(_DIR, PACKAGE))):
        if name.endswith(".py"):
            _module_source(name[:-3]).code()


def main():
    """Serve the protocol: the package's server from its cached code, as runner.py would (``--warm``: only cache it)."""
    for path in (_DIR, os.path.join(_DIR, PACKAGE)):
        problem = dir_problem(path)
        if problem is not None:
            sys.exit("veyyon runner: refusing to load code from %s: %s" % (path, problem))
    if sys.argv[1:] == ["--warm"]:
        warm()
        return
    sys.meta_path.insert(0, PackageFinder)
    sys.argv[0] = os.path.join(_DIR, "runner.py")
    __import__(PACKAGE + ".server")
    server = sys.modules[PACKAGE + ".server"]
    server._boot_load = load
    server.main()


if __name__ == "__main__":
    main()

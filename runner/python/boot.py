"""veyyon runner boot: runs runner.py beside this file as ``__main__`` from a cached code object.

Standard library only, Python 3.8+. Spawned as ``python3 -u boot.py`` from the host's cache
directory. A script is compiled from source at every start (and PYTHONDONTWRITEBYTECODE
is beside the point: ``__main__`` is never cached), so this keeps the compiled runner in
``runner.<cache_tag>.pyc`` beside it. A cache file holds the magic number, the optimize
level, the source's path and its full text, then the marshalled code; anything else
(another interpreter, an edited runner, a moved directory, a torn file) recompiles and
rewrites it through a temp file (created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600) and
``os.replace``. Write failures (a read-only directory) only cost the cache. The runner gets
``load`` as ``__veyyon_boot_load__`` to cache the prelude's code the same way.

Nothing is loaded unless this directory is private: owned by the running user, not a
symbolic link, not writable by group or others (the host creates it that way). Otherwise
boot exits with a message naming the directory and what is wrong.
"""

import marshal
import os
import stat
import sys

try:
    from importlib._bootstrap_external import MAGIC_NUMBER
except ImportError:
    from importlib.util import MAGIC_NUMBER

_DIR = os.path.dirname(os.path.abspath(__file__))
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


def main():
    """Run runner.py's (cached) code as module __main__, as if it had been started directly."""
    problem = dir_problem(_DIR)
    if problem is not None:
        sys.exit("veyyon runner: refusing to load code from %s: %s" % (_DIR, problem))
    path = os.path.join(_DIR, "runner.py")
    source = _read(path)
    code = load("runner", path.encode("utf-8", "surrogateescape") + b"\0" + source,
                lambda: compile(source, path, "exec", dont_inherit=True))
    module = type(sys)("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__
    module.__veyyon_boot_load__ = load
    sys.modules["__main__"] = module
    sys.argv[0] = path
    exec(code, module.__dict__)


if __name__ == "__main__":
    main()

"""The line and cell magics, the shell helpers behind !cmd, and the extension shim."""

import ast
import builtins
import codecs
import io
import linecache
import os
import re
import signal
import sys
import time

from .state import _state
from .output import CapturedIO, CapturedOutput, _Capture
from .display import _PRETTY_TYPES, _figure_formats, display, emit_status, mime_bundle, pretty
from .transform import transform
from .execution import _BASE_NAMES, _CO_NEWLOCALS, _NO_VALUE, _execute


class UsageError(Exception):
    """A magic was called with arguments it cannot use."""


class _MagicContext:
    def __init__(self, frame):
        self.frame = frame
        self.globals = frame.f_globals
        self.filename = frame.f_code.co_filename
        self.lineno = frame.f_lineno

    @property
    def locals(self):
        return self.frame.f_locals


_LINE_MAGICS = {}
_CELL_MAGICS = {}


def register_line_magic(name, fn):
    """Make %name call fn(args: str); its return value is the magic's value."""
    _LINE_MAGICS[name] = lambda args, ctx: fn(args)


def register_cell_magic(name, fn):
    """Make %%name call fn(line: str, body: str); its return value is the cell's value."""
    _CELL_MAGICS[name] = lambda line, body, ctx: fn(line, body)


def line_magic(name, args=""):
    """Run the line magic %name for the calling frame (what the transformer emits)."""
    handler = _LINE_MAGICS.get(name)
    if handler is None:
        raise NameError("UsageError: Line magic function `%%%s` not found." % name)
    return handler(args, _MagicContext(sys._getframe(1)))


def cell_magic(name, line, body):
    """Run the cell magic %%name for the calling frame (what the transformer emits)."""
    handler = _CELL_MAGICS.get(name)
    if handler is None:
        raise NameError("UsageError: Cell magic `%%%%%s` not found." % name)
    return handler(line, body, _MagicContext(sys._getframe(1)))


def misplaced_cell_magic(name):
    """Raise the error for a %%name that is not on the first line of its cell."""
    raise UsageError("Cell magic `%%%%%s` must be on the first line of the cell." % name)


def expand(parts):
    """Join literal parts and evaluated fields; a field that fails to evaluate stays as written."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        fn, raw, conversion, spec = part
        try:
            value = fn()
            if conversion == "r":
                value = repr(value)
            elif conversion == "a":
                value = ascii(value)
            elif conversion == "s":
                value = str(value)
            out.append(format(value, spec))
        except Exception:
            out.append(raw)
    return "".join(out)


def _split_args(args):
    import shlex

    try:
        return shlex.split(args)
    except ValueError as exc:
        raise UsageError("cannot parse arguments %r: %s" % (args, exc))


def _single_path(args):
    import shlex

    try:
        parts = shlex.split(args)
    except ValueError:
        return args.strip()
    if len(parts) == 1:
        return parts[0]
    return args.strip() if parts else ""


class SList(list):
    """Lines of command output with IPython-style helpers: .n, .s, .l, .p, .grep(), .fields()."""

    @property
    def l(self):
        """The lines as a list (this object)."""
        return self

    @property
    def n(self):
        """The lines joined by newlines."""
        return "\n".join(self)

    @property
    def s(self):
        """The lines joined by spaces."""
        return " ".join(self)

    @property
    def p(self):
        """The lines that name existing paths, as pathlib.Path objects."""
        import pathlib

        return [pathlib.Path(line) for line in self if os.path.exists(line)]

    def grep(self, pattern, prune=False, field=None):
        """Lines matching pattern (a regex or a predicate); prune=True keeps the others instead."""
        if callable(pattern):
            test = pattern
        else:
            test = re.compile(pattern).search

        def subject(line):
            if field is None:
                return line
            fields = line.split()
            return fields[field] if -len(fields) <= field < len(fields) else ""

        return SList(line for line in self if bool(test(subject(line))) != bool(prune))

    def fields(self, *indices):
        """Whitespace-separated fields: all of them per line, or the chosen ones joined by spaces."""
        if not indices:
            return [line.split() for line in self]
        result = SList()
        for line in self:
            words = line.split()
            picked = [words[i] for i in indices if -len(words) <= i < len(words)]
            if picked:
                result.append(" ".join(picked))
        return result


def _shell_argv(command):
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    return [shell, "-c", command]


def _stop_process(proc):
    import subprocess

    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _pump_process(proc, sinks=(None, None)):
    import selectors

    streams = {proc.stdout.fileno(): sinks[0] or sys.stdout, proc.stderr.fileno(): sinks[1] or sys.stderr}
    decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in streams}
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while streams:
            for key, _ in selector.select():
                fd = key.fd
                data = os.read(fd, 65536)
                target = streams[fd]
                text = decoders[fd].decode(data, not data)
                if text:
                    if callable(target):
                        target(text)
                    else:
                        target.write(text)
                        target.flush()
                if not data:
                    selector.unregister(fd)
                    del streams[fd]


def run_process(argv, sinks=(None, None), **popen_kwargs):
    """Run argv with its stdout/stderr streamed live into this cell's output (or to the callables in sinks);
    return the exit status."""
    import subprocess

    sys.stdout.flush()
    sys.stderr.flush()
    popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen_kwargs)
    try:
        _pump_process(proc, sinks)
        return proc.wait()
    except BaseException:
        _stop_process(proc)
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()


def system(command):
    """Run a shell command (what !cmd becomes), streaming its output; sets _exit_code."""
    status = run_process(_shell_argv(command))
    sys._getframe(1).f_globals["_exit_code"] = status


def getoutput(command):
    """Run a shell command and return its output (stderr merged) as an SList; sets _exit_code."""
    lines, status = _shell_output(command)
    sys._getframe(1).f_globals["_exit_code"] = status
    return lines


def _shell_output(command):
    """A shell command's output (stderr merged) as an SList, and its exit status."""
    import subprocess

    sys.stdout.flush()
    proc = subprocess.Popen(_shell_argv(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        data = proc.stdout.read()
        status = proc.wait()
    except BaseException:
        _stop_process(proc)
        raise
    finally:
        proc.stdout.close()
    return SList(data.decode("utf-8", "replace").splitlines()), status


def format_duration(seconds, precision=3):
    """A duration as IPython's timing magics write it: 1.23 s, 45.6 ms, 7.89 µs, 12 ns, or 2min 5s."""
    if seconds >= 60.0:
        parts = []
        left = seconds
        for suffix, length in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
            value = int(left / length)
            if value > 0:
                left = left % length
                parts.append("%d%s" % (value, suffix))
            if left < 1:
                break
        return " ".join(parts)
    import math

    order = min(-int(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0.0 else 3
    return "%.*g %s" % (precision, seconds * (1, 1e3, 1e6, 1e9)[order], ("s", "ms", "\u00b5s", "ns")[order])


def _magic_pwd(args, ctx):
    return os.getcwd()


def _magic_cd(args, ctx):
    target = _single_path(args) or "~"
    if target == "-":
        if _state.previous_dir is None:
            raise UsageError("%cd -: no previous directory")
        target = _state.previous_dir
    previous = os.getcwd()
    os.chdir(os.path.expanduser(target))
    _state.previous_dir = previous
    cwd = os.getcwd()
    print(cwd)
    emit_status("cd", path=cwd)


def _magic_ls(args, ctx):
    return sorted(os.listdir(os.path.expanduser(_single_path(args) or ".")))


def _magic_env(args, ctx):
    args = args.strip()
    if not args:
        return dict(os.environ)
    if "=" in args:
        key, _, value = args.partition("=")
    elif " " in args:
        key, _, value = args.partition(" ")
    else:
        if args not in os.environ:
            raise UsageError("environment variable %s is not set" % args)
        return os.environ[args]
    key, value = key.strip(), value.strip()
    if not key:
        raise UsageError("%env needs a variable name")
    os.environ[key] = value
    print("env: %s=%s" % (key, value))


def _magic_set_env(args, ctx):
    args = args.strip()
    key, _, value = args.partition("=") if "=" in args.split(" ", 1)[0] else args.partition(" ")
    if not key.strip():
        raise UsageError("usage: %set_env KEY VALUE")
    os.environ[key.strip()] = value.strip()
    print("env: %s=%s" % (key.strip(), value.strip()))


def _offset_tree(tree, lineno, col):
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            if getattr(node, "lineno", None) == 1:
                node.col_offset += col
            if getattr(node, "end_lineno", None) == 1 and node.end_col_offset is not None:
                node.end_col_offset += col
    ast.increment_lineno(tree, lineno - 1)


def _compile_fragment(source, ctx, mode):
    """Compile source that sits on ctx's line, so tracebacks point at the magic's line."""
    tree = compile(source, ctx.filename, mode, ast.PyCF_ONLY_AST, dont_inherit=True)
    line = linecache.getline(ctx.filename, ctx.lineno)
    col = line.find(source) if source else -1
    _offset_tree(tree, ctx.lineno, len(line[:col].encode("utf-8")) if col >= 0 else 0)
    return compile(tree, ctx.filename, mode, dont_inherit=True)


# Timing magics: %time, %%time, %timeit, %%timeit print what IPython prints, and send a
# time/timeit status event with the same numbers for hosts that want them structured.


def _magic_time(args, ctx):
    if not args.strip():
        raise UsageError("usage: %time <statement or expression>")
    try:
        code = _compile_fragment(args, ctx, "eval")
    except SyntaxError:
        code = _compile_fragment(args, ctx, "exec")
    return _timed(lambda: eval(code, ctx.globals, ctx.locals))


def _cpu_times():
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime, usage.ru_stime
    except ImportError:
        times = os.times()
        return times.user, times.system


def _timed(run):
    wall_start = time.time()
    cpu_start = _cpu_times()
    value = run()
    cpu_end = _cpu_times()
    wall = time.time() - wall_start
    user, system = cpu_end[0] - cpu_start[0], cpu_end[1] - cpu_start[1]
    print("CPU times: user %s, sys: %s, total: %s" % (
        format_duration(user), format_duration(system), format_duration(user + system)))
    print("Wall time: %s" % format_duration(wall))
    emit_status("time", ms=wall * 1000.0)
    return value


class TimeitResult:
    """What %timeit -o returns, as IPython's: loops, repeat, best, worst, all_runs (s per run), timings (s per loop)."""

    def __init__(self, loops, repeat, best, worst, all_runs, compile_time=0.0, precision=3):
        self.loops = loops
        self.repeat = repeat
        self.best = best
        self.worst = worst
        self.all_runs = all_runs
        self.compile_time = compile_time
        self._precision = precision
        self.timings = [run / loops for run in all_runs]

    @property
    def average(self):
        """Mean seconds per loop."""
        import math

        return math.fsum(self.timings) / len(self.timings)

    @property
    def stdev(self):
        """Standard deviation of the seconds per loop."""
        import math

        mean = self.average
        return (math.fsum([(t - mean) ** 2 for t in self.timings]) / len(self.timings)) ** 0.5

    def __str__(self):
        return "%s \u00b1 %s per loop (mean \u00b1 std. dev. of %d run%s, %s loop%s each)" % (
            format_duration(self.average, self._precision), format_duration(self.stdev, self._precision),
            self.repeat, "" if self.repeat == 1 else "s", format(self.loops, ","), "" if self.loops == 1 else "s")

    def __repr__(self):
        return "<TimeitResult : %s>" % self

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


_TIMEIT_USAGE = "usage: %timeit [-n<N> -r<R> [-t|-c] -q -p<P> -o] statement"


def _parse_timeit_options(args):
    """IPython's %timeit options (n:r:tcp:qo, getopt style) and the statement after them."""
    options = {"number": 0, "repeat": 7, "quiet": False, "result": False, "precision": 3, "timer": time.perf_counter}
    rest = args.strip()
    while rest.startswith("-"):
        match = re.match(r"-([nrp])\s*(\S+)\s*|-([tcqo]+)(?=\s|$)\s*", rest)
        if match is None:
            break
        if match.group(1):
            try:
                value = int(match.group(2))
            except ValueError:
                raise UsageError("invalid literal for int() with base 10: %r (%s)" % (match.group(2), _TIMEIT_USAGE))
            options[{"n": "number", "r": "repeat", "p": "precision"}[match.group(1)]] = value
        else:
            for flag in match.group(3):
                if flag == "q":
                    options["quiet"] = True
                elif flag == "o":
                    options["result"] = True
                elif flag == "t":
                    options["timer"] = time.time
                else:
                    options["timer"] = time.process_time
        rest = rest[match.end():]
    if options["repeat"] < 1:
        raise UsageError("%timeit -r needs at least 1 run")
    return options, rest


def _timeit(stmt, setup, ctx, options):
    import timeit

    if ctx.frame.f_code.co_flags & _CO_NEWLOCALS:
        namespace = dict(ctx.globals)
        namespace.update(ctx.locals)
    else:
        namespace = ctx.globals
    compile(stmt or "pass", "<magic-timeit-stmt>", "exec", dont_inherit=True)
    compile(setup or "pass", "<magic-timeit-setup>", "exec", dont_inherit=True)
    timer = timeit.Timer(stmt or "pass", setup or "pass", timer=options["timer"], globals=namespace)
    number = options["number"]
    if number <= 0:
        for index in range(10):
            number = 10 ** index
            if timer.timeit(number) >= 0.2:
                break
    runs = options["repeat"]
    all_runs = timer.repeat(runs, number)
    best, worst = min(all_runs) / number, max(all_runs) / number
    result = TimeitResult(number, runs, best, worst, all_runs, 0.0, options["precision"])
    if not options["quiet"]:
        if worst > 4 * best and best > 0 and worst > 1e-6:
            print("The slowest run took %0.2f times longer than the fastest. This could mean that an intermediate "
                  "result is being cached." % (worst / best))
        print(result)
    emit_status("timeit", ms=result.average * 1000.0, loops=number, runs=runs)
    return result if options["result"] else None


def _magic_timeit(args, ctx):
    options, stmt = _parse_timeit_options(args)
    if not stmt:
        return None
    return _timeit(transform(stmt), "", ctx, options)


def user_names(namespace=None):
    """Sorted names user cells defined (runtime, prelude and _private names left out)."""
    ns = _state.namespace if namespace is None else namespace
    protected = _state.protected
    return sorted(name for name, value in ns.items()
                  if not name.startswith("_") and not (name in protected and protected[name] is value))


def _filtered_names(args, ctx):
    wanted = set(args.split())
    names = user_names(ctx.globals)
    if wanted:
        names = [n for n in names if type(ctx.globals[n]).__name__ in wanted]
    return names


def _magic_who(args, ctx):
    names = _filtered_names(args, ctx)
    print("  ".join(names) if names else "No user variables defined.")


def _magic_who_ls(args, ctx):
    return _filtered_names(args, ctx)


def _short_value(value):
    try:
        text = repr(value)
    except Exception:
        text = "<%s>" % type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _magic_whos(args, ctx):
    names = _filtered_names(args, ctx)
    if not names:
        print("No user variables defined.")
        return
    rows = [(n, type(ctx.globals[n]).__name__, _short_value(ctx.globals[n])) for n in names]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(("Name", "Type", "Value"))]
    print("  ".join(h.ljust(w) for h, w in zip(("Name", "Type", "Value"), widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _reset_namespace(ns):
    kept = {name: ns[name] for name in _BASE_NAMES if name in ns}
    ns.clear()
    ns.update(kept)
    ns.update(_state.protected)
    ns["__veyyon__"] = _state.runtime


def _magic_reset(args, ctx):
    unknown = [a for a in args.split() if a not in ("-f", "-s")]
    if unknown:
        raise UsageError("%reset accepts only -f and -s, got %s" % " ".join(unknown))
    _reset_namespace(ctx.globals)


def _magic_load(args, ctx):
    path = _single_path(args)
    if not path:
        raise UsageError("usage: %load <path>")
    path = os.path.abspath(os.path.expanduser(path))
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    value = _execute(source, path, ctx.globals, register=False)
    return None if value is _NO_VALUE else value


def _magic_run(args, ctx):
    import runpy

    argv = _split_args(args)
    interactive = False
    while argv and argv[0] in ("-i",):
        interactive = True
        argv.pop(0)
    if not argv:
        raise UsageError("usage: %run [-i] <path> [args...]")
    path = os.path.expanduser(argv[0])
    if not os.path.exists(path) and os.path.exists(path + ".py"):
        path += ".py"
    saved_argv = sys.argv
    sys.argv = [path] + argv[1:]
    try:
        init = {k: v for k, v in ctx.globals.items() if not k.startswith("__")} if interactive else None
        result = runpy.run_path(path, init_globals=init, run_name="__main__")
    finally:
        sys.argv = saved_argv
    for name, value in result.items():
        if not (name.startswith("__") and name.endswith("__")):
            ctx.globals[name] = value


def _canonical_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions():
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if name:
            found.setdefault(_canonical_name(name), (dist.version, dist))
    return found


def _top_level_names(dist, key):
    names = set()
    try:
        text = dist.read_text("top_level.txt")
    except Exception:
        text = None
    if text:
        names.update(line.strip() for line in text.splitlines())
    else:
        for path in dist.files or ():
            first = path.parts[0] if path.parts else ""
            if first.endswith(".py"):
                names.add(first[:-3])
            elif "." not in first and first not in ("", "__pycache__"):
                names.add(first)
    if not names:
        names.add(key.replace("-", "_"))
    return {name for name in names if name.isidentifier()}


def modules_to_evict(top_names, module_names):
    """Modules in module_names that belong to one of the top-level packages top_names."""
    tops = set(top_names) - {"sys", "builtins", "__main__", "veyyon_runtime"}
    return [name for name in module_names if name.partition(".")[0] in tops]


def _evict_changed(before, after):
    tops = set()
    for key, (version, dist) in after.items():
        if key not in before or before[key][0] != version:
            tops.update(_top_level_names(dist, key))
    for key in set(before) - set(after):
        tops.add(key.replace("-", "_"))
    evicted = modules_to_evict(tops, list(sys.modules))
    for name in evicted:
        sys.modules.pop(name, None)
    return sorted({name.partition(".")[0] for name in evicted})


def _magic_pip(args, ctx):
    import importlib

    argv = _split_args(args)
    before = _distributions()
    status = run_process([sys.executable, "-m", "pip"] + argv)
    importlib.invalidate_caches()
    evicted = _evict_changed(before, _distributions())
    emit_status("pip", args=argv, exitCode=status, evicted=evicted)


def _magic_matplotlib(args, ctx):
    """Accepted for notebook compatibility: figures are always rendered after each cell."""


def _run_body(body, ctx):
    return _execute(body, ctx.filename, ctx.globals, line_offset=ctx.lineno, register=False)


def _cell_capture(line, body, ctx):
    options = _split_args(line)
    flags = {o for o in options if o.startswith("--")}
    names = [o for o in options if not o.startswith("-")]
    unknown = flags - {"--no-stdout", "--no-stderr", "--no-display"}
    if unknown or len(names) > 1:
        raise UsageError("usage: %%capture [--no-stdout] [--no-stderr] [--no-display] [name]")
    result = CapturedIO()
    if names:
        ctx.globals[names[0]] = result
    with _Capture(result, "--no-stdout" not in flags, "--no-stderr" not in flags, "--no-display" not in flags):
        value = _run_body(body, ctx)
        if value is not _NO_VALUE and value is not None:
            result.outputs.append(CapturedOutput(mime_bundle(value)))


def _cell_time(line, body, ctx):
    if line.strip():
        raise UsageError("Can't use statement directly after '%%time'!")
    value = _timed(lambda: _run_body(body, ctx))
    return None if value is _NO_VALUE else value


def _cell_timeit(line, body, ctx):
    options, setup = _parse_timeit_options(line)
    return _timeit(transform(body), setup, ctx, options)


def _cell_writefile(line, body, ctx):
    options = _split_args(line)
    append = any(o in ("-a", "--append") for o in options)
    paths = [o for o in options if o not in ("-a", "--append")]
    if len(paths) != 1:
        raise UsageError("usage: %%writefile [-a] <path>")
    path = os.path.expanduser(paths[0])
    existed = os.path.exists(path)
    with open(path, "a" if append else "w", encoding="utf-8") as handle:
        handle.write(body if body.endswith("\n") else body + "\n")
    verb = "Appending to" if append else ("Overwriting" if existed else "Writing")
    print("%s %s" % (verb, paths[0]))


_LINE_MAGICS.update({
    "pwd": _magic_pwd, "cd": _magic_cd, "ls": _magic_ls, "env": _magic_env, "set_env": _magic_set_env,
    "time": _magic_time, "timeit": _magic_timeit, "who": _magic_who, "who_ls": _magic_who_ls,
    "whos": _magic_whos, "reset": _magic_reset, "load": _magic_load, "run": _magic_run,
    "pip": _magic_pip, "matplotlib": _magic_matplotlib,
})
_CELL_MAGICS.update({
    "capture": _cell_capture,
    "time": _cell_time, "timeit": _cell_timeit, "writefile": _cell_writefile,
})


# ---------------------------------------------------------------------------
# Magics: the rest of IPython's builtin set. Each works as in IPython or raises a UsageError
# that says it is not supported here (and why); see _UNSUPPORTED_MAGICS.


def _run_script(argv, body, line_options):
    """%%script and its named forms: run argv with the body on stdin, as IPython does."""
    import subprocess
    import tempfile

    out_name = err_name = None
    raise_error = True
    rest = []
    options = list(line_options)
    while options:
        option = options.pop(0)
        if option in ("--out", "--err", "--proc") and options:
            if option == "--proc":
                raise UsageError("%%script --proc needs a background process, which is not supported here")
            if option == "--out":
                out_name = options.pop(0)
            else:
                err_name = options.pop(0)
        elif option == "--bg":
            raise UsageError("%%script --bg (background scripts) is not supported here: a cell's processes end with it")
        elif option == "--no-raise-error":
            raise_error = False
        else:
            rest.append(option)
    argv = argv + rest
    if not argv:
        raise UsageError("usage: %%script [--out VAR] [--err VAR] [--no-raise-error] program [args...]")
    if not body.endswith("\n"):
        body += "\n"
    collected = {"stdout": [], "stderr": []}
    sinks = (collected["stdout"].append if out_name else None, collected["stderr"].append if err_name else None)
    with tempfile.TemporaryFile() as stdin:
        stdin.write(body.encode("utf-8", "replace"))
        stdin.seek(0)
        try:
            status = run_process(argv, stdin=stdin, sinks=sinks)
        except FileNotFoundError:
            print("Couldn't find program: %r" % argv[0])
            return None
    namespace = _state.namespace
    if out_name:
        namespace[out_name] = "".join(collected["stdout"])
    if err_name:
        namespace[err_name] = "".join(collected["stderr"])
    if raise_error and status != 0:
        raise subprocess.CalledProcessError(status, body)
    return None


def _cell_script(line, body, ctx):
    return _run_script([], body, _split_args(line))


def _named_script(program):
    def run(line, body, ctx):
        return _run_script([program], body, _split_args(line))
    return run


def _cell_sx(line, body, ctx):
    return _magic_sx(body, ctx)


class _DisplayObject:
    """What %%html, %%svg, %%markdown, %%latex and %%javascript display (IPython.display's classes)."""

    def __init__(self, kind, mime, data):
        self._kind = kind
        self._bundle = {mime: data}

    def _repr_mimebundle_(self, include=None, exclude=None):
        return dict(self._bundle)

    def __repr__(self):
        return "<IPython.core.display.%s object>" % self._kind


def _display_cell(kind, mime):
    def run(line, body, ctx):
        options = _split_args(line)
        if kind == "HTML" and options and options != ["--isolated"]:
            raise UsageError("usage: %%html [--isolated]")
        display(_DisplayObject(kind, mime, body if body.endswith("\n") else body + "\n"))
    return run


def _shell_alias(command):
    """IPython's default shell aliases (%cat, %cp, %ll, ...): run the command with the arguments appended."""
    def run(args, ctx):
        status = run_process(_shell_argv("%s %s" % (command, args) if args.strip() else command))
        ctx.globals["_exit_code"] = status
    return run


def _magic_sx(args, ctx):
    lines, ctx.globals["_exit_code"] = _shell_output(args)
    return lines


def _magic_pushd(args, ctx):
    previous = os.getcwd()
    _magic_cd(args, ctx)
    _state.dir_stack.insert(0, previous)
    return list(_state.dir_stack)


def _magic_popd(args, ctx):
    if not _state.dir_stack:
        raise UsageError("%popd on empty stack")
    target = _state.dir_stack.pop(0)
    previous = os.getcwd()
    os.chdir(target)
    _state.previous_dir = previous
    print(os.getcwd())
    emit_status("cd", path=os.getcwd())
    print("popd -> %s" % target)


def _magic_dirs(args, ctx):
    return list(_state.dir_stack)


def _magic_xmode(args, ctx):
    modes = {"context": "Context", "plain": "Plain", "verbose": "Verbose", "minimal": "Minimal"}
    wanted = args.strip().lower()
    if not wanted:
        order = ["Plain", "Context", "Verbose", "Minimal"]
        mode = order[(order.index(_state.xmode) + 1) % len(order)]
    elif wanted in modes:
        mode = modes[wanted]
    else:
        raise ValueError("Unrecognized mode in FormattedTB: <%s>\nValid modes: %s" % (args.strip(), list(modes.values())))
    _state.xmode = mode
    print("Exception reporting mode: %s" % mode)


def _magic_precision(args, ctx):
    text = args.strip()
    numpy = sys.modules.get("numpy")
    if not text:
        _state.float_format = None
        if numpy is not None:
            numpy.set_printoptions(precision=8)
        return "%r"
    if "%" in text:
        try:
            text % 3.14159
        except Exception:
            raise ValueError("Precision must be int or format string, not %r" % text)
        _state.float_format = text
        if numpy is not None:
            numpy.set_printoptions(precision=8)
        return text
    try:
        digits = int(text)
    except ValueError:
        raise ValueError("Precision must be int or format string, not %r" % text)
    if digits < 0:
        raise ValueError("Precision must be int or format string, not %r" % text)
    _state.float_format = "%%.%if" % digits
    if numpy is not None:
        numpy.set_printoptions(precision=digits)
    return _state.float_format


def _pretty_float(obj, p, cycle):
    fmt = _state.float_format
    p.text(repr(obj) if fmt is None else fmt % obj)


def _magic_pprint(args, ctx):
    _state.pretty_printing = not _state.pretty_printing
    print("Pretty printing has been turned %s" % ("ON" if _state.pretty_printing else "OFF"))


def _magic_xdel(args, ctx):
    name = args.strip()
    if not name:
        raise UsageError("usage: %xdel <variable>")
    try:
        del ctx.globals[name]
    except KeyError:
        raise NameError("name '%s' is not defined" % name)


def _magic_reset_selective(args, ctx):
    parts = [part for part in args.split() if part != "-f"]
    if len(parts) != 1:
        raise UsageError("usage: %reset_selective [-f] <regex>")
    pattern = re.compile(parts[0])
    for name in user_names(ctx.globals):
        if pattern.search(name):
            del ctx.globals[name]


def _magic_tb(args, ctx):
    if _state.last_traceback is None:
        raise UsageError("No traceback available to show.")
    print("\n".join(_state.last_traceback))


def _magic_history(args, ctx):
    options = args.split()
    numbered = "-n" in options
    ranges = [o for o in options if not o.startswith("-")]
    unknown = [o for o in options if o.startswith("-") and o != "-n"]
    if unknown:
        raise UsageError("%%history here supports -n and ranges (N, N-M), not %s" % " ".join(unknown))
    history = _state.history
    selected = []
    for item in ranges or ["1-%d" % len(history)]:
        match = re.match(r"^(\d+)(?:-(\d+))?$", item)
        if match is None:
            raise UsageError("%%history: cannot read the range %r (use N or N-M)" % item)
        start = int(match.group(1))
        end = int(match.group(2) or start)
        selected.extend(n for n in range(start, end + 1) if n in history)
    for number in selected:
        source = history[number]
        if numbered:
            lines = source.split("\n")
            print("%4d: %s" % (number, lines[0]) + "".join("\n      " + line for line in lines[1:]))
        else:
            print(source)


def _magic_page(args, ctx):
    name = args.strip().split(" ")[-1] if args.strip() else ""
    if not name:
        raise UsageError("usage: %page <object>")
    print(pretty(eval(name, ctx.globals, ctx.locals)))


def _magic_pycat(args, ctx):
    path = _single_path(args)
    if not path:
        raise UsageError("usage: %pycat <path>")
    with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as handle:
        print(handle.read(), end="")


def _inspected(args, ctx, what):
    import inspect

    name = args.strip()
    if not name:
        raise UsageError("usage: %%%s <object>" % what)
    try:
        obj = eval(name, ctx.globals, ctx.locals)
    except Exception:
        print("Object `%s` not found." % name)
        return None, None, inspect
    return name, obj, inspect


def _magic_pdoc(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "pdoc")
    if name is not None:
        print(inspect.getdoc(obj) or "No documentation found for %s" % name)


def _magic_pdef(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "pdef")
    if name is None:
        return
    try:
        print(" %s%s" % (name, inspect.signature(obj)))
    except (TypeError, ValueError):
        print("No definition header found for %s" % name)


def _magic_psource(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "psource")
    if name is None:
        return
    try:
        print(inspect.getsource(obj), end="")
    except (TypeError, OSError):
        print("No source found for %s" % name)


def _magic_pfile(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "pfile")
    if name is None:
        return
    try:
        path = inspect.getsourcefile(obj)
        with open(path, encoding="utf-8", errors="replace") as handle:
            print(handle.read(), end="")
    except (TypeError, OSError):
        print("No file found for %s" % name)


def _magic_pinfo(args, ctx):
    text = args.strip().rstrip("?")
    name, obj, inspect = _inspected(text, ctx, "pinfo")
    if name is None:
        return
    lines = []
    try:
        lines.append("Signature: %s%s" % (name, inspect.signature(obj)))
    except (TypeError, ValueError):
        pass
    if not callable(obj) or isinstance(obj, type):
        lines.append("Type:      %s" % type(obj).__name__)
        lines.append("String form: %s" % _short_value(obj))
    doc = inspect.getdoc(obj)
    lines.append("Docstring: %s" % (doc if doc else "<no docstring>"))
    try:
        lines.append("File:      %s" % inspect.getsourcefile(obj))
    except TypeError:
        pass
    if callable(obj) and not isinstance(obj, type):
        lines.append("Type:      %s" % type(obj).__name__)
    print("\n".join(lines))


def _magic_psearch(args, ctx):
    import fnmatch

    pattern = args.strip()
    if not pattern:
        raise UsageError("usage: %psearch <pattern with * and ?>")
    names = sorted(set(ctx.globals) | set(dir(builtins)))
    for name in names:
        if fnmatch.fnmatchcase(name, pattern) and not name.startswith("_"):
            print(name)


def _magic_alias_magic(args, ctx):
    parts = _split_args(args)
    kinds = {p for p in parts if p in ("-l", "--line", "-c", "--cell")}
    names = [p.lstrip("%") for p in parts if p not in kinds]
    if len(names) != 2:
        raise UsageError("usage: %alias_magic [-l] [-c] NAME TARGET")
    new, target = names
    line = not kinds or kinds & {"-l", "--line"}
    cell = not kinds or kinds & {"-c", "--cell"}
    found = False
    if line and target in _LINE_MAGICS:
        _LINE_MAGICS[new] = _LINE_MAGICS[target]
        print("Created `%%%s` as an alias for `%%%s`." % (new, target))
        found = True
    if cell and target in _CELL_MAGICS:
        _CELL_MAGICS[new] = _CELL_MAGICS[target]
        print("Created `%%%%%s` as an alias for `%%%%%s`." % (new, target))
        found = True
    if not found:
        raise UsageError("Magic `%s` not found." % target)


def _magic_lsmagic(args, ctx):
    line = "  ".join("%" + name for name in sorted(_LINE_MAGICS))
    cell = "  ".join("%%" + name for name in sorted(_CELL_MAGICS))
    print("Available line magics:\n%s\n\nAvailable cell magics:\n%s\n\nAutomagic is OFF, %% prefix IS needed for "
          "line magics.\n\nNot supported here: %s" % (line, cell, "  ".join(sorted(_UNSUPPORTED_MAGICS))))


def _magic_magic(args, ctx):
    print("IPython's magic functions work in cells here: %name args (line magics) and %%name on a cell's first "
          "line (cell magics); !cmd runs a shell command and var = !cmd captures its output. %lsmagic lists them.")


def _magic_config(args, ctx):
    text = args.strip()
    match = re.match(r"^InlineBackend\.(figure_formats?)\s*=\s*(.+)$", text)
    if match is None:
        raise UsageError("%%config here supports only InlineBackend.figure_format(s) = ... (got %r)" % text)
    try:
        value = ast.literal_eval(match.group(2).strip())
    except (ValueError, SyntaxError):
        raise UsageError("%%config: cannot read %s" % match.group(2))
    formats = [value] if isinstance(value, str) else list(value)
    allowed = {"png", "retina", "svg", "pdf"}
    if not formats or not all(isinstance(f, str) and f in allowed for f in formats):
        raise ValueError("supported formats are: %s not %s" % (", ".join(repr(f) for f in sorted(allowed)), value))
    _figure_formats[:] = formats


def _magic_conda(args, ctx):
    import shutil

    for program in ("conda", "mamba", "micromamba"):
        path = shutil.which(program)
        if path is not None:
            argv = _split_args(args)
            if argv and argv[0] in ("install", "remove", "update", "uninstall") and "--prefix" not in argv \
                    and "-p" not in argv:
                argv[1:1] = ["--prefix", sys.prefix]
            status = run_process([path] + argv)
            if status != 0:
                print("Note: %s exited with status %d" % (program, status))
            return None
    raise UsageError("The conda command could not be found on PATH; %conda works only in a conda environment.")


def _magic_prun(args, ctx):
    options, stmt = _parse_prun_options(args)
    return _prun(transform(stmt), ctx, options)


def _cell_prun(line, body, ctx):
    options, stmt = _parse_prun_options(line)
    return _prun(transform(stmt + "\n" + body if stmt.strip() else body), ctx, options)


def _parse_prun_options(args):
    options = {"sort": [], "limit": [], "return": False, "quiet": False, "dump": None, "text": None}
    rest = args.strip()
    while rest.startswith("-"):
        match = re.match(r"-([slDT])\s*(\S+)\s*|-([rq]+)(?=\s|$)\s*", rest)
        if match is None:
            break
        if match.group(1) == "s":
            options["sort"].append(match.group(2))
        elif match.group(1) == "l":
            limit = match.group(2)
            options["limit"].append(int(limit) if limit.isdigit() else float(limit) if re.match(r"^\d*\.\d+$", limit)
                                    else limit)
        elif match.group(1) == "D":
            options["dump"] = match.group(2)
        elif match.group(1) == "T":
            options["text"] = match.group(2)
        else:
            options["return"] = options["return"] or "r" in match.group(3)
            options["quiet"] = options["quiet"] or "q" in match.group(3)
        rest = rest[match.end():]
    return options, rest


def _prun(code_text, ctx, options):
    import cProfile
    import pstats

    profile = cProfile.Profile()
    code = compile(code_text or "pass", "<string>", "exec", dont_inherit=True)
    try:
        profile.runctx(code, ctx.globals, ctx.locals)
    except SystemExit:
        pass
    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    stats.strip_dirs().sort_stats(*(options["sort"] or ["time"]))
    stats.print_stats(*options["limit"])
    text = stream.getvalue().rstrip()
    if not options["quiet"]:
        print(text)
    if options["dump"]:
        profile.dump_stats(options["dump"])
        print("\n*** Profile stats marshalled to file %r." % options["dump"])
    if options["text"]:
        with open(options["text"], "w", encoding="utf-8") as handle:
            handle.write(text)
        print("\n*** Profile printout saved to text file %r." % options["text"])
    return stats if options["return"] else None


_IPYTHON_EXTENSIONS = frozenset({"autoreload", "storemagic"})


def _magic_load_ext(args, ctx):
    import importlib

    name = args.strip()
    if not name:
        raise UsageError("Missing module name.")
    if name in _IPYTHON_EXTENSIONS:
        raise UsageError("%%load_ext %s: IPython's own extension %s needs the IPython shell, which this kernel is "
                         "not; use importlib.reload() to reload a changed module" % (name, name))
    if name in _state.extensions:
        print("The %s extension is already loaded. To reload it, use:\n  %%reload_ext %s" % (name, name))
        return None
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise ModuleNotFoundError("No module named %r" % name, name=name) from None
    _load_extension(name, module)
    return None


def _load_extension(name, module):
    load = getattr(module, "load_ipython_extension", None)
    if load is not None:
        try:
            load(_ExtensionShell())
        except _ShellFeatureMissing as exc:
            raise UsageError("the %s extension needs the IPython shell's %s, which this kernel does not have"
                             % (name, exc))
    _state.extensions[name] = module


def _magic_reload_ext(args, ctx):
    import importlib

    name = args.strip()
    if not name:
        raise UsageError("Missing module name.")
    module = _state.extensions.pop(name, None)
    if module is not None:
        unload = getattr(module, "unload_ipython_extension", None)
        if unload is not None:
            unload(_ExtensionShell())
        module = importlib.reload(module)
    else:
        module = importlib.import_module(name)
    _load_extension(name, module)


def _magic_unload_ext(args, ctx):
    name = args.strip()
    module = _state.extensions.get(name)
    if module is None:
        print("The %s extension is not loaded." % name)
        return
    unload = getattr(module, "unload_ipython_extension", None)
    if unload is None:
        print("The %s extension doesn't define how to unload it." % name)
        return
    unload(_ExtensionShell())
    del _state.extensions[name]


class _ShellFeatureMissing(AttributeError):
    pass


class _ExtensionShell:
    """The part of IPython's shell an extension's load_ipython_extension(ip) may use here."""

    @property
    def user_ns(self):
        return _state.namespace

    def push(self, variables, interactive=True):
        """Put names into the user namespace."""
        _state.namespace.update(variables)

    def register_magic_function(self, func, magic_kind="line", magic_name=None):
        """Register func as a %name (line) or %%name (cell) magic."""
        name = magic_name or func.__name__
        if magic_kind == "cell":
            register_cell_magic(name, func)
        elif magic_kind == "line_cell":
            register_line_magic(name, lambda line: func(line, None))
            register_cell_magic(name, func)
        else:
            register_line_magic(name, func)

    def __getattr__(self, name):
        raise _ShellFeatureMissing(name)


_UNSUPPORTED_MAGICS = {
    "alias": "shell aliases cannot be defined; use !cmd or %%bash",
    "unalias": "shell aliases cannot be defined",
    "autoawait": "top-level await always works here",
    "autocall": "automatic calling (f x for f(x)) is not available",
    "automagic": "automagic is off: magics need their % prefix",
    "autosave": "there is no notebook to save",
    "bookmark": "directory bookmarks are not kept; use %cd with a path",
    "dhist": "the directory history is not kept; %dirs shows the %pushd stack",
    "clear": "the output area cannot be cleared",
    "colors": "output is not coloured",
    "connect_info": "the kernel has no Jupyter connection file",
    "qtconsole": "the kernel has no Jupyter connection",
    "notebook": "there is no notebook to export; the host can export a session as .ipynb",
    "debug": "interactive debuggers need a terminal; the kernel's stdin carries requests",
    "pdb": "interactive debuggers need a terminal; the kernel's stdin carries requests",
    "doctest_mode": "the prompts cannot change",
    "ed": "editors need a terminal",
    "edit": "editors need a terminal",
    "gui": "GUI event loops are not integrated; figures render inline",
    "pylab": "use import numpy as np; import matplotlib.pyplot as plt (figures render inline)",
    "killbgscripts": "%%script --bg is not supported, so there are no background scripts",
    "logoff": "session logging is not available",
    "logon": "session logging is not available",
    "logstart": "session logging is not available",
    "logstate": "session logging is not available",
    "logstop": "session logging is not available",
    "macro": "macros are not available",
    "pastebin": "nothing is uploaded from the kernel",
    "quickref": "use %lsmagic and %magic",
    "recall": "there is no input line to edit",
    "rep": "there is no input line to edit",
    "rerun": "cells cannot be re-run from inside the kernel; send them again",
    "save": "use %%writefile to write code to a file",
    "rehashx": "shell aliases are not kept",
    "sc": "%sc is deprecated in IPython; use var = !cmd",
    "store": "no state is kept across kernels",
    "autoreload": "IPython's autoreload extension needs the IPython shell; use importlib.reload()",
    "debug_cell": "interactive debuggers need a terminal",
}


def _unsupported(name):
    reason = _UNSUPPORTED_MAGICS[name]

    def run(*args):
        raise UsageError("%%%s is an IPython magic that is not supported here: %s." % (name, reason))
    return run


_LINE_MAGICS.update({
    "sx": _magic_sx, "system": _magic_sx, "pushd": _magic_pushd, "popd": _magic_popd, "dirs": _magic_dirs,
    "xmode": _magic_xmode, "precision": _magic_precision, "pprint": _magic_pprint, "xdel": _magic_xdel,
    "reset_selective": _magic_reset_selective, "tb": _magic_tb, "history": _magic_history, "hist": _magic_history,
    "page": _magic_page, "pycat": _magic_pycat, "less": _magic_pycat, "more": _magic_pycat, "pdoc": _magic_pdoc,
    "pdef": _magic_pdef, "psource": _magic_psource, "pfile": _magic_pfile, "pinfo": _magic_pinfo,
    "pinfo2": _magic_pinfo, "psearch": _magic_psearch, "alias_magic": _magic_alias_magic, "lsmagic": _magic_lsmagic,
    "magic": _magic_magic, "config": _magic_config, "conda": _magic_conda, "mamba": _magic_conda,
    "micromamba": _magic_conda, "prun": _magic_prun, "load_ext": _magic_load_ext, "reload_ext": _magic_reload_ext,
    "unload_ext": _magic_unload_ext, "loadpy": _magic_load,
    "cat": _shell_alias("cat"), "cp": _shell_alias("cp"), "mv": _shell_alias("mv"), "rm": _shell_alias("rm"),
    "mkdir": _shell_alias("mkdir"), "rmdir": _shell_alias("rmdir"), "man": _shell_alias("man"),
    "ll": _shell_alias("ls -F -o"), "lf": _shell_alias("ls -F -o | grep ^-"),
    "lk": _shell_alias("ls -F -o | grep ^l"), "lx": _shell_alias("ls -F -o | grep ^-..x"),
    "ldir": _shell_alias("ls -F -o | grep /$"),
})
_LINE_MAGICS.update({name: _unsupported(name) for name in _UNSUPPORTED_MAGICS if name != "debug_cell"})
_PRETTY_TYPES[float] = _pretty_float
_CELL_MAGICS.update({
    "file": _cell_writefile, "script": _cell_script, "!": _cell_sx, "sx": _cell_sx, "system": _cell_sx,
    "html": _display_cell("HTML", "text/html"), "HTML": _display_cell("HTML", "text/html"),
    "svg": _display_cell("SVG", "image/svg+xml"), "SVG": _display_cell("SVG", "image/svg+xml"),
    "markdown": _display_cell("Markdown", "text/markdown"), "latex": _display_cell("Latex", "text/latex"),
    "javascript": _display_cell("Javascript", "application/javascript"),
    "js": _display_cell("Javascript", "application/javascript"), "prun": _cell_prun,
    "debug": _unsupported("debug_cell"),
})
_CELL_MAGICS.update({name: _named_script(name) for name in ("perl", "ruby", "python", "python2", "pypy")})
_CELL_MAGICS["python3"] = _named_script("python3")
_CELL_MAGICS["bash"] = _named_script("bash")
_CELL_MAGICS["sh"] = _named_script("sh")

"""The source of the functions and classes cells defined, kept so a snapshot can recreate them.

After each cell that has a top-level ``def``/``class`` (decorators included), the latest such
statement per name is recorded with the object it bound; a snapshot saves the records whose
name still holds that object, and a restore replays their source (see PROTOCOL.md, Snapshots
and restores). Classes and functions are pickled by reference (``__main__.Name``), so replaying
them before the values lets instances, and values that hold them, come back.
"""

import linecache
import re

from .transform import transform


# A line starting (at column 0) with a decorator or a def/class statement: only such cells are parsed.
_GATE = re.compile(r"^(?:@|def\s|class\s|async\s+def\s)", re.M)
_MISSING = object()

# name -> (filename, first line, source, the object the statement bound); latest last.
_records = {}
# name -> (id of the class, number of cells) of a find_assignment that found nothing: not searched again until either changes.
_not_found = {}


def _unwrapped(obj):
    for _ in range(16):
        inner = getattr(obj, "__wrapped__", None)
        if inner is None and isinstance(obj, (staticmethod, classmethod)):
            inner = obj.__func__  # (Python 3.8 and 3.9: no __wrapped__ on them)
        if inner is None or inner is obj:
            break
        obj = inner
    return obj


def _code_files(obj):
    """The filenames of the code of obj (a function, or a class's own functions)."""
    obj = _unwrapped(obj)
    code = getattr(obj, "__code__", None)
    if code is not None:
        return {code.co_filename}
    files = set()
    if isinstance(obj, type):
        for member in vars(obj).values():
            member = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
            code = getattr(_unwrapped(member), "__code__", None)
            if code is not None:
                files.add(code.co_filename)
    return files


def _is_cell_file(filename):
    return filename.startswith("<cell-") or filename.startswith("<hidden-")


def _bound_by(obj, node, filename):
    """Whether obj plausibly is what node (run from filename) bound: a function whose code comes from that cell;
    a class of that name none of whose methods comes from another cell (a dataclass's come from "<string>")."""
    import ast

    files = _code_files(obj)
    if isinstance(node, ast.ClassDef):
        cls = _unwrapped(obj)
        return isinstance(cls, type) and getattr(cls, "__qualname__", None) == node.name and \
            not any(_is_cell_file(f) and f != filename for f in files)
    return filename in files


def note_cell(source, filename, namespace):
    """Record the top-level definitions of a cell that ran (source as sent, filename as compiled)."""
    if _GATE.search(source) is None:
        return
    import ast

    try:
        code_text = transform(source)
        tree = ast.parse(code_text)
    except (SyntaxError, ValueError):
        return
    lines = code_text.splitlines(True)
    latest = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            latest[node.name] = (start, node.end_lineno, node)
    for name, (start, end, node) in latest.items():
        obj = namespace.get(name, _MISSING)
        if obj is _MISSING:
            continue
        previous = _records.get(name)
        if previous is not None and previous[3] is obj:
            continue
        if not _bound_by(obj, node, filename):
            continue
        _records.pop(name, None)
        _records[name] = (filename, start, "".join(lines[start - 1:end]), obj)


def find_assignment(name, obj, history):
    """Record the latest top-level ``name = ...`` statement of the counted cells (history: count -> source) as the
    definition of obj, a class made by a call (``Point = namedtuple("Point", "x y")``); whether one was found.
    Searched only when a snapshot meets such a class, and once: the record then stands for it."""
    key = (id(obj), len(history))
    if _not_found.get(name) == key:
        return False
    import ast

    pattern = re.compile(r"^%s\s*(?::[^=\n]*)?=(?!=)" % re.escape(name), re.M)
    for count in sorted(history, reverse=True):
        source = history[count]
        if pattern.search(source) is None:
            continue
        try:
            code_text = transform(source)
            tree = ast.parse(code_text)
        except (SyntaxError, ValueError):
            continue
        lines = code_text.splitlines(True)
        for node in reversed(tree.body):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == name:
                _records.pop(name, None)
                _records[name] = ("<cell-%d>" % count, node.lineno,
                                  "".join(lines[node.lineno - 1:node.end_lineno]), obj)
                _not_found.pop(name, None)
                return True
    _not_found[name] = key
    return False


def current(namespace):
    """{name: (filename, first line, source)} of the records whose name still holds what the statement bound,
    in the order they were recorded; stale records are dropped."""
    kept = {}
    for name in list(_records):
        filename, start, source, obj = _records[name]
        if namespace.get(name, _MISSING) is obj:
            kept[name] = (filename, start, source)
        else:
            del _records[name]
    return kept


def _register_lines(entries):
    """Put each replayed statement at its original lines of its cell's filename in linecache (for tracebacks, getsource)."""
    files = {}
    for _, filename, start, source in entries:
        lines = files.setdefault(filename, [])
        body = source.splitlines(True)
        if len(lines) < start - 1 + len(body):
            lines.extend(["\n"] * (start - 1 + len(body) - len(lines)))
        lines[start - 1:start - 1 + len(body)] = body
    for filename, lines in files.items():
        if filename not in linecache.cache:
            linecache.cache[filename] = (sum(len(line) for line in lines), None, lines, filename)


def replay(entries, namespace):
    """Run each entry (name, filename, first line, source) into namespace, in order, retrying those that fail
    with a NameError while others succeed. Returns (restored names, {name: exception} of those that failed)."""
    _register_lines(entries)
    restored = []
    failed = {}
    pending = list(entries)
    while pending:
        retry = []
        for entry in pending:
            name, filename, start, source = entry
            try:
                code = compile("\n" * (start - 1) + source, filename, "exec", dont_inherit=True)
                exec(code, namespace)
                obj = namespace[name]
            except NameError as exc:
                failed[name] = exc
                retry.append(entry)
                continue
            except BaseException as exc:
                failed[name] = exc
                continue
            failed.pop(name, None)
            restored.append(name)
            _records.pop(name, None)
            _records[name] = (filename, start, source, obj)
        if len(retry) == len(pending):
            break
        pending = retry
    return restored, failed

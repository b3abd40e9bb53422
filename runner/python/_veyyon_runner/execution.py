"""Running a cell's code: compile with top-level await, the last expression's value, clean tracebacks."""

import _ast
import linecache
import os
import re
import warnings

from .transform import transform


_TLA_FLAG = getattr(_ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
_CO_COROUTINE = 0x0080
_CO_NEWLOCALS = 0x0002
_NO_VALUE = object()
_RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB_DIR = os.path.dirname(os.__file__)
_PLUMBING_FILES = frozenset([os.path.join(_STDLIB_DIR, name) for name in ("runpy.py", "timeit.py")]
                            + ["<frozen runpy>"])
_PLUMBING_DIRS = (os.path.join(_STDLIB_DIR, "asyncio") + os.sep,)
_BASE_NAMES = ("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__builtins__", "__veyyon__")


def _register_source(filename, source):
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _ends_with_semicolon(lines, node):
    line = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:].decode("utf-8", "replace")
    rest = "\n".join([line] + lines[node.end_lineno:])
    index = 0
    while index < len(rest):
        char = rest[index]
        if char == ";":
            return True
        if char == "#":
            newline = rest.find("\n", index)
            if newline == -1:
                return False
            index = newline
        elif not (char.isspace() or char == "\\"):
            return False
        index += 1
    return False


_loop = None


def _event_loop():
    global _loop
    import asyncio

    if _loop is None or _loop.is_closed():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                loop = None
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
        _loop = loop
    return _loop


def _run_coroutine(coro):
    loop = _event_loop()
    if loop.is_running():
        coro.close()
        raise RuntimeError("top-level await cannot run here: the kernel's event loop is already running")
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            try:
                loop.run_until_complete(task)
            except BaseException:
                pass
        raise


def _run_code(code, globals_, locals_):
    if code.co_flags & _CO_COROUTINE:
        return _run_coroutine(eval(code, globals_, locals_))
    return eval(code, globals_, locals_)


def _expression_code(code_text, filename):
    """The code of a one-line cell that is a single expression, compiled once and directly; None otherwise.

    The same code the general path makes for such a cell (its value is the result), without the
    AST round trip; a trailing ``;`` or any statement fails this compile and takes the general path
    (cells with a backslash never come here, so no escape-sequence warning is given twice)."""
    try:
        return compile(code_text, filename, "eval", _TLA_FLAG, dont_inherit=True)
    except SyntaxError:
        return None


_PLAIN_STATEMENT = re.compile(
    r"\s*(?:(?:import|from|def|class|for|while|if|with|try|del|pass|return|raise|global|nonlocal|assert|break|continue|async)\b"
    r"|[A-Za-z_][\w.]*(?:\[[^\[\]=]*\])?\s*(?:[-+*/%&|^@]|//|\*\*|>>|<<)?=(?!=))"
)


def _statement_code(code_text, filename):
    """The code of a one-line cell that plainly is one statement (an assignment, or one starting with a
    statement keyword; no ``;``), compiled once and directly; None otherwise. Such a cell has no value, so the
    general path would only parse it to find that out, after a failed expression compile."""
    if ";" in code_text or _PLAIN_STATEMENT.match(code_text) is None:
        return None
    return compile(code_text, filename, "exec", _TLA_FLAG, dont_inherit=True)


def _execute(source, filename, globals_, locals_=None, line_offset=0, register=True, want_value=True):
    """Run a cell's source (magics included); return its last expression's value or _NO_VALUE."""
    code_text = transform(source)
    if register:
        _register_source(filename, source)
    if want_value and not line_offset and "\n" not in code_text.strip() and "\\" not in code_text:
        statement = _statement_code(code_text, filename)
        if statement is not None:
            _run_code(statement, globals_, locals_)
            return _NO_VALUE
        code = _expression_code(code_text, filename)
        if code is not None:
            return _run_code(code, globals_, locals_)
    try:
        tree = compile(code_text, filename, "exec", _ast.PyCF_ONLY_AST | _TLA_FLAG, dont_inherit=True)
    except SyntaxError as exc:
        if line_offset and exc.lineno is not None:
            exc.lineno += line_offset
            exc.text = linecache.getline(filename, exc.lineno) or exc.text
        raise
    body = tree.body
    keep_value = (want_value and bool(body) and isinstance(body[-1], _ast.Expr)
                  and not _ends_with_semicolon(code_text.split("\n"), body[-1]))
    if line_offset:
        import ast

        ast.increment_lineno(tree, line_offset)
    last = body.pop() if keep_value else None
    if body:
        module = _ast.Module(body=body, type_ignores=[])
        _run_code(compile(module, filename, "exec", _TLA_FLAG, dont_inherit=True), globals_, locals_)
    if last is None:
        return _NO_VALUE
    expression = _ast.Expression(body=last.value)
    return _run_code(compile(expression, filename, "eval", _TLA_FLAG, dont_inherit=True), globals_, locals_)


def _is_runner_file(filename):
    return filename.endswith(".py") and os.path.dirname(os.path.abspath(filename)) == _RUNNER_DIR


def _is_plumbing(filename):
    return filename in _PLUMBING_FILES or filename.startswith(_PLUMBING_DIRS)


def _strip_runner_frames(stack):
    import traceback

    kept = []
    dropping = True
    for frame in stack:
        if _is_runner_file(frame.filename):
            dropping = True
            continue
        if dropping and _is_plumbing(frame.filename):
            continue
        dropping = False
        kept.append(frame)
    return traceback.StackSummary.from_list(kept)


def _clean_traceback(te, seen=None):
    seen = set() if seen is None else seen
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = _strip_runner_frames(te.stack)
    for linked in (te.__cause__, te.__context__):
        if linked is not None:
            _clean_traceback(linked, seen)
    for nested in getattr(te, "exceptions", None) or ():
        _clean_traceback(nested, seen)


def error_fields(exc):
    """ename, evalue and traceback lines for exc, with the runner's own frames left out."""
    ename = type(exc).__name__
    try:
        evalue = str(exc)
    except Exception:
        evalue = "<exception str() failed>"
    try:
        import traceback

        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        _clean_traceback(te)
        lines = "".join(te.format()).rstrip("\n").split("\n")
    except Exception:
        lines = ["%s: %s" % (ename, evalue)]
    return {"ename": ename, "evalue": evalue, "traceback": lines}

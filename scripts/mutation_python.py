"""Mutation testing of a pure Python runner module (standard library only, Python 3.8+).

    python3 scripts/mutation_python.py MODULE.py REPORT.json TEST.py...

Makes one mutant per change a careful reviewer would ask a test to notice (a comparison
flipped, a condition forced, a statement dropped, an operator, string or method swapped:
Stryker's mutators as they apply to Python), runs the given unittest files against each in a forked child with the mutant
loaded in place of the module, and writes a report shaped like Stryker's JSON report
(`files[MODULE].mutants[]` with `mutatorName`, `replacement`, 1-based `location` and
`status`), so `scripts/mutation.mjs` scores it with the same rules and equivalents list.
"""

import ast
import bisect
import io
import json
import os
import signal
import sys
import time
import types
import unittest

TIMEOUT_FLOOR_S = 1.5
TIMEOUT_FACTOR = 20
CONCURRENCY = 2

_COMPARE_SWAPS = {
    ast.Lt: ["<=", ">="], ast.LtE: ["<", ">"], ast.Gt: [">=", "<="], ast.GtE: [">", "<"],
    ast.Eq: ["!="], ast.NotEq: ["=="], ast.In: ["not in"], ast.NotIn: ["in"], ast.Is: ["is not"], ast.IsNot: ["is"],
}
_COMPARE_TEXT = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}
_ARITHMETIC = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*"),
               ast.FloorDiv: ("//", "*"), ast.Mod: ("%", "*")}
_METHOD_SWAPS = {"startswith": "endswith", "endswith": "startswith", "lstrip": "rstrip", "rstrip": "lstrip",
                 "search": "match", "match": "search", "lower": "upper", "upper": "lower", "append": "remove"}
_STRIPPING = {"strip", "lstrip", "rstrip", "lower", "upper"}


class Source:
    """A module's text with conversions between AST positions (line, UTF-8 byte column) and offsets."""

    def __init__(self, text):
        self.text = text
        self.lines = text.split("\n")
        self.starts = []
        offset = 0
        for line in self.lines:
            self.starts.append(offset)
            offset += len(line) + 1

    def offset(self, line, byte_col):
        """The character offset of an AST position."""
        return self.starts[line - 1] + len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8"))

    def position(self, offset):
        """The 1-based line and column of a character offset."""
        line = bisect.bisect_right(self.starts, offset) - 1
        return {"line": line + 1, "column": offset - self.starts[line] + 1}

    def start(self, node):
        return self.offset(node.lineno, node.col_offset)

    def end(self, node):
        return self.offset(node.end_lineno, node.end_col_offset)


def _is_docstring(node, parent):
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and isinstance(parent, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and parent.body and parent.body[0] is node)


def _gap_operator(source, left_end, right_start, operator):
    """The span of an operator written between two operands (parentheses and spaces around it)."""
    gap = source.text[left_end:right_start]
    words = operator.split()
    index = 0
    while True:
        found = gap.find(words[0], index)
        if found < 0:
            raise ValueError("operator %r not found in %r" % (operator, gap))
        before = gap[found - 1] if found > 0 else " "
        after_index = found + len(words[0])
        after = gap[after_index] if after_index < len(gap) else " "
        if not words[0][0].isalpha() or (not before.isalnum() and not after.isalnum()):
            break
        index = found + 1
    end = found + len(words[0])
    if len(words) == 2:
        end = gap.index(words[1], end) + len(words[1])
    return left_end + found, left_end + end


def mutants_of(text):
    """Every mutant of a module's source: dicts of mutator, start and end offsets and replacement."""
    source = Source(text)
    tree = ast.parse(text)
    parents = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    found = []

    def add(mutator, start, end, replacement):
        found.append({"mutator": mutator, "start": start, "end": end, "replacement": replacement})

    def add_within(mutator, node, start, end, replacement):
        """A mutant of part of a node, reported as the whole node rewritten (as Stryker reports them)."""
        node_start, node_end = source.start(node), source.end(node)
        add(mutator, node_start, node_end, source.text[node_start:start] + replacement + source.text[end:node_end])

    def node_span(node):
        return source.start(node), source.end(node)

    def force(condition):
        start, end = node_span(condition)
        add("ConditionalExpression", start, end, "True")
        add("ConditionalExpression", start, end, "False")

    for node in ast.walk(tree):
        parent = parents.get(node)
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            force(node.test)
        elif isinstance(node, ast.comprehension):
            for condition in node.ifs:
                force(condition)
        elif isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                start, end = _gap_operator(source, source.end(left), source.start(right), _COMPARE_TEXT[type(op)])
                for replacement in _COMPARE_SWAPS[type(op)]:
                    add_within("EqualityOperator", node, start, end, replacement)
                left = right
        elif isinstance(node, ast.BoolOp):
            text_op = "and" if isinstance(node.op, ast.And) else "or"
            for left, right in zip(node.values, node.values[1:]):
                start, end = _gap_operator(source, source.end(left), source.start(right), text_op)
                add_within("LogicalOperator", node, start, end, "or" if text_op == "and" else "and")
            if not isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.comprehension)):
                force(node)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add_within("BooleanLiteral", node, source.start(node), source.start(node.operand), "")
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            written, replacement = _ARITHMETIC[type(node.op)]
            is_format = isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr))
            if not is_format:
                start, end = _gap_operator(source, source.end(node.left), source.start(node.right), written)
                add_within("ArithmeticOperator", node, start, end, replacement)
        elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITHMETIC:
            written, replacement = _ARITHMETIC[type(node.op)]
            start, end = _gap_operator(source, source.end(node.target), source.start(node.value), written + "=")
            add_within("AssignmentOperator", node, start, end, replacement + "=")
        elif isinstance(node, ast.Constant) and not isinstance(parent, ast.JoinedStr):
            start, end = node_span(node)
            if isinstance(node.value, bool):
                add("BooleanLiteral", start, end, repr(not node.value))
            elif isinstance(node.value, str) and not (isinstance(parent, ast.Expr) and _is_docstring(parent, parents.get(parent))):
                add("StringLiteral", start, end, '""' if node.value else '"Stryker was here!"')
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            attr_end = source.end(node.func)
            attr_start = attr_end - len(name)
            if name in _METHOD_SWAPS:
                add_within("MethodExpression", node, attr_start, attr_end, _METHOD_SWAPS[name])
            if name in _STRIPPING and not node.args:
                add("MethodExpression", source.start(node), source.end(node), source.text[source.start(node.func.value):source.end(node.func.value)])
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom, ast.Pass)):
            if _is_docstring(node, parent):
                continue
            is_elif = isinstance(parent, ast.If) and parent.orelse == [node] and isinstance(node, ast.If) \
                and source.text[source.start(node):source.start(node) + 2] != "if"
            if isinstance(node, (ast.Break, ast.Continue)):
                start, end = node_span(node)
                add("StatementSwap", start, end, "continue" if isinstance(node, ast.Break) else "break")
            if not is_elif and not isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                start, end = node_span(node)
                add("BlockStatement", start, end, "pass")
    found.sort(key=lambda mutant: (mutant["start"], mutant["end"], mutant["mutator"], mutant["replacement"]))
    return source, found


def _load_tests(test_files):
    """The test modules, loaded once (a suite empties itself as it runs, so each run makes its own)."""
    modules = []
    for index, path in enumerate(test_files):
        name = "mutation_tests_%d" % index
        module = types.ModuleType(name)
        module.__file__ = os.path.abspath(path)
        sys.path.insert(0, os.path.dirname(module.__file__))
        sys.modules[name] = module
        with open(path, encoding="utf-8") as handle:
            exec(compile(handle.read(), module.__file__, "exec"), module.__dict__)
        modules.append(module)
    return modules


def _target_module(path):
    """The loaded module whose file is the mutated one (the tests import it while loading)."""
    wanted = os.path.realpath(path)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and os.path.realpath(file) == wanted:
            return module
    raise SystemExit("mutation: the tests did not load %s" % path)


def _install(module, text, path):
    """Run mutated source as the module (a fresh namespace, so a dropped assignment leaves no old
    value behind) and rebind the names other modules copied from it."""
    before = dict(module.__dict__)
    namespace = module.__dict__
    namespace.clear()
    namespace.update({name: value for name, value in before.items() if name.startswith("__") and name.endswith("__")})
    exec(compile(text, path, "exec"), namespace)
    replaced = {(name, id(value)): namespace.get(name) for name, value in before.items() if namespace.get(name) is not value}
    for other in list(sys.modules.values()):
        holder = getattr(other, "__dict__", None)
        if other is module or holder is None:
            continue
        for name, value in list(holder.items()):
            if (name, id(value)) in replaced:
                holder[name] = replaced[(name, id(value))]


def _run_suite(test_modules):
    loader = unittest.TestLoader()
    suite = unittest.TestSuite(loader.loadTestsFromModule(module) for module in test_modules)
    result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0, failfast=True).run(suite)
    return result.testsRun > 0 and result.wasSuccessful()


def _child(module, text, path, test_modules):
    os.setpgid(0, 0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        _install(module, text, path)
        code = 0 if _run_suite(test_modules) else 1
    except BaseException:
        code = 1
    os._exit(code)


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    module_path, report_path, test_files = argv[0], argv[1], argv[2:]
    with open(module_path, encoding="utf-8") as handle:
        original = handle.read()
    source, mutants = mutants_of(original)
    test_modules = _load_tests(test_files)
    module = _target_module(module_path)
    began = time.monotonic()
    if not _run_suite(test_modules):
        raise SystemExit("mutation: the tests fail on the unmutated %s" % module_path)
    timeout = max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * (time.monotonic() - began))
    pending = list(enumerate(mutants))
    running = {}
    statuses = {}
    while pending or running:
        while pending and len(running) < CONCURRENCY:
            index, mutant = pending.pop(0)
            text = original[:mutant["start"]] + mutant["replacement"] + original[mutant["end"]:]
            try:
                compile(text, module_path, "exec")
            except SyntaxError:
                statuses[index] = "CompileError"
                continue
            pid = os.fork()
            if pid == 0:
                _child(module, text, module_path, test_modules)
            running[pid] = (index, time.monotonic() + timeout)
        if not running:
            continue
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for child, (index, deadline) in list(running.items()):
                if now > deadline:
                    try:
                        os.killpg(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    os.waitpid(child, 0)
                    del running[child]
                    statuses[index] = "Timeout"
            time.sleep(0.005)
            continue
        index, _ = running.pop(pid)
        statuses[index] = "Survived" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else "Killed"
    relative = os.path.relpath(os.path.realpath(module_path))
    report = {"files": {relative: {"mutants": [
        {"id": str(index), "mutatorName": mutant["mutator"], "replacement": mutant["replacement"],
         "location": {"start": source.position(mutant["start"]), "end": source.position(mutant["end"])},
         "status": statuses[index]}
        for index, mutant in enumerate(mutants)]}}}
    with open(report_path, "w", encoding="utf-8") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    main(sys.argv[1:])

"""The magic transformer against Python's own tokenizer: generated programs full of strings,
f-strings, brackets, comments and continuations, with magic lines placed where a statement
starts. Where a logical line starts is what the transformer's scanner must know; the tokenizer
is the reference, and the transformed program must be the program with exactly its magic lines
rewritten."""

import io
import random
import sys
import tokenize
import unittest
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner_package  # noqa: E402

runner = runner_package.load()
transform = runner.transform
Scanner = runner.module("transform")._Scanner

PROGRAMS = 500
SEED = 20261204

PREFIXES = ["", "", "r", "R", "b", "rb", "Rb", "bR", "u", "f", "f", "F", "rf", "fR", "Rf", "br"]
QUOTES = ["'", '"', "'''", '"""']
TEXT_PIECES = ["abc", " ", "%pwd", "!ls", "#", "(", "[", ")", "]", "'", '"', ":", "$x", "\\\\", "\\n", "%d"]
FORMAT_PIECES = ["{x}", "{{", "}}", "{x!r}", "{x:>10}", "{x:{w}}", "{x:{w}.{p}}", "{ {'a': 1}['a'] }",
                 '{ {"a": 1}["a"] }', "{x:%H:%M}", "{'#'}", "{x!r:^{w}}", "{(x)}", "{[x][0]}", "{x}}}", "{{{x}",
                 "{x:(>10}", "{x:[^4}", "{x:'^3}", '{x:"^3}', "{x:#x}", "{x:{w}(}", "{x!r:)>3}", "{x:{w}{p}[}",
                 "{x!s:{{}", "{x:}}", "{x::>3}", "{d[1:2]}", "{x!=2}", "{x=}"]
MAGICS = [
    ("%pwd", "__veyyon__.line_magic('pwd', '')"),
    ("%cd /tmp", "__veyyon__.line_magic('cd', '/tmp')"),
    ("!ls -la", "__veyyon__.system('ls -la')"),
    ("!!ls", "__veyyon__.getoutput('ls')"),
    ("out = !echo hi", "out = __veyyon__.getoutput('echo hi')"),
    ("here = %pwd", "here = __veyyon__.line_magic('pwd', '')"),
    ("%time f(x)", "__veyyon__.line_magic('time', 'f(x)')"),
]


def string_literal(rng, multiline):
    """A string literal of any prefix and quote, its content made of the scanner's special characters."""
    prefix = rng.choice(PREFIXES)
    quote = rng.choice(QUOTES)
    if "f" in prefix.lower() and multiline and rng.random() < 0.5:
        quote = quote[0] * 3
    if not multiline:
        quote = quote[0]
    pieces = []
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if "f" in prefix.lower() and roll < 0.35:
            pieces.append(rng.choice(FORMAT_PIECES + (["{(x,\n w)}", "{x:(\n}", "{x:{w}\n}"] if len(quote) == 3 else [])))
        elif roll < 0.45:
            pieces.append("\\" + quote[0])
        elif roll < 0.65 and multiline:
            pieces.append(rng.choice(["\n", "\n%pwd\n", "\\\n", "\n!ls\n", "\n%%bash\n", "\\\n%pwd"]))
        else:
            pieces.append(rng.choice(TEXT_PIECES))
    return prefix + quote + "".join(pieces) + quote


def expression(rng, depth=0):
    """An expression, often over several physical lines."""
    roll = rng.random()
    if roll < 0.3 or depth > 2:
        return rng.choice([string_literal(rng, True), "x", "10 % 3", "a %b", "x != 2", "{}", "[]"])
    if roll < 0.45:
        return string_literal(rng, False) + " " + string_literal(rng, False)
    if roll < 0.6:
        opener, closer = rng.choice([("(", ")"), ("[", "]"), ("{", "}")])
        items = [expression(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        if opener == "{":
            items = ["%s: %s" % (string_literal(rng, False), item) for item in items]
        separator = rng.choice([", ", ",\n", ",  # ( [ ' \"\n", ",\n\n", ",\n%pwd,\n" if depth < 0 else ",\n"])
        return opener + rng.choice(["", "\n"]) + separator.join(items) + rng.choice(["", "\n", ",\n"]) + closer
    if roll < 0.7:
        return expression(rng, depth + 1) + " + \\\n    " + expression(rng, depth + 1)
    if roll < 0.8:
        return "(x\n%b)"
    if roll < 0.9:
        return rng.choice(['1 if"{" else 2', 'x if"(" in"[" else 3', "not\"'\"", 'x or"""\n%pwd"""', 'x and"{"'])
    return "x[\n  1:\n  2]"


def statement(rng, indent):
    """One statement's physical lines, without magics."""
    roll = rng.random()
    if roll < 0.55:
        return [indent + line if index == 0 else line
                for index, line in enumerate(("v = " + expression(rng)).split("\n"))]
    if roll < 0.65:
        return [indent + "# " + "".join(rng.choice(["(", "'", '"', "[", "{", "x", "\\"]) for _ in range(4))]
    if roll < 0.72:
        return [rng.choice(["", "   "])]
    if roll < 0.8:
        return [indent + "x = 10 \\", indent + "    % 3"]
    return [indent + "if x:", indent + "    pass"] + statement(rng, indent + "    ")


def valid(lines):
    try:
        compile("\n".join(lines) + "\n", "<generated>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def program(rng):
    """A valid program's lines, with the lines that are magics (and their rewriting) marked."""
    lines = []
    magics = {}
    for _ in range(rng.randint(1, 12)):
        indent = rng.choice(["", "", "    "])
        if rng.random() < 0.3:
            magic, rewritten = rng.choice(MAGICS)
            candidate = [indent + "if x:", indent + "    " + magic] if indent else [magic]
            placeholder = [indent + "if x:", indent + "    pass"] if indent else ["pass"]
            if valid(lines + placeholder):
                magics[len(lines) + len(candidate) - 1] = (indent + "    " if indent else "") + rewritten
                lines.extend(candidate)
            continue
        for _attempt in range(20):
            candidate = statement(rng, indent)
            if indent:
                candidate = [indent[:-4] + "if x:"] + candidate
            if valid(lines + candidate):
                lines.extend(candidate)
                break
    return lines, magics


def statement_starts(source):
    """For each physical line, whether a logical line starts there, by Python's tokenizer."""
    count = source.count("\n") + 1
    ends = set()
    depth = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
            ends.add(token.start[0])
    return [row == 1 or (row - 1) in ends for row in range(1, count + 1)]


def _fixtures():
    rng = random.Random(SEED)
    made = []
    while len(made) < PROGRAMS:
        lines, magics = program(rng)
        if not lines:
            continue
        plain = [line[:len(line) - len(line.lstrip())] + "pass" if index in magics else line
                 for index, line in enumerate(lines)]
        source = "\n".join(plain)
        made.append((lines, magics, plain, statement_starts(source)))
    return made


FIXTURES = _fixtures()


class ScannerAgainstTokenizerTest(unittest.TestCase):
    def test_statement_starts_match_the_tokenizer(self):
        for lines, _magics, plain, starts in FIXTURES:
            scanner = Scanner()
            seen = []
            for line in plain:
                seen.append(scanner.at_statement_start())
                scanner.feed(line)
            self.assertEqual(seen, starts, "\n".join(plain))

    def test_fixtures_cover_every_kind_of_line(self):
        starts = [start for *_rest, line_starts in FIXTURES for start in line_starts]
        magic_lines = sum(len(magics) for _lines, magics, _plain, _starts in FIXTURES)
        inside_strings = sum(1 for lines, magics, *_rest in FIXTURES for index, line in enumerate(lines)
                             if index not in magics and line.lstrip().startswith(("%pwd", "!ls", "%%bash")))
        self.assertGreater(starts.count(False), 200)
        self.assertGreater(magic_lines, 100)
        self.assertGreater(inside_strings, 30)


class TransformAgainstConstructionTest(unittest.TestCase):
    def test_exactly_the_magic_lines_are_rewritten(self):
        for lines, magics, _plain, _starts in FIXTURES:
            expected = [magics.get(index, line) for index, line in enumerate(lines)]
            self.assertEqual(transform("\n".join(lines)).split("\n"), expected, "\n".join(lines))

    def test_crlf_programs(self):
        for lines, magics, _plain, _starts in FIXTURES[:60]:
            expected = [magics[index] if index in magics else line + "\r"
                        for index, line in enumerate(lines)]
            got = transform("\r\n".join(lines) + "\r").split("\n")
            self.assertEqual(got, expected, "\n".join(lines))


if __name__ == "__main__":
    unittest.main()

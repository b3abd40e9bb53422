"""The magic transformer's rules, one row each: what a magic, shell or cell-magic line becomes,
where the scanner sees a statement start in code the tokenizer of this Python cannot check
(PEP 701 f-strings, broken code), and how shell text splits into literals and fields."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner_package  # noqa: E402

runner = runner_package.load()
transform = runner.transform
split_interpolation = runner.split_interpolation

PWD = "__veyyon__.line_magic('pwd', '')"

# Whole cells and what they become.
REWRITES = [
    ("%", "__veyyon__.line_magic('', '')"),
    ("%1x", "__veyyon__.line_magic('1x', '')"),
    ("% pwd ", PWD),
    ("%cd  /tmp  ", "__veyyon__.line_magic('cd', '/tmp')"),
    ("%timeit f($x)", "__veyyon__.line_magic('timeit', 'f($x)')"),
    ("%cd $d", "__veyyon__.line_magic('cd', __veyyon__.expand(((lambda: (d), '$d', '', ''),)))"),
    ("%cd a\\", "__veyyon__.line_magic('cd', 'a\\\\')"),
    ("%cd a\\\nb", "__veyyon__.line_magic('cd', 'ab')\n"),
    ("%cd a\\\r\nb\r\nx = 1", "__veyyon__.line_magic('cd', 'ab')\n\nx = 1"),
    ("%pwd\r", PWD),
    ("  \n%pwd", "  \n" + PWD),
    ("\t%pwd", "\t" + PWD),
    ("!  ls  ", "__veyyon__.system('ls')"),
    ("!!  ls  ", "__veyyon__.getoutput('ls')"),
    ("!echo $x", "__veyyon__.system(__veyyon__.expand(('echo ', (lambda: (x), '$x', '', ''),)))"),
    ("!!echo {x}", "__veyyon__.getoutput(__veyyon__.expand(('echo ', (lambda: (x), '{x}', '', ''),)))"),
    ("x = ! ls ", "x = __veyyon__.getoutput('ls')"),
    ("x = !echo !x", "x = __veyyon__.getoutput('echo !x')"),
    ("x = %cd /tmp", "x = __veyyon__.line_magic('cd', '/tmp')"),
    ("x=%pwd", "x = " + PWD),
    ("x = !echo $y", "x = __veyyon__.getoutput(__veyyon__.expand(('echo ', (lambda: (y), '$y', '', ''),)))"),
    ("x = !echo a \\\n b", "x = __veyyon__.getoutput('echo a  b')\n"),
    ("d['k'] = !ls", "d['k'] = __veyyon__.getoutput('ls')"),
    ("a.b, c = %who_ls", "a.b, c = __veyyon__.line_magic('who_ls', '')"),
    ("x = 5 % 2", "x = 5 % 2"),
    ("x = y == !z", "x = y == !z"),
    ("1x = !ls", "1x = !ls"),
    ("x = 1\n%%bash -x", "x = 1\n__veyyon__.misplaced_cell_magic('bash')"),
    ("x = 1\n%%", "x = 1\n__veyyon__.misplaced_cell_magic('')"),
    ("if x:\n    %%bash", "if x:\n    __veyyon__.misplaced_cell_magic('bash')"),
    ("%%bash\necho 1", "__veyyon__.cell_magic('bash', '', 'echo 1')\n"),
    ("  %%bash  -x  \necho", "__veyyon__.cell_magic('bash', '-x', 'echo')\n"),
    ("  \n\t\n%%bash\necho", "\n\n__veyyon__.cell_magic('bash', '', 'echo')\n"),
    ("%%\nbody", "__veyyon__.cell_magic('', '', 'body')\n"),
    ("%%1\nbody", "__veyyon__.cell_magic('', '1', 'body')\n"),
    ("%%! -x\nls", "__veyyon__.cell_magic('!', '-x', 'ls')\n"),
    ("x = 1\n%%1x", "x = 1\n__veyyon__.misplaced_cell_magic('')"),
    ("%%1x\nbody", "__veyyon__.cell_magic('', '1x', 'body')\n"),
    ("%cd a\\\r\nb\\\r\nc", "__veyyon__.line_magic('cd', 'abc')\n\n"),
    ("%%!\nls", "__veyyon__.cell_magic('!', '', 'ls')\n"),
    ("%%bash $x\necho", "__veyyon__.cell_magic('bash', __veyyon__.expand(((lambda: (x), '$x', '', ''),)), 'echo')\n"),
    ("%%time $x\npass", "__veyyon__.cell_magic('time', '$x', 'pass')\n"),
    ("%%bash\r\necho\r\n", "__veyyon__.cell_magic('bash', '', 'echo\\r\\n')\n\n"),
    ("x = 1\n\n%%bash", "x = 1\n\n__veyyon__.misplaced_cell_magic('bash')"),
]

# Code before a `%pwd` line, and whether that line starts a statement (so it is rewritten).
STATEMENT_STARTS = [
    ('v = f"{"("}"', True),
    ('v = f"{x:{"("}}"', True),
    ("v = f'{'{'}'", True),
    ('v = f"{"\\""}" + (', False),
    ('v = f"""{x:{w}(}"""', True),
    ('v = f"""{x:(}"""', True),
    ('v = f"""{x!r:[^{w}}"""', True),
    ('v = f"""{x:#}"""', True),
    ('v = f"""{{("""', True),
    ('v = f"""}}("""', True),
    ('v = f"""{ {"a": (1)}["a"] }"""', True),
    ('v = f"""{x}(""" + (', False),
    ('v = f"""{(x,', False),
    ('v = f"""{x:\n}"""', True),
    ('v = f"""\n{x:(}\n"""', True),
    ('v = rf"""{x:(}\\\\"""', True),
    ('v = Rb"""{x:(}""" + f"""{y:(}"""', True),
    ('v = if"{("', True),
    ('v = x if"{(" else 2', True),
    ('v = x or"""{("""', True),
    ('v = t"{x:(}"', True),
    ('v = T"""{x:(}"""', True),
    ('v = f"""{x:(}""" if x else ("', False),
    ("s = 'it", True),
    ("s = 'it\\", False),
    ('s = """unclosed', False),
    ("s = 'a' + ('b", False),
    ("x = (1 # )", False),
    ("x = ((1))) + 2", True),
    ("x = 1 \\", False),
    ("x = '\\\\' \\", False),
    ("x = 1 # \\", True),
    ("x = f'{1}' \\", False),
    ("s = 'a\\'b", True),
    ("s = 'a\\b", True),
    ('v = f"""{x:>\n10}"""', True),
    ('v = f"{x:{"}"}}" + (', False),
    ('v = """"a"""', True),
    ('v = """a"\\"""" + (', False),
    ('v = """{("""', True),
    ('v = f"{ {"k": 1}["("] }"', True),
    ('v = f"{ {"k": (1)}["("] }"', True),
    ("x = ((1)", False),
    ('v = f"""{x:>(}"""', True),
    ('v = f"{d[1:"}"]}" + (', False),
    ('f"{"("}" if x else b', True),
    ('v = F"{"("}"', True),
]

# Shell text and its parts: literal strings and (expression, raw text, conversion, spec) fields.
SPLITS = [
    ("", []),
    ("$", ["$"]),
    ("$1 $", ["$1 $"]),
    ("a$", ["a$"]),
    ("$x$y", [("x", "$x", "", ""), ("y", "$y", "", "")]),
    ("$x.y.", [("x.y", "$x.y", "", ""), "."]),
    ("a 'b $x' \"$y\"", ["a 'b $x' \"", ("y", "$y", "", ""), '"']),
    ("\"it's $x\"", ["\"it's ", ("x", "$x", "", ""), '"']),
    ("'a\"b' $x", ["'a\"b' ", ("x", "$x", "", "")]),
    ("\\$x", ["\\$x"]),
    ("\\'$x'", ["\\'", ("x", "$x", "", ""), "'"]),
    ("'\\'$x", ["'\\'", ("x", "$x", "", "")]),
    ("$$x", ["$x"]),
    ("{x!r}", [("x", "{x!r}", "r", "")]),
    ("{x!s} {x!a}", [("x", "{x!s}", "s", ""), " ", ("x", "{x!a}", "a", "")]),
    ("{x!z}", ["{x!z}"]),
    ("{x:>5}", [("x", "{x:>5}", "", ">5")]),
    ("{x!r:>5}", [("x", "{x!r:>5}", "r", ">5")]),
    ("{a[1:2]}", [("a[1:2]", "{a[1:2]}", "", "")]),
    ("{d['a:b']}", [("d['a:b']", "{d['a:b']}", "", "")]),
    ("{d[\"a!b\"]}", [("d[\"a!b\"]", "{d[\"a!b\"]}", "", "")]),
    ("{f(')')}", [("f(')')", "{f(')')}", "", "")]),
    ("{x != 1}", [("x != 1", "{x != 1}", "", "")]),
    ("{(x)!r}", [("(x)", "{(x)!r}", "r", "")]),
    ("{}", ["{}"]),
    ("{ }", ["{ }"]),
    ("{1 +}", ["{1 +}"]),
    ("{x", ["{x"]),
    ("{xy", ["{xy"]),
    ("$ x", ["$ x"]),
    ("{'a:b'}", [("'a:b'", "{'a:b'}", "", "")]),
    ("{\"a'b:c\"}", [("\"a'b:c\"", "{\"a'b:c\"}", "", "")]),
    ("{'a'!r}", [("'a'", "{'a'!r}", "r", "")]),
    ("{x}}", [("x", "{x}", "", ""), "}"]),
    ("a}}b a}b", ["a}b a}b"]),
    ("{{x}}", ["{x}"]),
    ("{ {'a': 1}['a'] }", [(" {'a': 1}['a'] ", "{ {'a': 1}['a'] }", "", "")]),
    ("{x} {y", [("x", "{x}", "", ""), " {y"]),
    ("{x}{{", [("x", "{x}", "", ""), "{"]),
    ("'{x}'", ["'", ("x", "{x}", "", ""), "'"]),
]


class RewriteTest(unittest.TestCase):
    def test_rewrites(self):
        for source, expected in REWRITES:
            self.assertEqual(transform(source), expected, repr(source))


class StatementStartTest(unittest.TestCase):
    def test_statement_starts(self):
        for before, starts in STATEMENT_STARTS:
            lines = transform(before + "\n%pwd").split("\n")
            self.assertEqual(lines[-1] == PWD, starts, repr(before))
            self.assertEqual(lines[:-1], before.split("\n"), repr(before))


class SplitTest(unittest.TestCase):
    def test_splits(self):
        for text, parts in SPLITS:
            self.assertEqual(split_interpolation(text), parts, repr(text))


if __name__ == "__main__":
    unittest.main()

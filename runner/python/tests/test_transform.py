"""Unit tests for the runner's pure parts: the magic transformer, interpolation, protocol parsing, frames."""

import ast
import importlib.util
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner_package  # noqa: E402

runner = runner_package.load()
transform = runner.transform


def run_transformed(source, namespace=None):
    """Execute transformed source with the runner module standing in for __veyyon__."""
    namespace = {} if namespace is None else namespace
    namespace.setdefault("__veyyon__", runner)
    exec(compile(transform(source), "<test>", "exec"), namespace)
    return namespace


class SyntaxFloorTest(unittest.TestCase):
    def test_runner_parses_with_python_3_8_grammar(self):
        for path in runner_package.SOURCE_FILES:
            with open(path, encoding="utf-8") as handle:
                ast.parse(handle.read(), filename=path, feature_version=(3, 8))

    def test_importing_does_not_serve(self):
        self.assertIsNone(runner._frame_fd)


class LineMagicTest(unittest.TestCase):
    def test_plain_python_is_untouched(self):
        source = "x = 10 % 3\ny = x != 2\nprint('%d' % x)\n"
        self.assertEqual(transform(source), source)

    def test_line_magic_becomes_call(self):
        self.assertEqual(transform("%pwd"), "__veyyon__.line_magic('pwd', '')")

    def test_line_magic_args_are_kept(self):
        self.assertEqual(transform("%cd /tmp/x"), "__veyyon__.line_magic('cd', '/tmp/x')")

    def test_indented_magic_keeps_indentation(self):
        out = transform("if True:\n    %cd /tmp\n    x = 1")
        self.assertEqual(out.split("\n")[1], "    __veyyon__.line_magic('cd', '/tmp')")
        ast.parse(out)

    def test_modulo_operator_is_not_a_magic(self):
        for source in ("x = a %b", "x = a % b", "y = (a\n%b)", "x = a \\\n%b"):
            self.assertEqual(transform(source), source, source)

    def test_continuation_lines_are_not_magics(self):
        source = "value = foo(1,\n%cd)\nother = [\n!x\n]"
        self.assertEqual(transform(source), source)

    def test_magic_after_closed_brackets_is_recognized(self):
        out = transform("d = {\n  'a': (1, 2),\n}\n%pwd")
        self.assertEqual(out.split("\n")[-1], "__veyyon__.line_magic('pwd', '')")

    def test_no_magic_inside_strings(self):
        cases = [
            's = """\n%cd /tmp\n!ls\n"""',
            "s = '''\n%pwd\n'''",
            "s = 'a\\\n%pwd'",
            'f = f"""{x}\n%pwd\n{ {"k": 1}["k"] }\n!ls\n"""',
            'r = r"""\\"""\n%pwd\n"""',
            "b = b'''\n!ls\n'''",
        ]
        for source in cases:
            self.assertEqual(transform(source), source, source)

    def test_magic_after_string_closes(self):
        out = transform('s = """\n%pwd\n"""\n%pwd')
        self.assertEqual(out.split("\n")[3], "__veyyon__.line_magic('pwd', '')")
        self.assertEqual(out.split("\n")[1], "%pwd")

    def test_hash_inside_string_is_not_a_comment(self):
        out = transform('s = "#(" \n%pwd')
        self.assertEqual(out.split("\n")[1], "__veyyon__.line_magic('pwd', '')")

    def test_bracket_in_comment_is_ignored(self):
        out = transform("x = 1  # (\n%pwd")
        self.assertEqual(out.split("\n")[1], "__veyyon__.line_magic('pwd', '')")

    def test_fstring_format_spec_and_nesting(self):
        source = 'v = f"{x:{w}} {d[\'k\']!r:>10}" \n%pwd'
        self.assertEqual(transform(source).split("\n")[1], "__veyyon__.line_magic('pwd', '')")

    @unittest.skipIf(sys.version_info < (3, 12), "same-quote nesting in f-strings needs Python 3.12")
    def test_pep701_nested_quotes(self):
        source = 'v = f"{"}" + f"{"%"}"}"\n%pwd'
        ast.parse(source.split("\n")[0])
        self.assertEqual(transform(source).split("\n")[1], "__veyyon__.line_magic('pwd', '')")

    def test_line_count_is_preserved(self):
        sources = [
            "%pwd\nx = 1\n!ls \\\n  -la\ny = 2",
            "%%bash\necho 1\necho 2\n",
            "\n\n%%writefile f.txt\nabc",
            "def f():\n    x = !ls\n    return x\n",
        ]
        for source in sources:
            self.assertEqual(len(transform(source).split("\n")), len(source.split("\n")), source)

    def test_crlf_lines(self):
        out = transform("x = 1\r\n%pwd\r\ny = 2")
        self.assertEqual(out.split("\n")[1], "__veyyon__.line_magic('pwd', '')")

    def test_time_arguments_are_not_interpolated(self):
        self.assertEqual(transform("%time f($x, {y})"), "__veyyon__.line_magic('time', 'f($x, {y})')")

    def test_misplaced_cell_magic(self):
        with self.assertRaises(runner.UsageError):
            run_transformed("x = 1\n%%bash")

    def test_unknown_magic_raises_usage_name_error_at_run_time(self):
        with self.assertRaises(NameError) as caught:
            run_transformed("ran = True\n%definitely_not_a_magic 1 2")
        self.assertTrue(str(caught.exception).startswith(
            "UsageError: Line magic function `%definitely_not_a_magic` not found."))

    def test_unknown_magic_runs_earlier_lines(self):
        namespace = {}
        with self.assertRaises(NameError):
            run_transformed("ran = True\n%nope", namespace)
        self.assertTrue(namespace["ran"])


class ShellTest(unittest.TestCase):
    def test_bang_becomes_system(self):
        self.assertEqual(transform("!ls -la"), "__veyyon__.system('ls -la')")

    def test_double_bang_returns_output(self):
        self.assertEqual(transform("!!ls"), "__veyyon__.getoutput('ls')")

    def test_assignment_forms(self):
        self.assertEqual(transform("files = !ls"), "files = __veyyon__.getoutput('ls')")
        self.assertEqual(transform("here = %pwd"), "here = __veyyon__.line_magic('pwd', '')")
        self.assertEqual(transform("a.b[0] = !echo"), "a.b[0] = __veyyon__.getoutput('echo')")
        self.assertEqual(transform("    x, y = %who_ls"), "    x, y = __veyyon__.line_magic('who_ls', '')")

    def test_comparisons_are_not_assignments(self):
        for source in ("x == !y", "x != 3", "x = y != z", "x =y%z"):
            self.assertEqual(transform(source), source)

    def test_backslash_continuation_joins_the_command(self):
        self.assertEqual(transform("!echo a \\\n  b"), "__veyyon__.system('echo a   b')\n")

    def test_interpolation_evaluates_fields(self):
        namespace = {"x": 41, "name": "py"}
        code = transform("!echo $x {x + 1} $$HOME {name!r:>6}")
        self.assertIn("__veyyon__.expand(", code)
        parts = eval(code.replace("__veyyon__.system", "").strip(), {"__veyyon__": runner, **namespace})
        self.assertEqual(parts, "echo 41 42 $HOME   'py'")

    def test_interpolation_sees_function_locals(self):
        namespace = run_transformed("def f(n):\n    out = !echo {n * 2}\n    return out\n", {})
        calls = []
        namespace["__veyyon__"] = type("Fake", (), {
            "getoutput": staticmethod(lambda cmd: calls.append(cmd)),
            "expand": staticmethod(runner.expand),
        })
        namespace["f"](21)
        self.assertEqual(calls, ["echo 42"])


class InterpolationTest(unittest.TestCase):
    def test_fields_and_literals(self):
        self.assertEqual(runner.split_interpolation("a $b {c} d"),
                         ["a ", ("b", "$b", "", ""), " ", ("c", "{c}", "", ""), " d"])

    def test_escapes(self):
        self.assertEqual(runner.split_interpolation("$$X {{y}}"), ["$X {y}"])

    def test_single_quotes_protect_dollar(self):
        self.assertEqual(runner.split_interpolation("awk '{print $1}' f"), ["awk '{print $1}' f"])

    def test_invalid_brace_content_stays_literal(self):
        self.assertEqual(runner.split_interpolation("find . -exec wc {} \\;"), ["find . -exec wc {} \\;"])

    def test_dotted_names(self):
        self.assertEqual(runner.split_interpolation("$a.b."), [("a.b", "$a.b", "", ""), "."])

    def test_failed_field_keeps_raw_text(self):
        def boom():
            raise NameError("no")

        self.assertEqual(runner.expand(("x ", (boom, "$HOME", "", ""), " y")), "x $HOME y")


class CellMagicTest(unittest.TestCase):
    def test_cell_magic_call(self):
        out = transform("%%bash\necho $x\necho 2")
        self.assertEqual(out.split("\n")[0], "__veyyon__.cell_magic('bash', '', 'echo $x\\necho 2')")

    def test_cell_magic_after_blank_lines(self):
        out = transform("\n%%capture out\nprint(1)")
        self.assertEqual(out.split("\n")[1], "__veyyon__.cell_magic('capture', 'out', 'print(1)')")

    def test_timeit_line_is_not_interpolated(self):
        out = transform("%%timeit -n1 {x}\npass")
        self.assertEqual(out, "__veyyon__.cell_magic('timeit', '-n1 {x}', 'pass')\n")

    def test_unknown_cell_magic(self):
        with self.assertRaises(NameError) as caught:
            run_transformed("%%nosuch\nbody")
        self.assertTrue(str(caught.exception).startswith("UsageError: Cell magic `%%nosuch` not found."))


class ProtocolTest(unittest.TestCase):
    def test_execute_request(self):
        kind, request = runner.classify_line(
            b'{"id":"a","code":"1","silent":true,"storeHistory":false,"cwd":"/","env":{"K":"V","U":null}}')
        self.assertEqual(kind, "execute")
        self.assertEqual((request.id, request.code, request.silent, request.store_history), ("a", "1", True, False))
        self.assertEqual(request.env, {"K": "V", "U": None})

    def test_defaults(self):
        kind, request = runner.classify_line(b'{"id":"a","code":""}')
        self.assertEqual((request.silent, request.store_history, request.cwd, request.env), (False, True, None, None))

    def test_exit_and_bridge_result(self):
        self.assertEqual(runner.classify_line(b'{"type":"exit"}'), ("exit", None))
        kind, message = runner.classify_line(b'{"type":"bridge_result","callId":"c1","ok":true,"value":3}')
        self.assertEqual((kind, message["value"]), ("bridge_result", 3))

    def test_malformed_lines(self):
        cases = [
            (b"not json", None),
            (b"[1, 2]", None),
            (b'{"code":"x"}', None),
            (b'{"id":"q","code":3}', "q"),
            (b'{"id":"q","code":"","silent":"yes"}', "q"),
            (b'{"id":"q","code":"","env":{"A":1}}', "q"),
            (b'{"id":"q","type":"launch"}', "q"),
            (b'\xff\xfe{', None),
        ]
        for line, request_id in cases:
            kind, payload = runner.classify_line(line)
            self.assertEqual(kind, "invalid", line)
            self.assertEqual(payload[0], request_id, line)
            self.assertTrue(payload[1], line)


class FrameEncodingTest(unittest.TestCase):
    def test_one_line_of_utf8(self):
        data = runner.encode_frame({"type": "stdout", "id": "a", "data": "é\n€ line"})
        self.assertTrue(data.endswith(b"\n"))
        self.assertEqual(data.count(b"\n"), 1)
        self.assertEqual(json.loads(data)["data"], "é\n€ line")

    def test_lone_surrogate_is_escaped(self):
        data = runner.encode_frame({"data": "a\ud800b"})
        data.decode("utf-8")
        self.assertIn(b"\\ud800", data)

    def test_nan_and_odd_values(self):
        data = runner.encode_frame({"bundle": {"application/json": {"x": float("nan"), "y": object}}})
        value = json.loads(data)
        self.assertIsNone(value["bundle"]["application/json"]["x"])
        self.assertIn("object", value["bundle"]["application/json"]["y"])


class BundleTest(unittest.TestCase):
    def test_plain_objects(self):
        self.assertEqual(runner.mime_bundle([1, "a"]), {"text/plain": "[1, 'a']"})

    def test_repr_methods_and_failures(self):
        class Rich:
            def _repr_html_(self):
                return "<b>x</b>"

            def _repr_markdown_(self):
                raise ValueError("nope")

            def _repr_png_(self):
                return b"\x89PNG"

            def _repr_json_(self):
                return ({"a": 1}, {"expanded": True})

            def __repr__(self):
                return "Rich()"

        bundle = runner.mime_bundle(Rich())
        self.assertEqual(bundle["text/html"], "<b>x</b>")
        self.assertNotIn("text/markdown", bundle)
        self.assertEqual(bundle["image/png"], "iVBORw==")
        self.assertEqual(bundle["application/json"], {"a": 1})
        self.assertEqual(bundle["text/plain"], "Rich()")

    def test_mimebundle_first(self):
        class Both:
            def _repr_mimebundle_(self, include=None, exclude=None):
                return {"text/html": "<i>bundle</i>", "application/vnd.custom+json": {"k": 1}}

            def _repr_html_(self):
                return "<i>method</i>"

        bundle = runner.mime_bundle(Both())
        self.assertEqual(bundle["text/html"], "<i>bundle</i>")
        self.assertEqual(bundle["application/vnd.custom+json"], {"k": 1})
        self.assertIn("text/plain", bundle)

    def test_classes_are_not_asked_for_reprs(self):
        class Shown:
            def _repr_html_(self):
                return "<p/>"

        self.assertEqual(set(runner.mime_bundle(Shown)), {"text/plain"})

    def test_failing_repr_still_gives_text(self):
        class Broken:
            def __repr__(self):
                raise RuntimeError("boom")

        self.assertIn("repr() raised RuntimeError", runner.mime_bundle(Broken())["text/plain"])


class HelpersTest(unittest.TestCase):
    def test_slist(self):
        lines = runner.SList(["a 1", "b 2", "c 3"])
        self.assertEqual(lines.n, "a 1\nb 2\nc 3")
        self.assertEqual(lines.s, "a 1 b 2 c 3")
        self.assertIs(lines.l, lines)
        self.assertEqual(lines.grep("b"), ["b 2"])
        self.assertEqual(lines.grep("b", prune=True), ["a 1", "c 3"])
        self.assertEqual(lines.grep("^2$", field=1), ["b 2"])
        self.assertEqual(lines.fields(1), ["1", "2", "3"])
        self.assertEqual(lines.fields(1, 0), ["1 a", "2 b", "3 c"])
        self.assertEqual(runner.SList([HERE, "/no/such/path"]).p[0].name, os.path.basename(HERE))

    def test_format_duration(self):
        self.assertEqual(runner.format_duration(0.00123), "1.23 ms")
        self.assertEqual(runner.format_duration(2.5), "2.5 s")
        self.assertEqual(runner.format_duration(4.2e-6), "4.2 µs")
        self.assertEqual(runner.format_duration(3e-8), "30 ns")
        self.assertEqual(runner.format_duration(125), "2min 5s")

    def test_modules_to_evict(self):
        names = ["foo", "foo.bar", "foobar", "sys", "baz.qux"]
        self.assertEqual(runner.modules_to_evict({"foo", "baz", "sys"}, names), ["foo", "foo.bar", "baz.qux"])

    def test_timeit_options(self):
        options, rest = runner._parse_timeit_options("-n 5 -r2 -q -o x = -1")
        self.assertEqual((options["number"], options["repeat"], options["quiet"], options["result"]), (5, 2, True, True))
        self.assertEqual(rest, "x = -1")
        self.assertEqual(runner._parse_timeit_options("-x")[1], "-x")

    def test_error_fields_drop_runner_frames(self):
        try:
            runner._execute("def f():\n    1/0\nf()", "<cell-test>", {})
        except ZeroDivisionError as exc:
            fields = runner.error_fields(exc)
        self.assertEqual(fields["ename"], "ZeroDivisionError")
        text = "\n".join(fields["traceback"])
        self.assertIn('File "<cell-test>", line 3, in <module>', text)
        self.assertIn("    1/0", text)
        self.assertNotIn("runner.py", text)

    def test_error_fields_keep_chained_exceptions_verbatim(self):
        try:
            runner._execute("raise ValueError('outer') from KeyError('inner')", "<cell-chain>", {})
        except ValueError as exc:
            text = "\n".join(runner.error_fields(exc)["traceback"])
        self.assertIn("KeyError: 'inner'\n\nThe above exception was the direct cause of the following exception:"
                      "\n\nTraceback (most recent call last):", text)
        self.assertTrue(text.endswith("ValueError: outer"))

    def test_semicolon_suppresses_value(self):
        self.assertIs(runner._execute("1 + 1;  # quiet", "<c>", {}), runner._NO_VALUE)
        self.assertEqual(runner._execute("1 + 1  # ; not this", "<c>", {}), 2)
        self.assertEqual(runner._execute("x = 'a;'\nx", "<c>", {}), "a;")

    def test_one_line_statements_and_expressions(self):
        ns = {}
        for code in ("x = 1 + 1", "d = {}", "d['k'] = x", "x += 1", "y: int = 2", "a, b = 1, 2", "import os", "if x: z = 3"):
            self.assertIs(runner._execute(code, "<c>", ns), runner._NO_VALUE, code)
        self.assertEqual((ns["x"], ns["d"], ns["y"], ns["a"], ns["z"]), (3, {"k": 2}, 2, 1, 3))
        for code, value in (("x == 3", True), ("x <= 3", True), ("x != 3", False), ("dict(k=1)", {"k": 1}),
                            ("d['k']", 2), ("[v for v in (1, 2) if v == 2]", [2]), ("import_ = 5", runner._NO_VALUE),
                            ("import os; os.sep", os.sep), ("w = 1; w + 1", 2)):
            self.assertEqual(runner._execute(code, "<c>", ns), value, code)
        self.assertIsNotNone(runner._statement_code("x = 1", "<c>"))
        self.assertIsNone(runner._statement_code("x == 1", "<c>"))
        self.assertIsNone(runner._statement_code("f(a=1)", "<c>"))
        with self.assertRaises(SyntaxError):
            runner._execute("x = = 1", "<c>", ns)


if __name__ == "__main__":
    unittest.main()

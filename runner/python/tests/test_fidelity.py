"""IPython fidelity of the runner's pure parts: the pretty printer, durations, TimeitResult, the magic list."""

import collections
import importlib.util
import os
import re
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner_package  # noqa: E402

runner = runner_package.load()
pretty = runner.pretty

# IPython 8's builtin magics (%lsmagic in ipykernel 6.17), each of which must be registered here:
# working as in IPython or raising a UsageError that says why not.
IPYTHON_LINE_MAGICS = (
    "alias alias_magic autoawait autocall automagic autosave bookmark cat cd clear colors conda config connect_info "
    "cp debug dhist dirs doctest_mode ed edit env gui hist history killbgscripts ldir less lf lk ll load load_ext "
    "loadpy logoff logon logstart logstate logstop ls lsmagic lx macro magic man matplotlib mkdir more mv notebook "
    "page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint precision prun psearch psource pushd pwd pycat "
    "pylab qtconsole quickref recall rehashx reload_ext rep rerun reset reset_selective rm rmdir run save sc set_env "
    "store sx system tb time timeit unalias unload_ext who who_ls whos xdel xmode").split()
IPYTHON_CELL_MAGICS = (
    "! HTML SVG bash capture debug file html javascript js latex markdown perl prun pypy python python2 python3 "
    "ruby script sh svg sx system time timeit writefile").split()


def f(x, *args, key=1):
    """A function for the printer."""


class Plain:
    pass


class Lines:
    def __repr__(self):
        return "Lines(\none)"


class PrettyTest(unittest.TestCase):
    def test_types_and_functions_print_as_ipython(self):
        self.assertEqual(pretty(int), "int")
        self.assertEqual(pretty([type(x) for x in (1, "a", 2.0)]), "[int, str, float]")
        self.assertEqual(pretty(Plain), "%s.Plain" % __name__)
        self.assertEqual(pretty(f), "<function %s.f(x, *args, key=1)>" % __name__)
        self.assertEqual(pretty(len), "<function len(obj, /)>")
        self.assertRegex(pretty(Plain()), r"^<%s\.Plain at 0x[0-9a-f]+>$" % re.escape(__name__))
        self.assertEqual(pretty(ValueError("bad", 2)), "ValueError('bad', 2)")

    def test_long_containers_wrap_at_79_columns(self):
        self.assertEqual(pretty(list(range(20))), repr(list(range(20))))
        self.assertEqual(pretty(list(range(40))), "[" + ",\n ".join(str(i) for i in range(40)) + "]")
        nested = {"k": list(range(30)), "j": {"n": "x" * 70}}
        self.assertEqual(pretty(nested), "{'k': [0,\n  1,\n" + "".join("  %d,\n" % i for i in range(2, 29))
                         + "  29],\n 'j': {'n': '" + "x" * 70 + "'}}")
        self.assertEqual(pretty(list(range(1005))).split("\n")[-1], " ...]")

    def test_sets_sort_and_singletons_and_cycles(self):
        self.assertEqual(pretty({3, 1, 2}), "{1, 2, 3}")
        self.assertEqual(pretty(set()), "set()")
        self.assertEqual(pretty(frozenset({2, 1})), "frozenset({1, 2})")
        self.assertEqual(pretty((1,)), "(1,)")
        looped = []
        looped.append(looped)
        self.assertEqual(pretty(looped), "[[...]]")

    def test_collections_regex_namespace_and_multiline_reprs(self):
        self.assertEqual(pretty(collections.Counter("aab")), "Counter({'a': 2, 'b': 1})")
        self.assertEqual(pretty(collections.OrderedDict()), "OrderedDict()")
        self.assertEqual(pretty(collections.deque([1], maxlen=3)), "deque([1], maxlen=3)")
        self.assertEqual(pretty(collections.defaultdict(list)), "defaultdict(list, {})")
        self.assertEqual(pretty(re.compile(r"a\d", re.I)), "re.compile(r'a\\d', re.IGNORECASE|re.UNICODE)")
        self.assertEqual(pretty(types.SimpleNamespace(a=1)), "namespace(a=1)")
        self.assertEqual(pretty(Lines()), "Lines(\none)")

    def test_repr_pretty_protocol(self):
        class Custom:
            def _repr_pretty_(self, p, cycle):
                with p.group(4, "Cus(", ")"):
                    p.text("a,")
                    p.breakable()
                    p.pretty([1, 2])
        self.assertEqual(pretty(Custom()), "Cus(a, [1, 2])")


class TimingTest(unittest.TestCase):
    def test_durations_as_ipython_writes_them(self):
        self.assertEqual(runner.format_duration(0.00123), "1.23 ms")
        self.assertEqual(runner.format_duration(4.2e-6), "4.2 \u00b5s")
        self.assertEqual(runner.format_duration(0), "0 ns")
        self.assertEqual(runner.format_duration(3725.5), "1h 2min 5s")

    def test_timeit_result_text(self):
        result = runner.TimeitResult(1, 7, 0.1, 0.1, [0.1] * 7)
        self.assertEqual(str(result), "100 ms \u00b1 0 ns per loop (mean \u00b1 std. dev. of 7 runs, 1 loop each)")
        many = runner.TimeitResult(10000, 1, 1e-6, 1e-6, [0.01])
        self.assertEqual(str(many), "1 \u00b5s \u00b1 0 ns per loop (mean \u00b1 std. dev. of 1 run, 10,000 loops each)")
        self.assertEqual(pretty(many), "<TimeitResult : %s>" % many)

    def test_timeit_options(self):
        options, stmt = runner._parse_timeit_options("-n5 -r 2 -qo -p4 x = 1")
        self.assertEqual((options["number"], options["repeat"], options["quiet"], options["result"],
                          options["precision"], stmt), (5, 2, True, True, 4, "x = 1"))
        with self.assertRaises(runner.UsageError):
            runner._parse_timeit_options("-n x pass")


class MagicSurveyTest(unittest.TestCase):
    def test_every_ipython_builtin_magic_is_registered(self):
        self.assertEqual([n for n in IPYTHON_LINE_MAGICS if n not in runner._LINE_MAGICS], [])
        self.assertEqual([n for n in IPYTHON_CELL_MAGICS if n not in runner._CELL_MAGICS], [])

    def test_unsupported_magics_say_so(self):
        for name in ("debug", "store", "autosave", "edit"):
            with self.assertRaisesRegex(runner.UsageError, r"^%%%s is an IPython magic that is not supported here: "
                                        % name):
                runner._LINE_MAGICS[name]("", None)
        with self.assertRaisesRegex(runner.UsageError, "not supported here"):
            runner._CELL_MAGICS["debug"]("", "x = 1", None)


if __name__ == "__main__":
    unittest.main()

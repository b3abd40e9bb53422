"""Unit tests for the prelude's pure parts, loaded beside a stub veyyon_runtime (no kernel)."""

import ast
import asyncio
import contextlib
import importlib.util
import io
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PRELUDE_PATH = os.path.join(os.path.dirname(HERE), "prelude.py")
sys.path.insert(0, HERE)
import runner_package  # noqa: E402


BridgeError = runner_package.load().module("bridge").BridgeError


class StubRuntime(types.ModuleType):
    """The parts of veyyon_runtime the prelude uses, with a scriptable bridge."""

    def __init__(self):
        super().__init__("veyyon_runtime")
        self.BridgeError = BridgeError
        self.reset()

    def reset(self):
        self.statuses = []
        self.calls = []
        self.answer = lambda method, params: {"text": "ok"}
        self.namespace = {}
        self.hidden = set()
        self.request_ids = []

    def emit_status(self, op, **fields):
        self.statuses.append(dict(fields, op=op))

    def bridge_call(self, method, params=None, request_id=None):
        json.dumps(params)
        self.calls.append((method, params))
        self.request_ids.append(request_id)
        return self.answer(method, params)

    def current_request_id(self):
        return "r-current"

    def user_namespace(self):
        return self.namespace

    def user_names(self):
        return sorted(n for n in self.namespace if not n.startswith("_") and n not in self.hidden)


runtime = StubRuntime()
sys.modules["veyyon_runtime"] = runtime


def _load_prelude(name="veyyon_prelude_under_test"):
    spec = importlib.util.spec_from_file_location(name, PRELUDE_PATH)
    module = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


prelude = _load_prelude()


def _top_level_imports(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


class LoadingTest(unittest.TestCase):
    def test_prelude_parses_with_python_3_8_grammar(self):
        with open(PRELUDE_PATH, encoding="utf-8") as handle:
            ast.parse(handle.read(), filename=PRELUDE_PATH, feature_version=(3, 8))

    def test_top_level_imports_are_ones_the_runner_already_made(self):
        made = set()
        for path in runner_package.SOURCE_FILES:
            made |= _top_level_imports(path)
        extra = _top_level_imports(PRELUDE_PATH) - made
        self.assertEqual(extra, set())

    def test_loading_as_a_module_installs_nothing(self):
        sys.modules.pop("veyyon_prelude", None)
        copy = _load_prelude("veyyon_prelude_second_copy")
        self.assertNotIn("veyyon_prelude", sys.modules)
        self.assertIsNot(copy.kv, prelude.kv)


class InstallTest(unittest.TestCase):
    """Running the source as the kernel does: in a __main__ namespace, twice."""

    def setUp(self):
        runtime.reset()
        with open(PRELUDE_PATH, encoding="utf-8") as handle:
            self.code = compile(handle.read(), "<cell-2>", "exec")
        sys.modules.pop("veyyon_prelude", None)
        self.addCleanup(sys.modules.pop, "veyyon_prelude", None)

    def run_cell(self, namespace):
        exec(self.code, namespace)

    def test_binds_only_the_public_names(self):
        namespace = {"__name__": "__main__", "__doc__": None, "__builtins__": __builtins__}
        self.run_cell(namespace)
        self.assertEqual(sorted(namespace), sorted(["__name__", "__doc__", "__builtins__"] + list(prelude.EXPORTS)))
        self.assertIsNone(namespace["__doc__"])
        module = sys.modules["veyyon_prelude"]
        self.assertIs(namespace["agent"], module.agent)
        self.assertEqual(module.agent.__module__, "veyyon_prelude")

    def test_second_run_changes_nothing(self):
        namespace = {"__name__": "__main__", "__doc__": None, "__builtins__": __builtins__}
        self.run_cell(namespace)
        namespace["json"] = 5
        namespace["_mine"] = "kept"
        before = dict(namespace)
        self.run_cell(namespace)
        self.assertEqual(namespace.keys(), before.keys())
        for name, value in before.items():
            self.assertIs(namespace[name], value, name)

    def test_helpers_do_not_see_the_user_namespace(self):
        namespace = {"__name__": "__main__", "__doc__": None, "__builtins__": __builtins__}
        self.run_cell(namespace)
        namespace["json"] = None
        namespace["_clip"] = None
        self.assertEqual(namespace["env"]("PATH"), os.environ["PATH"])
        self.assertEqual(sys.modules["veyyon_prelude"].parse_json_answer("[1]"), [1])

    def test_refuses_to_load_from_anything_but_a_module_body(self):
        def not_a_cell():
            pass
        with self.assertRaises(RuntimeError):
            prelude.install({}, {}, not_a_cell.__code__)
        self.assertNotIn("veyyon_prelude", sys.modules)

    def test_tracebacks_name_the_prelude(self):
        namespace = {"__name__": "__main__", "__doc__": None, "__builtins__": __builtins__}
        self.run_cell(namespace)
        self.assertEqual(namespace["kv"].set.__code__.co_filename, "<veyyon prelude>")


class SchemaTest(unittest.TestCase):
    def problem(self, value, schema):
        return prelude.schema_problem(value, schema)

    def test_types(self):
        cases = [
            ("string", "x", True), ("string", 1, False), ("integer", 3, True), ("integer", 3.0, True),
            ("integer", 3.5, False), ("integer", True, False), ("number", 2, True), ("number", 2.5, True),
            ("number", False, False), ("boolean", False, True), ("boolean", 0, False), ("null", None, True),
            ("null", 0, False), ("array", [1], True), ("array", {}, False), ("object", {}, True),
            ("object", [], False),
        ]
        for type_name, value, fits in cases:
            problem = self.problem(value, {"type": type_name})
            self.assertEqual(problem is None, fits, (type_name, value, problem))

    def test_type_list(self):
        self.assertIsNone(self.problem(None, {"type": ["string", "null"]}))
        self.assertEqual(self.problem(1, {"type": ["string", "null"]}), "$: expected string or null, got integer")

    def test_enum_is_strict_about_booleans(self):
        self.assertIsNone(self.problem("b", {"enum": ["a", "b"]}))
        self.assertIsNone(self.problem(1.0, {"enum": [1]}))
        self.assertEqual(self.problem(True, {"enum": [1, 2]}), "$: true is not one of [1, 2]")
        self.assertIsNone(self.problem({"a": [1]}, {"enum": [{"a": [1]}]}))
        self.assertIsNotNone(self.problem({"a": [True]}, {"enum": [{"a": [1]}]}))

    def test_required_and_nested_paths(self):
        schema = {
            "type": "object",
            "required": ["items"],
            "properties": {
                "items": {"type": "array", "items": {"type": "object", "required": ["name"],
                                                     "properties": {"name": {"type": "string"}}}},
                "odd key": {"type": "integer"},
            },
        }
        self.assertIsNone(self.problem({"items": [{"name": "a"}]}, schema))
        self.assertEqual(self.problem({}, schema), '$: missing required property "items"')
        self.assertEqual(self.problem({"items": [{"name": "a"}, {"name": 2}]}, schema),
                         "$.items[1].name: expected string, got integer")
        self.assertEqual(self.problem({"items": [{}]}, schema), '$.items[0]: missing required property "name"')
        self.assertEqual(self.problem({"items": [], "odd key": "x"}, schema),
                         '$["odd key"]: expected integer, got string')

    def test_positional_items_and_unknown_keywords(self):
        schema = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "minItems": 9}
        self.assertIsNone(self.problem(["a", 1, None], schema))
        self.assertEqual(self.problem([1], schema), "$[0]: expected string, got integer")

    def test_schema_argument_is_checked(self):
        prelude.check_schema_argument({"type": ["object", "null"]})
        for bad in ([], {"type": "dict"}, {"type": 3}, {"x": {1, 2}}):
            with self.assertRaises(TypeError):
                prelude.check_schema_argument(bad)


class JsonAnswerTest(unittest.TestCase):
    def test_plain_and_fenced(self):
        self.assertEqual(prelude.parse_json_answer(' {"a": 1}\n'), {"a": 1})
        self.assertEqual(prelude.parse_json_answer('```json\n{"a": 1}\n```'), {"a": 1})
        self.assertEqual(prelude.parse_json_answer("```\n[1, 2]\n```\n"), [1, 2])

    def test_not_json_says_so_and_keeps_the_text(self):
        with self.assertRaises(prelude.SchemaError) as caught:
            prelude.parse_json_answer("Sure! Here it is: {", "agent() output")
        self.assertIn("agent() output is not valid JSON", str(caught.exception))
        self.assertIn("Sure! Here it is", str(caught.exception))
        self.assertEqual(caught.exception.text, "Sure! Here it is: {")
        self.assertIsInstance(caught.exception, ValueError)

    def test_structured_output_wins_over_text(self):
        answer = {"text": "not json", "output": {"n": 1}}
        self.assertEqual(prelude.structured_answer(answer, {"type": "object"}, "x"), {"n": 1})
        with self.assertRaises(prelude.SchemaError) as caught:
            prelude.structured_answer(answer, {"required": ["m"]}, "agent() output")
        self.assertEqual(str(caught.exception), 'agent() output does not match the schema: $: missing required property "m"')


class TempArtifactsMixin:
    """A temporary VEYYON_ARTIFACTS_DIR and no kernel runtime, so kv writes the files itself."""

    def setUp(self):
        sys.modules.pop("veyyon_runtime", None)
        self.addCleanup(sys.modules.__setitem__, "veyyon_runtime", runtime)
        self.root = tempfile.mkdtemp(prefix="prelude-kv-")
        self.addCleanup(shutil.rmtree, self.root, True)
        previous = os.environ.get("VEYYON_ARTIFACTS_DIR")
        os.environ["VEYYON_ARTIFACTS_DIR"] = self.root
        self.addCleanup(self._restore_env, previous)
        self.dir = os.path.join(self.root, "kv")
        self.kv = prelude.KvStore()

    @staticmethod
    def _restore_env(previous):
        if previous is None:
            os.environ.pop("VEYYON_ARTIFACTS_DIR", None)
        else:
            os.environ["VEYYON_ARTIFACTS_DIR"] = previous


class KvFormatTest(TempArtifactsMixin, unittest.TestCase):
    def test_file_name_is_hex_sha256_of_utf8(self):
        self.assertEqual(prelude.kv_file_name("a"), "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb.json")
        self.assertEqual(len(prelude.kv_file_name("\U0001F600" * 256)), 69)
        self.assertNotEqual(prelude.kv_file_name("Key"), prelude.kv_file_name("key"))

    def test_file_content_is_key_and_value(self):
        self.kv.set("cursor", {"id": "callback-17", "n": [1, 2.5, None, True], "\u00e9": "\u00fc"})
        with open(os.path.join(self.dir, prelude.kv_file_name("cursor")), "rb") as handle:
            data = handle.read()
        self.assertEqual(data, '{"key":"cursor","value":{"id":"callback-17","n":[1,2.5,null,true],"\u00e9":"\u00fc"}}'.encode())
        self.assertEqual(os.listdir(self.dir), [prelude.kv_file_name("cursor")])

    def test_decodes_what_another_runtime_wrote(self):
        os.makedirs(self.dir)
        entry = json.dumps({"key": "from-js", "value": [1, {"a": "b"}]}, indent=2)
        with open(os.path.join(self.dir, prelude.kv_file_name("from-js")), "w", encoding="utf-8") as handle:
            handle.write(entry)
        self.assertEqual(self.kv.get("from-js"), [1, {"a": "b"}])
        self.assertEqual(self.kv.list(), ["from-js"])


class KvInKernelTest(unittest.TestCase):
    """In a kernel, writes go to the host as "kv" bridge calls; reads stay with the files."""

    def setUp(self):
        runtime.reset()
        self.kv = prelude.KvStore()

    def test_set_and_delete_are_bridge_calls_with_the_value_as_json_text(self):
        runtime.answer = lambda method, params: None if params["op"] == "set" else True
        self.kv.set("cursor", {"n": [1, 2.5, None], "\u00e9": 10 ** 30})
        self.assertTrue(self.kv.delete("cursor"))
        self.assertEqual(runtime.calls, [
            ("kv", {"op": "set", "key": "cursor", "value": '{"n":[1,2.5,null],"\u00e9":1000000000000000000000000000000}'}),
            ("kv", {"op": "delete", "key": "cursor"}),
        ])

    def test_local_checks_come_first_and_host_refusals_are_value_errors(self):
        with self.assertRaises(ValueError):
            self.kv.set("a/b", 1)
        with self.assertRaises(TypeError):
            self.kv.set("k", object())
        self.assertEqual(runtime.calls, [])

        def full(method, params):
            raise BridgeError("KvStoreFull", "kv store is full: 4194300 bytes stored")

        runtime.answer = full
        with self.assertRaises(ValueError) as caught:
            self.kv.set("k", "v")
        self.assertEqual(str(caught.exception), "kv store is full: 4194300 bytes stored")

        def broken(method, params):
            raise BridgeError("BridgeCancelled", "the cell has ended")

        runtime.answer = broken
        with self.assertRaises(BridgeError):
            self.kv.set("k", "v")


class KvHostReadsTest(unittest.TestCase):
    """With VEYYON_KV_READS=host, reads are "kv" bridge calls too and no file is read."""

    def setUp(self):
        runtime.reset()
        self.kv = prelude.KvStore()
        saved = {name: os.environ.get(name) for name in ("VEYYON_KV_READS", "VEYYON_ARTIFACTS_DIR")}
        self.addCleanup(lambda: [os.environ.pop(n, None) if v is None else os.environ.__setitem__(n, v) for n, v in saved.items()])
        os.environ["VEYYON_KV_READS"] = "host"
        os.environ.pop("VEYYON_ARTIFACTS_DIR", None)

    def test_get_contains_and_list_ask_the_host(self):
        stored = {"big": "1000000000000000000000000000000", "none": "null"}
        runtime.answer = lambda method, params: sorted(stored) if params["op"] == "list" else stored.get(params["key"])
        self.assertEqual(self.kv.get("big"), 10 ** 30)
        self.assertIsNone(self.kv.get("none", "dflt"))
        self.assertEqual(self.kv.get("missing", "dflt"), "dflt")
        self.assertIn("none", self.kv)
        self.assertNotIn("missing", self.kv)
        self.assertEqual(self.kv.list(), ["big", "none"])
        self.assertEqual(repr(self.kv), "<kv store: 2 keys>")
        self.assertEqual(runtime.calls[:3], [
            ("kv", {"op": "get", "key": "big"}),
            ("kv", {"op": "get", "key": "none"}),
            ("kv", {"op": "get", "key": "missing"}),
        ])
        self.assertIn(("kv", {"op": "list"}), runtime.calls)

    def test_bad_keys_are_refused_before_asking_and_host_errors_surface(self):
        with self.assertRaises(ValueError):
            self.kv.get("a/b")
        self.assertEqual(runtime.calls, [])

        def down(method, params):
            raise BridgeError("KvReadFailed", "the cluster's kv store (Postgres) failed")

        runtime.answer = down
        with self.assertRaises(BridgeError) as caught:
            self.kv.get("k")
        self.assertIn("KvReadFailed", str(caught.exception))

    def test_without_a_kernel_reads_say_there_is_no_host(self):
        sys.modules.pop("veyyon_runtime", None)
        self.addCleanup(sys.modules.__setitem__, "veyyon_runtime", runtime)
        with self.assertRaises(RuntimeError) as caught:
            self.kv.get("k")
        self.assertIn("no kernel host", str(caught.exception))
        self.assertEqual(repr(self.kv), "<kv store: read through the host, which is not reachable here>")


class KvBehaviourTest(TempArtifactsMixin, unittest.TestCase):
    def test_round_trip_get_default_list_delete(self):
        self.assertIsNone(self.kv.get("missing"))
        self.assertEqual(self.kv.get("missing", 7), 7)
        self.assertEqual(self.kv.list(), [])
        self.kv.set("b", 2)
        self.kv.set("a", {"x": [1, 2]})
        self.kv.set("b", "two")
        self.assertEqual(self.kv.get("a"), {"x": [1, 2]})
        self.assertEqual(self.kv.get("b"), "two")
        self.assertEqual(self.kv.list(), ["a", "b"])
        self.assertTrue("a" in self.kv)
        self.assertEqual(repr(self.kv), "<kv store: 2 keys>")
        self.assertTrue(self.kv.delete("a"))
        self.assertFalse(self.kv.delete("a"))
        self.assertEqual(self.kv.list(), ["b"])

    def test_falsy_values_are_not_missing(self):
        for value in (None, 0, "", [], {}, False):
            self.kv.set("v", value)
            self.assertEqual(self.kv.get("v", "default"), value)

    def test_bad_keys(self):
        for key, message in (("", "1 to 256"), ("x" * 257, "1 to 256"), ("a/b", '"/"'), ("a\\b", '"\\"'),
                             ("a\0b", "NUL"), ("\ud800", "surrogates")):
            with self.assertRaises(ValueError) as caught:
                self.kv.set(key, 1)
            self.assertIn(message, str(caught.exception))
        with self.assertRaises(TypeError):
            self.kv.get(3)
        self.kv.set("\u00e9" * 256, 1)
        self.assertEqual(self.kv.list(), ["\u00e9" * 256])

    def test_values_must_be_json(self):
        with self.assertRaises(ValueError):
            self.kv.set("k", math.nan)
        with self.assertRaises(TypeError):
            self.kv.set("k", {1, 2})
        with self.assertRaises(ValueError):
            self.kv.set("k", "\ud800")
        self.assertEqual(self.kv.list(), [])

    def test_value_limit_is_256_kib_of_encoded_json(self):
        self.kv.set("k", "x" * (256 * 1024 - 2))
        with self.assertRaises(ValueError) as caught:
            self.kv.set("k", "x" * (256 * 1024 - 1))
        self.assertIn("262145 bytes", str(caught.exception))
        self.kv.set("wide", "\u00e9" * (128 * 1024 - 1))
        with self.assertRaises(ValueError):
            self.kv.set("wide", "\u00e9" * (128 * 1024))

    def test_store_limit_is_4_mib_and_replacing_does_not_count_twice(self):
        chunk = "x" * (256 * 1024 - 100)
        for i in range(16):
            self.kv.set("k%02d" % i, chunk)
        self.kv.set("k00", chunk)
        with self.assertRaises(ValueError) as caught:
            self.kv.set("one-more", chunk)
        self.assertIn("kv store is full", str(caught.exception))
        self.kv.delete("k01")
        self.kv.set("one-more", chunk)

    def test_without_artifacts_dir(self):
        del os.environ["VEYYON_ARTIFACTS_DIR"]
        with self.assertRaises(RuntimeError) as caught:
            self.kv.set("k", 1)
        self.assertIn("VEYYON_ARTIFACTS_DIR", str(caught.exception))
        self.assertIn("not set", repr(self.kv))

    def test_other_files_are_ignored_and_damage_is_reported(self):
        self.kv.set("good", 1)
        for name in ("notes.txt", ".%s.1-2-ab.tmp" % prelude.kv_file_name("x"), "ABC.json"):
            with open(os.path.join(self.dir, name), "w") as handle:
                handle.write("junk")
        with open(os.path.join(self.dir, prelude.kv_file_name("bad")), "w") as handle:
            handle.write("{not json")
        self.assertEqual(self.kv.list(), ["good"])
        with self.assertRaises(ValueError) as caught:
            self.kv.get("bad")
        self.assertIn("damaged", str(caught.exception))

    def test_an_entry_for_another_key_is_damage(self):
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, prelude.kv_file_name("a")), "wb") as handle:
            handle.write(prelude.encode_kv_entry("b", 1))
        with self.assertRaises(ValueError):
            self.kv.get("a")

    def test_threads_writing_different_keys_lose_nothing(self):
        def write(prefix):
            for i in range(40):
                self.kv.set("%s-%d" % (prefix, i % 10), i)
        threads = [threading.Thread(target=write, args=(p,)) for p in "abcd"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(len(self.kv.list()), 40)
        self.assertEqual({self.kv.get("%s-%d" % (p, i)) for p in "abcd" for i in range(10)}, set(range(30, 40)))
        self.assertEqual([n for n in os.listdir(self.dir) if n.endswith(".tmp")], [])


class DefsTest(unittest.TestCase):
    def setUp(self):
        runtime.reset()

    def test_shapes(self):
        class DataFrame:
            shape = (2, 1)

        class Series:
            shape = (3,)

        class Lazy:
            @property
            def shape(self):
                raise RuntimeError("no")

        async def fetch(url, *, retries=3):
            pass

        def helper(x):
            return x

        cases = [
            (helper, "function(x)"), (fetch, "async function(url, *, retries=3)"), (lambda a, *b: 0, "function(a, *b)"),
            (len, "function(obj, /)"), (DataFrame, "class"), (DataFrame(), "DataFrame(2x1)"),
            (Series(), "Series(3)"), (Lazy(), "Lazy"), (json, "module json"), ([1, 2, 3], "list[3]"),
            ((1,), "tuple[1]"), ({"a": 1}, "dict[1]"), ({1}, "set[1]"), ("abc", "str[3]"), (b"ab", "bytes[2]"),
            (5, "int = 5"), (2.5, "float = 2.5"), (True, "bool = True"), (None, "NoneType = None"),
            (object(), "object"),
        ]
        for value, shape in cases:
            self.assertEqual(prelude.value_shape(value), shape, repr(value))

    def test_long_signatures_are_clipped(self):
        def wide(alpha_parameter=1, beta_parameter=2, gamma_parameter=3, delta_parameter=4):
            pass
        shape = prelude.value_shape(wide)
        self.assertTrue(shape.startswith("function(alpha_parameter=1"))
        self.assertTrue(shape.endswith("..."))
        self.assertLessEqual(len(shape), len("function") + 60)

    def test_lists_user_names_sorted_with_shapes(self):
        runtime.namespace.update({"b": [1, 2, 3], "a": 1, "_private": 2, "agent": object()})
        runtime.hidden.add("agent")
        shown = prelude.defs()
        self.assertEqual(list(shown.items()), [("a", "int = 1"), ("b", "list[3]")])
        self.assertEqual(repr(shown), "a: int = 1\nb: list[3]")

    def test_at_most_200_names(self):
        runtime.namespace.update({"v%03d" % i: i for i in range(205)})
        shown = prelude.defs()
        self.assertEqual(len(shown), 200)
        self.assertEqual(list(shown)[-1], "v199")
        self.assertEqual(shown.omitted, 5)
        self.assertTrue(repr(shown).endswith("v199: int = 199\n... and 5 more"))

    def test_empty(self):
        self.assertEqual(repr(prelude.defs()), "(no user definitions)")


class EnvTest(unittest.TestCase):
    def setUp(self):
        self.addCleanup(os.environ.pop, "VEYYON_PRELUDE_TEST", None)

    def test_like_the_env_magic(self):
        self.assertEqual(prelude.env(), dict(os.environ))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertIsNone(prelude.env("VEYYON_PRELUDE_TEST", 3))
        self.assertEqual(out.getvalue(), "env: VEYYON_PRELUDE_TEST=3\n")
        self.assertEqual(os.environ["VEYYON_PRELUDE_TEST"], "3")
        self.assertEqual(prelude.env("VEYYON_PRELUDE_TEST"), "3")

    def test_errors(self):
        with self.assertRaises(KeyError) as caught:
            prelude.env("VEYYON_PRELUDE_TEST")
        self.assertIn("VEYYON_PRELUDE_TEST is not set", str(caught.exception))
        for bad in ("", "A=B", 3):
            with self.assertRaises(ValueError):
                prelude.env(bad, "x")
        with self.assertRaises(TypeError):
            prelude.env(value="x")


class BridgeHelpersTest(unittest.TestCase):
    def setUp(self):
        runtime.reset()

    def test_agent_params_and_text(self):
        runtime.answer = lambda method, params: {"text": "final", "id": "a1", "agent": "deep"}
        self.assertEqual(prelude.agent("do it", label="step", isolated=True, merge="patch"), "final")
        self.assertEqual(runtime.calls, [("agent", {
            "prompt": "do it", "agent": "deep", "model": None, "label": "step", "schema": None,
            "isolated": True, "apply": None, "merge": "patch",
        })])

    def test_agent_accepts_a_bare_string(self):
        runtime.answer = lambda method, params: "plain"
        self.assertEqual(prelude.agent("x"), "plain")

    def test_agent_schema_parses(self):
        runtime.answer = lambda method, params: {"text": '```json\n{"n": 2}\n```', "id": "a1"}
        schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
        self.assertEqual(prelude.agent("count", schema=schema), {"n": 2})
        self.assertEqual(runtime.calls[0][1]["schema"], schema)

    def test_agent_schema_mismatch_is_clear(self):
        runtime.answer = lambda method, params: {"text": '{"n": "two"}'}
        with self.assertRaises(prelude.SchemaError) as caught:
            prelude.agent("count", schema={"properties": {"n": {"type": "integer"}}})
        self.assertEqual(str(caught.exception), "agent() output does not match the schema: $.n: expected integer, got string")
        self.assertEqual(caught.exception.text, '{"n": "two"}')

    def test_handle_node(self):
        runtime.answer = lambda method, params: {"text": "done", "id": "x9", "agent": "explore", "output": "summary"}
        self.assertEqual(prelude.agent("look", agent="explore", handle=True), {
            "text": "done", "output": "summary", "handle": "agent://x9", "id": "x9", "agent": "explore"})
        runtime.answer = lambda method, params: {"text": '{"ok": true}', "id": "x10"}
        node = prelude.agent("look", schema={"type": "object"}, handle=True)
        self.assertEqual(node, {"text": '{"ok": true}', "output": '{"ok": true}', "handle": "agent://x10",
                                "id": "x10", "agent": "deep", "data": {"ok": True}})

    def test_malformed_answer_is_a_protocol_error(self):
        runtime.answer = lambda method, params: {"id": 1}
        with self.assertRaises(BridgeError) as caught:
            prelude.agent("x")
        self.assertEqual(caught.exception.name, "ProtocolError")
        self.assertIn('"text"', caught.exception.message)

    def test_argument_errors_are_raised_before_any_call(self):
        bad_calls = [
            lambda: prelude.agent(""), lambda: prelude.agent(3), lambda: prelude.agent("x", agent=""),
            lambda: prelude.agent("x", model=1), lambda: prelude.agent("x", schema="{}"),
            lambda: prelude.agent("x", handle=1), lambda: prelude.agent("x", isolated="yes"),
            lambda: prelude.agent("x", merge=[1]), lambda: prelude.completion("x", schema={"type": "text"}),
        ]
        for call in bad_calls:
            with self.assertRaises(TypeError):
                call()
        self.assertEqual(runtime.calls, [])

    def test_completion(self):
        runtime.answer = lambda method, params: "42"
        self.assertEqual(prelude.completion("answer?", model="small"), "42")
        self.assertEqual(runtime.calls, [("completion", {"prompt": "answer?", "model": "small", "schema": None})])
        self.assertEqual(prelude.completion("answer?", schema={"type": "integer"}), 42)
        runtime.answer = lambda method, params: {"text": "", "output": [1, 2]}
        self.assertEqual(prelude.completion("list", schema={"type": "array", "items": {"type": "integer"}}), [1, 2])

    def test_defer_describes_without_calling(self):
        call = prelude.agent.defer("later", model="m")
        self.assertEqual(runtime.calls, [])
        self.assertEqual(call.method, "agent")
        self.assertEqual(call.params["model"], "m")
        self.assertEqual(repr(call), "<deferred agent('later')>")
        self.assertEqual(call(), "ok")
        self.assertEqual(len(runtime.calls), 1)


class ParallelTest(unittest.TestCase):
    def setUp(self):
        runtime.reset()

    def test_all_calls_are_in_flight_at_once_and_results_keep_order(self):
        barrier = threading.Barrier(3, timeout=10)

        def answer(method, params):
            barrier.wait()
            return "%s:%s" % (method, params["prompt"])
        runtime.answer = answer
        results = prelude.parallel(prelude.agent.defer("a"), prelude.completion.defer("b"), prelude.agent.defer("c"))
        self.assertEqual(results, ["agent:a", "completion:b", "agent:c"])
        tags = sorted((p["parallel"]["index"], p["parallel"]["count"]) for _, p in runtime.calls)
        self.assertEqual(tags, [(0, 3), (1, 3), (2, 3)])
        self.assertEqual(len({p["parallel"]["group"] for _, p in runtime.calls}), 1)
        self.assertEqual(runtime.statuses, [{"op": "parallel", "count": 3, "failed": 0}])
        self.assertEqual(runtime.request_ids, ["r-current"] * 3)

    def test_a_failure_fills_its_slot_and_spares_the_others(self):
        def answer(method, params):
            if params["prompt"] == "bad":
                raise BridgeError("AgentFailed", "it broke")
            return params["prompt"].upper()
        runtime.answer = answer
        calls = [prelude.agent.defer(p) for p in ("one", "bad", "three")]
        calls.append(prelude.completion.defer("json", schema={"type": "object"}))
        results = prelude.parallel(calls)
        self.assertEqual(results[0], "ONE")
        self.assertIsInstance(results[1], BridgeError)
        self.assertEqual(str(results[1]), "AgentFailed: it broke")
        self.assertEqual(results[2], "THREE")
        self.assertIsInstance(results[3], prelude.SchemaError)
        self.assertEqual(runtime.statuses, [{"op": "parallel", "count": 4, "failed": 2}])

    def test_limit_bounds_calls_in_flight(self):
        lock = threading.Lock()
        state = {"now": 0, "peak": 0}

        def answer(method, params):
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            threading.Event().wait(0.01)
            with lock:
                state["now"] -= 1
            return params["prompt"]
        runtime.answer = answer
        prompts = ["p%d" % i for i in range(6)]
        self.assertEqual(prelude.parallel([prelude.agent.defer(p) for p in prompts], limit=2), prompts)
        self.assertLessEqual(state["peak"], 2)

    def test_only_deferred_calls(self):
        self.assertEqual(prelude.parallel(), [])
        self.assertEqual(prelude.parallel([]), [])
        with self.assertRaises(TypeError) as caught:
            prelude.parallel(lambda: prelude.agent("x"))
        self.assertIn("agent.defer(", str(caught.exception))
        with self.assertRaises(TypeError):
            prelude.parallel("abc")
        with self.assertRaises(ValueError):
            prelude.parallel(prelude.agent.defer("x"), limit=0)
        self.assertEqual(runtime.calls, [])

    def test_works_from_a_coroutine_cell(self):
        async def cell():
            return prelude.parallel(prelude.completion.defer("x"))
        self.assertEqual(asyncio.run(cell()), ["ok"])


if __name__ == "__main__":
    unittest.main()

"""Tests for boot.py: the runner package and the prelude start from cached code objects, and behave as before."""

import ast
import importlib.util
import json
import marshal
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import runner_package  # noqa: E402

TAG = sys.implementation.cache_tag
PACKAGE = "_veyyon_runner"
SERVER = PACKAGE + "/server"
_SERVER_MAIN = "\ndef main():\n"
_PRELUDE_SNAPSHOT = "_prelude_snapshot = dict(globals())\n"
# The modules the runner loads only when first used (a magic, a completion, a snapshot, a restore).
_LOADED_WHEN_USED = ("__main__", "magics", "introspect", "snapshot", "restore")


def _load_boot(path):
    spec = importlib.util.spec_from_file_location("veyyon_boot_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


class BootTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="veyyon-boot-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.boot = runner_package.copy_runner(self.dir)
        self.runner = os.path.join(self.dir, "runner.py")
        self.server = os.path.join(self.dir, PACKAGE, "server.py")
        self.prelude = _read(os.path.join(self.dir, "prelude.py"))

    def cache(self, name):
        return os.path.join(self.dir, "%s.%s.pyc" % (name, TAG))

    def serve(self, *cells, prelude=True):
        """Start boot.py, send init, the prelude (silent) and cells; {id: frames} once stdin hits EOF."""
        requests = [{"id": "init", "code": "", "silent": True, "storeHistory": False}]
        if prelude:
            requests.append({"id": "prelude", "code": self.prelude, "silent": True, "storeHistory": False})
        for index, cell in enumerate(cells):
            code, silent = cell if isinstance(cell, tuple) else (cell, False)
            requests.append({"id": "c%d" % index, "code": code, "silent": silent, "storeHistory": not silent})
        proc = subprocess.run([sys.executable, "-u", self.boot], input="".join(json.dumps(r) + "\n" for r in requests),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              cwd=self.dir, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        frames = {}
        for line in proc.stdout.splitlines():
            frame = json.loads(line)
            frames.setdefault(frame.get("id"), []).append(frame)
        for request in requests:
            done = [f for f in frames.get(request["id"], []) if f["type"] == "done"]
            self.assertEqual(len(done), 1, (request["id"], frames))
        self.assertEqual([f for f in frames.get("prelude", []) if f["type"] == "error"], [])
        return frames

    def stdout(self, frames, request_id):
        return "".join(f["data"] for f in frames[request_id] if f["type"] == "stdout")

    def plant(self, name, key, source, filename):
        """Write a cache entry that is valid for key but holds the code of a different source."""
        boot = _load_boot(self.boot)
        path = self.cache(name)
        os.remove(path)
        boot._DIR = self.dir
        boot.load(name, key, lambda: compile(source, filename, "exec", dont_inherit=True))
        self.assertTrue(os.path.exists(path))

    def marked_runner(self, value):
        """The server module's source setting BOOT_MARK just before main()."""
        source = _read(self.server)
        self.assertEqual(source.count(_SERVER_MAIN), 1)
        return source.replace(_SERVER_MAIN, "BOOT_MARK = %r\n%s" % (value, _SERVER_MAIN))

    def runner_key(self):
        with open(self.server, "rb") as handle:
            return self.server.encode("utf-8", "surrogateescape") + b"\0" + handle.read()

    def test_boot_parses_with_python_3_8_grammar(self):
        ast.parse(_read(os.path.join(SOURCE_DIR, "boot.py")), feature_version=(3, 8))

    def test_first_start_compiles_and_caches_runner_and_prelude(self):
        frames = self.serve("1 + 1")
        results = [f for f in frames["c0"] if f["type"] == "result"]
        self.assertEqual(results[0]["bundle"]["text/plain"], "2")
        for name in os.listdir(os.path.join(self.dir, PACKAGE)):
            if name.endswith(".py") and name != "__main__.py":
                cached = os.path.isfile(self.cache("%s/%s" % (PACKAGE, name[:-3])))
                self.assertEqual(cached, name[:-3] not in _LOADED_WHEN_USED, name)
        self.assertTrue(os.path.isfile(self.cache("prelude")))
        self.assertFalse(os.path.exists(os.path.join(self.dir, PACKAGE, "__pycache__")))
        for path in (self.dir, os.path.join(self.dir, PACKAGE)):
            self.assertEqual([n for n in os.listdir(path) if n.endswith(".tmp")], [])

    def test_warm_caches_every_module_and_serves_nothing(self):
        proc = subprocess.run([sys.executable, "-u", self.boot, "--warm"], input="", stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, cwd=self.dir, timeout=60)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "", ""))
        for name in os.listdir(os.path.join(self.dir, PACKAGE)):
            if name.endswith(".py"):
                self.assertTrue(os.path.isfile(self.cache("%s/%s" % (PACKAGE, name[:-3]))), name)
        self.assertFalse(os.path.exists(os.path.join(self.dir, PACKAGE, "__pycache__")))
        frames = self.serve("%pwd")
        self.assertEqual([f["type"] for f in frames["c0"] if f["type"] == "error"], [])

    def test_second_start_loads_the_cached_runner(self):
        self.serve("1")
        self.plant(SERVER, self.runner_key(), self.marked_runner("from the cache"), self.server)
        frames = self.serve("print(__veyyon__.execution_count.__globals__.get('BOOT_MARK'))")
        self.assertEqual(self.stdout(frames, "c0"), "from the cache\n")

    def test_an_edited_runner_is_recompiled(self):
        self.serve("1")
        before = os.stat(self.cache(SERVER))
        edited = self.marked_runner("edited")
        with open(self.server, "w", encoding="utf-8", newline="") as handle:
            handle.write(edited)
        frames = self.serve("print(__veyyon__.execution_count.__globals__.get('BOOT_MARK'))")
        self.assertEqual(self.stdout(frames, "c0"), "edited\n")
        after = os.stat(self.cache(SERVER))
        self.assertNotEqual((before.st_ino, before.st_size), (after.st_ino, after.st_size))
        frames = self.serve("print(__veyyon__.execution_count.__globals__.get('BOOT_MARK'))")
        self.assertEqual(self.stdout(frames, "c0"), "edited\n")

    def test_a_cache_from_another_interpreter_or_a_torn_file_is_replaced(self):
        self.serve("1")
        with open(self.cache(SERVER), "rb") as handle:
            data = handle.read()
        for broken in (b"\0\0\0\0" + data[4:], data[:len(data) // 2]):
            with open(self.cache(SERVER), "wb") as handle:
                handle.write(broken)
            frames = self.serve("print(1 + 1)")
            self.assertEqual(self.stdout(frames, "c0"), "2\n")
            boot = _load_boot(self.boot)
            boot._DIR = self.dir
            self.assertIsNotNone(boot.load(SERVER, self.runner_key(), lambda: self.fail("the rewritten cache is not valid")))

    def test_serves_the_package_from_its_directory_as_runner_py_would(self):
        frames = self.serve(
            "g = __veyyon__.execution_count.__globals__\n"
            "import sys\n"
            "print(g['__name__'], g['__file__'] == %r, sys.argv[0] == %r, %r in sys.path, __name__)\n" % (
                self.server, self.runner, self.dir))
        self.assertEqual(self.stdout(frames, "c0"), "_veyyon_runner.server True True False __main__\n")

    def test_a_package_of_the_same_name_elsewhere_cannot_shadow_it(self):
        other = os.path.join(self.dir, "elsewhere")
        os.makedirs(os.path.join(other, PACKAGE))
        for name in ("__init__.py", "server.py", "extra.py"):
            with open(os.path.join(other, PACKAGE, name), "w") as handle:
                handle.write("raise SystemExit('shadowed')\n")
        frames = self.serve(
            "import sys, importlib\n"
            "sys.path.insert(0, %r)\n"
            "importlib.invalidate_caches()\n"
            "import _veyyon_runner.server as s\n"
            "print(s.__file__ == %r)\n"
            "try:\n"
            "    import _veyyon_runner.extra\n"
            "except ModuleNotFoundError as e:\n"
            "    print('not found')\n" % (other, self.server))
        self.assertEqual(self.stdout(frames, "c0"), "True\nnot found\n")

    def test_a_package_directory_others_can_write_is_refused(self):
        os.chmod(os.path.join(self.dir, PACKAGE), 0o777)
        proc = subprocess.run([sys.executable, "-u", self.boot], input="", stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, cwd=self.dir, timeout=60)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("refusing to load code from %s" % os.path.join(self.dir, PACKAGE), proc.stderr)
        self.assertIn("writable by group or others", proc.stderr)

    def test_tracebacks_still_leave_out_runner_and_boot_frames(self):
        self.serve("1")
        frames = self.serve("def f():\n    1/0\nf()", "__veyyon__.transform(1)", "kv.get(1)")
        for request_id in ("c0", "c1", "c2"):
            errors = [f for f in frames[request_id] if f["type"] == "error"]
            self.assertEqual(len(errors), 1, frames[request_id])
            text = "\n".join(errors[0]["traceback"])
            self.assertNotIn("runner.py", text)
            self.assertNotIn(PACKAGE, text)
            self.assertNotIn("boot.py", text)
            self.assertTrue(text.startswith("Traceback (most recent call last):\n  File \"<cell-"), text)
        self.assertIn("ZeroDivisionError", "\n".join(frames["c0"][-2]["traceback"]))
        self.assertIn('File "<veyyon prelude>"', "\n".join(frames["c2"][-2]["traceback"]))

    def test_the_prelude_loads_from_its_cache_and_keeps_its_semantics(self):
        self.serve("1")
        key = ("<hidden-2>\0" + self.prelude).encode("utf-8", "surrogatepass")
        self.assertEqual(self.prelude.count(_PRELUDE_SNAPSHOT), 1)
        marked = self.prelude.replace(_PRELUDE_SNAPSHOT, _PRELUDE_SNAPSHOT + "PRELUDE_MARK = 'from the cache'\n")
        self.plant("prelude", key, marked, "<hidden-2>")
        frames = self.serve(
            "import sys\nprint(sys.modules['veyyon_prelude'].PRELUDE_MARK)",
            "print(sorted(__veyyon__.protected_names()))",
            "kv = 1\n%reset -f\nprint(callable(kv.get), 'PRELUDE_MARK' in dir())",
            (self.prelude, True),
            "print(sorted(__veyyon__.user_names()))")
        self.assertEqual(self.stdout(frames, "c0"), "from the cache\n")
        self.assertEqual(self.stdout(frames, "c1"),
                         "['_emit_status', 'agent', 'completion', 'defs', 'env', 'kv', 'parallel']\n")
        self.assertEqual(self.stdout(frames, "c2"), "True False\n")
        self.assertEqual(self.stdout(frames, "c4"), "[]\n")

    def test_other_silent_requests_are_not_cached(self):
        frames = self.serve(("x = 41", True), "print(x + 1)", prelude=False)
        self.assertEqual(self.stdout(frames, "c1"), "42\n")
        self.assertEqual(sorted(n for n in os.listdir(self.dir) if n.endswith(".pyc")), [])
        self.assertIn("server.%s.pyc" % TAG, os.listdir(os.path.join(self.dir, PACKAGE)))

    def test_a_cache_that_cannot_be_written_only_costs_the_cache(self):
        os.mkdir(self.cache(SERVER))
        os.mkdir(self.cache("prelude"))
        frames = self.serve("print(1 + 1)")
        self.assertEqual(self.stdout(frames, "c0"), "2\n")
        self.assertEqual([n for n in os.listdir(self.dir) if n.endswith(".tmp")], [])

    def test_load_builds_once_per_key(self):
        boot = _load_boot(self.boot)
        boot._DIR = self.dir
        builds = []

        def build(source):
            builds.append(source)
            return compile(source, "<test>", "exec")

        first = boot.load("unit", b"k1", lambda: build("a = 1"))
        again = boot.load("unit", b"k1", lambda: build("a = 2"))
        other = boot.load("unit", b"k2", lambda: build("a = 3"))
        self.assertEqual(builds, ["a = 1", "a = 3"])
        for code, expected in ((first, 1), (again, 1), (other, 3)):
            namespace = {}
            exec(code, namespace)
            self.assertEqual(namespace["a"], expected)
        with open(self.cache("unit"), "rb") as handle:
            data = handle.read()
        self.assertTrue(data.startswith(importlib.util.MAGIC_NUMBER))
        self.assertIsInstance(marshal.loads(data[data.index(b"k2") + 2:]), type(first))


if __name__ == "__main__":
    unittest.main()

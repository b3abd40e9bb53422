"""Unit tests for session snapshots: which names are saved, budgets and reasons, the payload's round trip,
definitions replayed in order, shared objects, unpicklable values named, yielding to a cell, bad payloads."""

import contextlib
import os
import pickle
import socket
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner_package  # noqa: E402

R = runner_package.load(fresh=True)
snapshot = R.module("snapshot")
restore = R.module("restore")
definitions = R.module("definitions")
state_module = R.module("state")

BIG = 1 << 30


class Kernel:
    """A namespace that is module __main__ while in use (pickle finds cell classes there), with cells run into it
    and their definitions recorded as the runner does."""

    def __init__(self):
        self.module = types.ModuleType("__main__")
        self.ns = self.module.__dict__
        self.ns["__builtins__"] = __builtins__
        self.state = state_module._KernelState()
        self.cells = 0
        self.protected = {}

    @contextlib.contextmanager
    def active(self):
        saved = sys.modules["__main__"]
        sys.modules["__main__"] = self.module
        try:
            yield self
        finally:
            sys.modules["__main__"] = saved

    def run(self, code):
        self.cells += 1
        filename = "<cell-%d>" % self.cells
        try:
            exec(compile(code, filename, "exec"), self.ns)
        finally:
            definitions.note_cell(code, filename, self.ns)

    def snap(self, budget=BIG, value_budget=BIG, should_yield=None):
        with self.active():
            return snapshot.build(self.ns, self.protected, self.state, budget, value_budget, should_yield)


def payload_of(snap):
    return bytearray(b"".join(bytes(part) for part in snap.parts))


def restore_into(snap, execution_count=None):
    kernel = Kernel()
    with kernel.active():
        restored, skipped = restore.restore(payload_of(snap), kernel.ns, kernel.state, execution_count)
    return kernel, restored, skipped


def reasons(skipped):
    return {entry["name"]: entry["reason"] for entry in skipped}


class SnapshotTestCase(unittest.TestCase):
    def setUp(self):
        definitions._records.clear()
        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        self.path = list(sys.path)
        snapshot.baseline.capture()

    def tearDown(self):
        os.chdir(self.cwd)
        os.environ.clear()
        os.environ.update(self.environ)
        sys.path[:] = self.path
        definitions._records.clear()


class NamesTest(SnapshotTestCase):
    def test_user_names_leave_out_runtime_prelude_and_dunder_names(self):
        helper = object()
        ns = {"__name__": "__main__", "__builtins__": __builtins__, "__veyyon__": object(), "_": 5,
              "_exit_code": 0, "__dunder__": 1, "kv": helper, "x": 1, "_private": 2, "shadowed": 3}
        protected = {"kv": helper, "shadowed": "the prelude's"}
        self.assertEqual(snapshot.user_state_names(ns, protected), ["x", "_private", "shadowed"])

    def test_human_sizes_use_binary_units(self):
        self.assertEqual(snapshot.human_size(830), "830 B")
        self.assertEqual(snapshot.human_size(12 * 1024), "12 KiB")
        self.assertEqual(snapshot.human_size(256 << 20), "256 MiB")
        self.assertEqual(snapshot.human_size(int(1.2 * (1 << 30))), "1.2 GiB")
        self.assertEqual(snapshot.human_size(2 << 20), "2 MiB")


class RoundTripTest(SnapshotTestCase):
    def test_values_modules_definitions_and_sharing_come_back(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("import json as js\nimport os.path\n"
                       "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
                       "    def norm(self):\n        return abs(self.x) + abs(self.y)\n"
                       "def double(v):\n    return 2 * v\n"
                       "a = {'k': [1, 2, 3]}\nb = a\np = Point(3, -4)\nfns = [double]\nt = (a, p)\n")
        snap = kernel.snap()
        self.assertEqual(snap.skipped, [])
        self.assertEqual(snap.names, ["js", "os", "Point", "double", "a", "b", "p", "fns", "t"])
        fresh, restored, skipped = restore_into(snap, execution_count=7)
        ns = fresh.ns
        self.assertEqual(skipped, [])
        self.assertEqual(sorted(restored), sorted(snap.names))
        self.assertIs(ns["a"], ns["b"])
        self.assertIs(ns["t"][0], ns["a"])
        self.assertIs(ns["t"][1], ns["p"])
        self.assertEqual(ns["p"].norm(), 7)
        self.assertIs(type(ns["p"]), ns["Point"])
        self.assertIs(ns["fns"][0], ns["double"])
        self.assertEqual(ns["double"](21), 42)
        self.assertEqual(ns["js"].dumps([1]), "[1]")
        self.assertEqual(fresh.state.execution_count, 7)

    def test_the_same_state_gives_the_same_digest(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("x = 1\ny = [1, 2]\n")
        self.assertEqual(kernel.snap().digest(), kernel.snap().digest())
        with kernel.active():
            kernel.run("y.append(3)\n")
        self.assertNotEqual(kernel.snap().digest(), Kernel().snap().digest())

    def test_an_empty_namespace_is_an_empty_snapshot(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("def f():\n    pass\nx = 1\n")
            for name in ("f", "x"):
                del kernel.ns[name]
        snap = kernel.snap()
        self.assertEqual((snap.names, snap.skipped), ([], []))
        _, restored, skipped = restore_into(snap)
        self.assertEqual((restored, skipped), ([], []))

    def test_large_buffers_travel_out_of_band(self):
        kernel = Kernel()
        data = bytearray(os.urandom(200 * 1024))
        kernel.ns["buf"] = pickle.PickleBuffer(data)
        kernel.ns["view"] = data
        snap = kernel.snap()
        self.assertGreaterEqual(len(snap.parts), 6)
        fresh, _, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        self.assertEqual(bytes(fresh.ns["view"]), bytes(data))

    def test_kernel_state_comes_back(self):
        import random
        import tempfile

        kernel = Kernel()
        target = tempfile.mkdtemp()
        try:
            os.chdir(target)
            os.environ["VEYYON_SNAPSHOT_TEST"] = "yes"
            sys.path.append("/veyyon/snapshot/test")
            random.seed(11)
            snap = kernel.snap()
            expected = [random.random() for _ in range(3)]
            os.chdir(self.cwd)
            del os.environ["VEYYON_SNAPSHOT_TEST"]
            sys.path.remove("/veyyon/snapshot/test")
            random.seed(99)
            restore_into(snap)
            self.assertEqual(os.getcwd(), os.path.realpath(target))
            self.assertEqual(os.environ.get("VEYYON_SNAPSHOT_TEST"), "yes")
            self.assertIn("/veyyon/snapshot/test", sys.path)
            self.assertEqual([random.random() for _ in range(3)], expected)
        finally:
            os.chdir(self.cwd)
            os.rmdir(target)

    def test_host_set_environment_is_not_saved(self):
        os.environ["VEYYON_BASE_VAR"] = "0"
        snapshot.baseline.capture()
        del os.environ["VEYYON_BASE_VAR"]
        os.environ["VEYYON_HOST_SET"] = "1"
        os.environ["VEYYON_USER_SET"] = "2"
        snapshot.baseline.host_applied({"VEYYON_HOST_SET": "1"}, None)
        state = snapshot.capture_state(state_module._KernelState())
        self.assertEqual((state["env"], state["envUnset"]), ({"VEYYON_USER_SET": "2"}, ["VEYYON_BASE_VAR"]))


class SkippedTest(SnapshotTestCase):
    def test_unpicklable_values_are_named_with_a_reason_and_the_rest_saved(self):
        kernel = Kernel()
        sock = socket.socket()
        self.addCleanup(sock.close)
        kernel.ns.update(conn=sock, box={"conn": sock}, gen=(i for i in range(3)), lam=lambda: 1, ok=[1, 2])
        snap = kernel.snap()
        why = reasons(snap.skipped)
        self.assertEqual(why["conn"], "socket objects cannot be saved")
        self.assertEqual(why["box"], "it holds a socket object, which cannot be saved")
        self.assertEqual(why["gen"], "generator objects cannot be saved")
        self.assertIn("lambda", why["lam"])
        self.assertEqual(snap.names, ["ok"])

    def test_a_failed_value_leaves_no_memo_entry_behind(self):
        kernel = Kernel()
        shared = [1, 2, 3]
        sock = socket.socket()
        self.addCleanup(sock.close)
        kernel.ns.update(first=[shared, sock], second=[shared], third=shared)
        snap = kernel.snap()
        self.assertEqual(list(reasons(snap.skipped)), ["first"])
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        self.assertIs(fresh.ns["second"][0], fresh.ns["third"])

    def test_values_over_the_budgets_are_named(self):
        kernel = Kernel()
        kernel.ns.update(small=b"x" * 100, big=b"y" * (3 << 20), medium1=b"m" * (600 << 10),
                         medium2=b"n" * (600 << 10))
        snap = kernel.snap(budget=1 << 20, value_budget=2 << 20)
        why = reasons(snap.skipped)
        self.assertEqual(why["big"], "at least 3 MiB, over the 2 MiB per-value budget")
        self.assertRegex(why["medium2"], r"^at least 600 KiB would take the snapshot over its 1 MiB budget$")
        self.assertEqual(snap.names, ["small", "medium1"])
        snap = kernel.snap(budget=BIG, value_budget=2 << 20)
        self.assertEqual(reasons(snap.skipped)["big"], "at least 3 MiB, over the 2 MiB per-value budget")

    def test_the_whole_payload_stays_within_the_budget(self):
        kernel = Kernel()
        kernel.ns.update(("v%d" % i, b"z" * 3000) for i in range(40))
        for budget in (20000, 60000, 100000):
            snap = kernel.snap(budget=budget, value_budget=budget)
            self.assertLessEqual(snap.size, budget)
            self.assertTrue(snap.names and snap.skipped)

    def test_instances_of_a_redefined_class_are_named(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("class A:\n    pass\n")
            kernel.run("a = A()\n")
            kernel.run("class A:\n    pass\n")
        snap = kernel.snap()
        self.assertIn("redefined", reasons(snap.skipped)["a"])
        self.assertEqual(snap.names, ["A"])


class LambdaTest(SnapshotTestCase):
    def test_a_lambda_travels_as_its_code(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("scale = 3\nby = lambda x, k=2: x * k * scale\nsame = by\n")
        snap = kernel.snap()
        self.assertEqual(snap.skipped, [])
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        with fresh.active():
            self.assertEqual(fresh.ns["by"](5), 30)
        self.assertIs(fresh.ns["same"], fresh.ns["by"])

    def test_functions_and_classes_made_outside_a_cell_top_level(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("def f(x):\n    return x + 1\nalias = f\n")
            kernel.run("exec('def g(x):\\n    return x * 10\\nclass K:\\n    pass')\n")
        snap = kernel.snap()
        self.assertEqual(reasons(snap.skipped), {"K": "class K was not defined by a class statement at the top level "
                                                      "of a cell, so it cannot be recreated"})
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        with fresh.active():
            self.assertEqual((fresh.ns["g"](2), fresh.ns["alias"](2)), (20, 3))
        self.assertIs(fresh.ns["alias"], fresh.ns["f"])

    def test_another_python_cannot_load_it(self):
        with self.assertRaisesRegex(ValueError, "another Python version"):
            snapshot.function_from_code("cpython:00000000", b"", "f", "f", None, None, None)


class LargeValueTest(SnapshotTestCase):
    """Values bigger than a trial goes are pickled once, in the shared pass, last."""

    def setUp(self):
        SnapshotTestCase.setUp(self)
        self.saved = snapshot.TRIAL_BYTES
        snapshot.TRIAL_BYTES = 2000

    def tearDown(self):
        snapshot.TRIAL_BYTES = self.saved
        SnapshotTestCase.tearDown(self)

    def test_large_values_share_objects_with_the_rest(self):
        kernel = Kernel()
        shared = {"k": 1}
        kernel.ns.update(large=[shared] + list(range(5000)), small=shared, other=[shared])
        snap = kernel.snap()
        self.assertEqual((snap.names, snap.skipped), (["small", "other", "large"], []))
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        self.assertIs(fresh.ns["large"][0], fresh.ns["small"])
        self.assertIs(fresh.ns["other"][0], fresh.ns["small"])
        self.assertEqual(fresh.ns["large"][1:], list(range(5000)))

    def test_a_large_value_failing_late_is_named_whether_last_or_not(self):
        sock = socket.socket()
        self.addCleanup(sock.close)
        for order in (("bad", "good"), ("good", "bad")):
            kernel = Kernel()
            shared = ["shared"]
            values = {"bad": [shared] + list(range(5000)) + [sock], "good": [shared] + list(range(5000))}
            kernel.ns.update((name, values[name]) for name in order)
            kernel.ns["small"] = shared
            snap = kernel.snap()
            self.assertEqual(snap.skipped, [{"name": "bad", "reason": "it holds a socket object, which cannot be saved"}])
            fresh, restored, skipped = restore_into(snap)
            self.assertEqual((sorted(restored), skipped), (["good", "small"], []))
            self.assertIs(fresh.ns["good"][0], fresh.ns["small"])

    def test_a_large_value_over_the_room_left_is_named(self):
        kernel = Kernel()
        kernel.ns.update(first=list(range(3000)), second=list(range(100000)), third=list(range(3000)))
        snap = kernel.snap(budget=100000, value_budget=1 << 30)
        why = reasons(snap.skipped)
        self.assertEqual(list(why), ["second"])
        self.assertRegex(why["second"], r"^at least \d+ KiB would take the snapshot over its 98 KiB budget$")
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(fresh.ns["third"], list(range(3000)))
        snap = kernel.snap(budget=1 << 30, value_budget=100000)
        self.assertRegex(reasons(snap.skipped)["second"], r"^at least \d+ KiB, over the 98 KiB per-value budget$")


class DefinitionsTest(SnapshotTestCase):
    def test_latest_definition_wins_and_replay_keeps_order(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("def f():\n    return 1\n")
            kernel.run("import functools\n@functools.lru_cache()\ndef f():\n    return 2\n")
            kernel.run("class Base:\n    kind = 'base'\n")
            kernel.run("class Child(Base):\n    def kind2(self):\n        return self.kind * 2\n")
            kernel.run("c = Child()\n")
        snap = kernel.snap()
        self.assertEqual(snap.names, ["functools", "f", "Base", "Child", "c"])
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        self.assertEqual(fresh.ns["f"](), 2)
        self.assertEqual(fresh.ns["c"].kind2(), "basebase")

    def test_imported_names_come_back_before_the_definitions_that_need_them(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("from dataclasses import dataclass\nfrom collections import namedtuple\n")
            kernel.run("@dataclass\nclass P:\n    x: int\n    y: int = 0\n")
            kernel.run("Pair = namedtuple('Pair', 'a b')\n")
            kernel.run("p = P(1, 2)\npair = Pair(3, 4)\n")
        kernel.state.history = {1: "from dataclasses import dataclass\nfrom collections import namedtuple\n",
                                3: "Pair = namedtuple('Pair', 'a b')\n"}
        snap = kernel.snap()
        self.assertEqual(snap.skipped, [])
        self.assertEqual(snap.names, ["dataclass", "namedtuple", "P", "Pair", "p", "pair"])
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        self.assertEqual((fresh.ns["p"], fresh.ns["pair"].b), (fresh.ns["P"](1, 2), 4))

    def test_a_cell_that_failed_before_its_def_keeps_the_older_definition(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("def g():\n    return 'old'\n")
            with self.assertRaises(ZeroDivisionError):
                kernel.run("1 / 0\ndef g():\n    return 'new'\n")
        fresh, _, skipped = restore_into(kernel.snap())
        self.assertEqual(fresh.ns["g"](), "old")

    def test_a_definition_needing_a_value_is_replayed_after_the_values(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("threshold = 3\n")
            kernel.run("def over(x, limit=threshold):\n    return x > limit\n")
        snap = kernel.snap()
        # threshold is a value (restored after the definitions), over's default needs it.
        fresh, restored, skipped = restore_into(snap)
        self.assertEqual(skipped, [])
        self.assertTrue(fresh.ns["over"](4))

    def test_a_definition_that_fails_is_named(self):
        kernel = Kernel()
        with kernel.active():
            kernel.run("def k():\n    return 1\n")
            kernel.run("x = 2\n")
        # The same length, so the header's sizes still hold: the replayed source is now a syntax error.
        data = payload_of(kernel.snap()).replace(b"return 1", b"return )")
        fresh = Kernel()
        with fresh.active():
            restored, skipped = restore.restore(data, fresh.ns, fresh.state)
        self.assertEqual(restored, ["x"])
        self.assertEqual(list(reasons(skipped)), ["k"])
        self.assertIn("its definition failed: SyntaxError", reasons(skipped)["k"])


class YieldTest(SnapshotTestCase):
    def setUp(self):
        SnapshotTestCase.setUp(self)
        self.saved = snapshot.YIELD_CHECK_SECONDS
        snapshot.YIELD_CHECK_SECONDS = 0.0

    def tearDown(self):
        snapshot.YIELD_CHECK_SECONDS = self.saved
        SnapshotTestCase.tearDown(self)

    def test_yields_between_values(self):
        kernel = Kernel()
        kernel.ns.update(("v%d" % i, i) for i in range(50))
        calls = []

        def should_yield():
            calls.append(1)
            return len(calls) >= 10

        with self.assertRaises(snapshot.Yielded):
            kernel.snap(should_yield=should_yield)
        self.assertEqual(len(calls), 10)

    def test_yields_inside_one_big_value(self):
        kernel = Kernel()
        kernel.ns["big"] = [str(i) for i in range(300000)]
        calls = []

        def should_yield():
            calls.append(1)
            return len(calls) >= 3

        with self.assertRaises(snapshot.Yielded):
            kernel.snap(should_yield=should_yield)
        self.assertEqual(len(calls), 3)

    def test_serve_answers_yielded_without_chunks(self):
        kernel = Kernel()
        kernel.ns["big"] = list(range(200000))
        sent = []
        request = R.module("protocol").SnapshotRequest("s1", BIG, BIG)
        with kernel.active():
            snapshot.serve(request, kernel.ns, {}, kernel.state, lambda: True, lambda frame, line: sent.append(frame))
        self.assertEqual(sent, [{"type": "snapshot_done", "id": "s1", "status": "yielded", "names": [], "skipped": []}])

    def test_serve_sends_chunks_then_saved_and_unchanged_on_the_same_digest(self):
        kernel = Kernel()
        kernel.ns["big"] = os.urandom(5 << 20)
        sent = []

        def send(frame, line):
            sent.append(frame if frame is not None else line)

        protocol = R.module("protocol")
        with kernel.active():
            snapshot.serve(protocol.SnapshotRequest("s1", BIG, BIG), kernel.ns, {}, kernel.state, None, send)
        chunks, done = sent[:-1], sent[-1]
        self.assertEqual(len(chunks), 2)
        self.assertEqual(done["status"], "saved")
        import base64
        import hashlib
        import json

        data = b"".join(base64.b64decode(json.loads(line)["data"]) for line in chunks)
        self.assertEqual(len(data), done["bytes"])
        self.assertEqual(hashlib.sha256(data).hexdigest(), done["digest"])
        sent.clear()
        with kernel.active():
            snapshot.serve(protocol.SnapshotRequest("s2", BIG, BIG, done["digest"]), kernel.ns, {}, kernel.state,
                           None, send)
        self.assertEqual([frame["status"] for frame in sent], ["unchanged"])


class LongLineTest(unittest.TestCase):
    def test_a_long_restore_line_keeps_its_data_out_of_the_json_parser(self):
        import base64
        import json

        protocol = R.module("protocol")
        data = base64.b64encode(os.urandom(300000))
        line = b'{"type":"restore","id":"r1","more":true,"data":"' + data + b'","executionCount":4}'
        kind, piece = protocol.classify_line(line)
        self.assertEqual(kind, "restore")
        self.assertEqual((piece.id, piece.more, piece.execution_count, bytes(piece.data)), ("r1", True, 4, data))
        code = "x = 1  # " + "y" * 100000
        line = json.dumps({"id": "c1", "code": code, "env": {"data": "kept"}}).encode()
        kind, request = protocol.classify_line(line)
        self.assertEqual((kind, request.code, request.env), ("execute", code, {"data": "kept"}))

    def test_pieces_are_joined_in_order(self):
        import base64

        protocol = R.module("protocol")
        payload = os.urandom(10000)
        pieces = [payload[:3000], payload[3000:3001], payload[3001:]]
        out = None
        for index, part in enumerate(pieces):
            out = restore.pieces.add(protocol.RestorePiece("p", base64.b64encode(part).decode(), index < 2))
        self.assertEqual(bytes(out), payload)


    def test_a_payload_in_pieces_is_put_together_in_the_size_its_header_announces(self):
        import base64

        protocol = R.module("protocol")
        kernel = Kernel()
        kernel.ns.update(blob=bytearray(os.urandom(300000)), text="x" * 1000)
        payload = bytes(payload_of(kernel.snap()))
        out = None
        cuts = [0, 20000, 20001, 200000, len(payload)]
        self.assertEqual(restore._announced_size(payload[:20000]), len(payload))
        for index in range(len(cuts) - 1):
            part = payload[cuts[index]:cuts[index + 1]]
            out = restore.pieces.add(protocol.RestorePiece("h", base64.b64encode(part).decode(), index < len(cuts) - 2))
        self.assertEqual(bytes(out), payload)

    def test_the_execution_count_may_come_with_any_piece(self):
        import base64

        protocol = R.module("protocol")
        kernel = Kernel()
        kernel.ns["x"] = 1
        payload = bytes(payload_of(kernel.snap()))
        fresh, sent = Kernel(), []
        with fresh.active():
            restore.serve(protocol.RestorePiece("e", base64.b64encode(payload[:100]).decode(), True, 12), fresh.ns,
                          fresh.state, lambda frame, line: sent.append(frame))
            restore.serve(protocol.RestorePiece("e", base64.b64encode(payload[100:]).decode(), False), fresh.ns,
                          fresh.state, lambda frame, line: sent.append(frame))
        self.assertEqual(sent, [{"type": "restore_done", "id": "e", "restored": ["x"], "skipped": []}])
        self.assertEqual((fresh.state.execution_count, restore.pieces.counts), (12, {}))

    def test_a_bad_piece_fails_the_restore_once_at_its_end(self):
        protocol = R.module("protocol")
        self.assertIsNone(restore.pieces.add(protocol.RestorePiece("q", "not base64!", True)))
        self.assertIsNone(restore.pieces.add(protocol.RestorePiece("q", "QUJD", True)))
        with self.assertRaisesRegex(restore.PayloadError, "not base64"):
            restore.pieces.add(protocol.RestorePiece("q", "QUJD", False))
        self.assertEqual(restore.pieces.pending, {})


class ViewFileTest(unittest.TestCase):
    def test_it_reads_like_a_file(self):
        import io

        data = b"first line\n" + b"x" * 600 + b"\nlast"
        for size in (-1, 5, 700):
            ours, theirs = restore._ViewFile(memoryview(bytearray(data))), io.BytesIO(data)
            while True:
                line = ours.readline(size)
                self.assertEqual(line, theirs.readline(size))
                if not line:
                    break
        ours = restore._ViewFile(memoryview(data))
        target = bytearray(4)
        self.assertEqual((ours.readinto(target), bytes(target), ours.read(3), ours.tell()), (4, b"firs", b"t l", 7))

    def test_old_protocols_unpickle_through_it(self):
        value = {"a": [1, 2.5, "x"], "b": (None, True)}
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            file = restore._ViewFile(memoryview(pickle.dumps(value, protocol)))
            self.assertEqual(pickle.Unpickler(file).load(), value)


class NumpyTest(SnapshotTestCase):
    def test_arrays_come_back_equal_and_writable(self):
        try:
            import numpy
        except ImportError:
            self.skipTest("numpy is not importable")
        kernel = Kernel()
        kernel.ns.update(np=numpy, a=numpy.arange(100000, dtype=numpy.float64), f=numpy.ones((300, 400), order="F"),
                         small=numpy.arange(3))
        kernel.ns["same"] = kernel.ns["a"]
        fresh, restored, skipped = restore_into(kernel.snap())
        self.assertEqual(skipped, [])
        ns = fresh.ns
        self.assertTrue(numpy.array_equal(ns["a"], kernel.ns["a"]))
        self.assertTrue(ns["f"].flags.f_contiguous and numpy.array_equal(ns["f"], kernel.ns["f"]))
        self.assertIs(ns["same"], ns["a"])
        ns["a"][0] = 5.0
        self.assertTrue(ns["a"].flags.writeable)


class BadPayloadTest(SnapshotTestCase):
    def payload(self):
        kernel = Kernel()
        kernel.ns["x"] = [1, 2, 3]
        return payload_of(kernel.snap())

    def test_not_a_snapshot(self):
        with self.assertRaises(restore.PayloadError):
            restore.restore(bytearray(b"garbage"), {}, state_module._KernelState())

    def test_truncated(self):
        data = self.payload()
        with self.assertRaisesRegex(restore.PayloadError, "header accounts for"):
            restore.restore(data[:-3], {}, state_module._KernelState())

    def test_another_format(self):
        data = self.payload().replace(b'"format":1', b'"format":9')
        with self.assertRaisesRegex(restore.PayloadError, "format 9"):
            restore.restore(data, {}, state_module._KernelState())

    def test_a_value_that_cannot_be_read_is_named_and_the_rest_restored(self):
        kernel = Kernel()
        kernel.ns.update(a=[1], b="second", c={"k": 3})
        data = payload_of(kernel.snap())
        at = data.find(b"second")
        data[at - 1] = 0xFF  # the string's length byte: the segment no longer parses as it should
        ns = {}
        restored, skipped = restore.restore(data, ns, state_module._KernelState())
        self.assertEqual(restored, ["a", "c"])
        self.assertEqual(list(reasons(skipped)), ["b"])
        self.assertEqual(ns["c"], {"k": 3})


if __name__ == "__main__":
    unittest.main()

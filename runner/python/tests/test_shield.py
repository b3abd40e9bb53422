"""Tests for the shield: what the runner loads late comes from the standard library, never from a cell's directory."""

import base64
import importlib
import importlib.util
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import runner_package  # noqa: E402

PACKAGE = runner_package.PACKAGE
runner_package.load()
shield = importlib.import_module(PACKAGE + ".shield")

# What the runner imports only when first used: its deferred modules, the standard modules its eager ones import
# inside functions on those paths (tracebacks, definitions, figures, display of functions), and what snapshot and
# restore import when they run.
DEFERRED = (
    PACKAGE + ".introspect", PACKAGE + ".magics", PACKAGE + ".snapshot", PACKAGE + ".restore",
    "ast", "traceback", "inspect", "base64",
    "array", "binascii", "functools", "gc", "hashlib", "importlib", "io", "json", "marshal", "pickle",
)

# Planted in the cell's directory, each raising on import: what the runner's deferred code imports, listed here
# rather than read from the shield so that a name dropped from it is caught.
SHADOWED = (
    "_blake2", "_colorize", "_compat_pickle", "_hashlib", "_heapq", "_opcode", "_opcode_metadata", "_pickle",
    "_sha3", "_struct", "_tokenize", "_typing", "array", "ast", "atexit", "base64", "binascii", "contextlib", "dis",
    "gc", "hashlib", "heapq", "inspect", "json", "linecache", "opcode", "pickle", "pkgutil", "queue", "readline",
    "rlcompleter", "signal", "struct", "textwrap", "token", "tokenize", "traceback", "typing", "weakref",
)

_PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
sys.dont_write_bytecode = True
import %s.server
start = set(sys.modules)
for name in sys.argv[2:]:
    importlib.import_module(name)
print(json.dumps(sorted(set(n.partition(".")[0] for n in set(sys.modules) - start) - start)))
""" % PACKAGE


class NamesTest(unittest.TestCase):
    def test_names_cover_every_module_the_deferred_imports_load(self):
        # -S: without site the start loads the least, so the deferred imports load the most.
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE, SOURCE_DIR] + list(DEFERRED),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        loaded = set(json.loads(proc.stdout)) - {PACKAGE}
        self.assertIn("inspect", loaded)
        self.assertEqual(sorted(loaded - shield.NAMES), [])


class _Runner:
    """boot.py from a private copy of the runner, driven one request at a time."""

    def __init__(self, test, runner_dir, cwd):
        self.test = test
        self.proc = subprocess.Popen([sys.executable, "-u", os.path.join(runner_dir, "boot.py")], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        test.addCleanup(self.close)
        self.pending = b""

    def send(self, message):
        """Write one request line."""
        self.proc.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def frames_until(self, request_id, last_type):
        """The frames of request_id up to and including its first frame of last_type."""
        frames = []
        deadline = time.monotonic() + 60
        while True:
            while b"\n" not in self.pending:
                left = deadline - time.monotonic()
                self.test.assertGreater(left, 0, "no %s for %s; got %r" % (last_type, request_id, frames))
                if select.select([self.proc.stdout], [], [], left)[0]:
                    data = os.read(self.proc.stdout.fileno(), 65536)
                    if not data:
                        self.test.fail("the runner ended: %s" % self.proc.stderr.read().decode())
                    self.pending += data
            line, self.pending = self.pending.split(b"\n", 1)
            frame = json.loads(line)
            if frame.get("id") == request_id:
                frames.append(frame)
                if frame["type"] == last_type:
                    return frames

    def cell(self, request_id, code, silent=False, **extra):
        """Run code; its frames up to done, which must not be an error."""
        message = {"id": request_id, "code": code, "silent": silent, "storeHistory": not silent}
        message.update(extra)
        self.send(message)
        frames = self.frames_until(request_id, "done")
        errors = [f for f in frames if f["type"] == "error"]
        self.test.assertEqual(errors, [], code)
        return frames

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def _text(frames, kind="stdout"):
    return "".join(f["data"] for f in frames if f["type"] == kind)


def _result(frames):
    return [f["bundle"]["text/plain"] for f in frames if f["type"] == "result"]


class ShadowedCellDirectoryTest(unittest.TestCase):
    """A cell's directory holds a module that raises on import for each of SHADOWED."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="veyyon-shield-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.runner = os.path.join(self.dir, "runner")
        os.mkdir(self.runner, 0o700)
        runner_package.copy_runner(self.runner)
        with open(os.path.join(self.runner, "prelude.py"), encoding="utf-8") as handle:
            self.prelude = handle.read()
        self.work = os.path.join(self.dir, "work")
        os.mkdir(self.work)
        for name in SHADOWED:
            with open(os.path.join(self.work, name + ".py"), "w") as handle:
                handle.write("raise RuntimeError('the cell directory shadowed %s')\n" % name)

    def start(self):
        runner = _Runner(self, self.runner, self.dir)
        runner.cell("prelude", self.prelude, silent=True)
        runner.cell("init", "", silent=True, cwd=self.work)
        return runner

    def test_introspection_magics_tracebacks_display_snapshot_and_restore_load_the_standard_modules(self):
        runner = self.start()
        self.send_error(runner)
        runner.cell("def", 'def double(x):\n    "Twice x."\n    return 2 * x\n\ndata = {"k": [1, 2, 3]}')
        runner.send({"type": "complete", "id": "comp", "code": "doub", "cursorPos": 4})
        reply = runner.frames_until("comp", "complete_reply")[-1]
        self.assertEqual((reply.get("error"), reply["matches"]), (None, ["double"]))
        runner.send({"type": "inspect", "id": "insp", "code": "double", "cursorPos": 6, "detailLevel": 0})
        reply = runner.frames_until("insp", "inspect_reply")[-1]
        self.assertIn("Twice x.", reply["bundle"].get("text/plain", ""), reply)
        self.assertIn("double", _text(runner.cell("magic", "%who")))
        self.assertEqual(_result(runner.cell("shown", "double")), ["<function __main__.double(x)>"])
        runner.send({"type": "snapshot", "id": "snap", "budget": 1 << 26, "valueBudget": 1 << 26})
        frames = runner.frames_until("snap", "snapshot_done")
        self.assertEqual((frames[-1]["status"], frames[-1].get("error")), ("saved", None))
        self.assertEqual(sorted(frames[-1]["names"]), ["data", "double"])
        payload = b"".join(base64.b64decode(f["data"]) for f in frames if f["type"] == "snapshot_chunk")
        names = sorted(n for n in SHADOWED if importlib.util.find_spec(n) is not None)
        imports = runner.cell("imports", "import sys\nimport %s\nsorted(n for n in %r if getattr(sys.modules.get(n), "
                                         "'__file__', '').startswith(%r))" % (", ".join(names), names, self.work))
        self.assertEqual(_result(imports), ["[]"])

        restored = self.start()
        restored.send({"type": "restore", "id": "rest", "data": base64.b64encode(payload).decode("ascii"),
                       "more": False})
        done = restored.frames_until("rest", "restore_done")[-1]
        self.assertEqual((done.get("error"), sorted(done["restored"]), done["skipped"]),
                         (None, ["data", "double"], []))
        self.assertEqual(_result(restored.cell("after", "double(data['k'][2])")), ["6"])

    def send_error(self, runner):
        runner.send({"id": "error", "code": "1 / 0", "silent": False, "storeHistory": True})
        frames = runner.frames_until("error", "done")
        error = [f for f in frames if f["type"] == "error"]
        self.assertEqual(len(error), 1, frames)
        self.assertEqual(error[0]["traceback"][0], "Traceback (most recent call last):", error)
        self.assertIn('File "<cell-1>", line 1', "\n".join(error[0]["traceback"]))


if __name__ == "__main__":
    unittest.main()

"""Tests for the threads the runner starts only once a cell runs on: none of them delays a start."""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner_package  # noqa: E402

RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runner.py")
_THREADS = "import threading\nsorted(t.name for t in threading.enumerate() if t.name.startswith('veyyon-'))"
_LATE = ["veyyon-parent", "veyyon-sigint", "veyyon-stdin"]
runner = runner_package.load()


def _results(*cells):
    """{id: result text} of cells run one after another, the runner's input left open until the last is done."""
    proc = subprocess.Popen([sys.executable, "-B", "-u", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, universal_newlines=True)
    results = {}
    try:
        for index, code in enumerate(cells):
            request_id = "c%d" % index
            proc.stdin.write(json.dumps({"id": request_id, "code": code, "silent": False, "storeHistory": True}) + "\n")
            proc.stdin.flush()
            while True:
                frame = json.loads(proc.stdout.readline())
                if frame["type"] == "result":
                    results[frame["id"]] = frame["bundle"]["text/plain"]
                if frame["type"] == "done" and frame["id"] == request_id:
                    break
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
    return results


class LateThreadsTest(unittest.TestCase):
    def test_running_once_a_cell_has_run_past_its_started_deadline(self):
        results = _results("import time\ntime.sleep(0.05)", _THREADS)
        self.assertEqual([name for name in eval(results["c1"]) if name in _LATE], _LATE)

    def test_started_on_the_first_wake_only_and_only_in_the_process_that_made_them(self):
        started, woken = [], []
        late = runner.module("server")._StartingLate(lambda: woken.append(1), [
            (lambda name: started.append(name), (name,), "veyyon-test-%s" % name) for name in ("a", "b")])
        self.assertEqual((started, woken), ([], []))
        late()
        late()
        deadline = time.monotonic() + 10
        while len(started) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual((sorted(started), woken), (["a", "b"], [1, 1]))
        forked = runner.module("server")._StartingLate(lambda: woken.append(2), [(started.append, ("c",), "x")])
        forked.pid = -1
        forked()
        self.assertEqual((sorted(started), woken), (["a", "b"], [1, 1, 2]))


if __name__ == "__main__":
    unittest.main()

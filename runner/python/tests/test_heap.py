"""Tests that the runner keeps freed heap for reuse, so a flood of stream frames does not grow and trim it per frame."""

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner_package  # noqa: E402

# Allocates and frees 1 MB of heap blocks (each below glibc's mmap threshold) 50 times, counting page faults.
_CHURN = (
    "import resource\n"
    "def churn():\n"
    "    blocks = [b'x' * 100000 for _ in range(10)]\n"
    "churn()\n"
    "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
    "for _ in range(50):\n"
    "    churn()\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
)


def _stdout_of(boot, cwd, code):
    """The stdout text of one cell in a fresh runner started from boot.py."""
    requests = [{"id": "init", "code": "", "silent": True, "storeHistory": False},
                {"id": "c", "code": code, "silent": False, "storeHistory": True}]
    proc = subprocess.run([sys.executable, "-u", boot], input="".join(json.dumps(r) + "\n" for r in requests),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, cwd=cwd, timeout=120)
    frames = [json.loads(line) for line in proc.stdout.splitlines()]
    return "".join(f["data"] for f in frames if f.get("id") == "c" and f["type"] == "stdout")


@unittest.skipUnless(sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc",
                     "glibc's heap trimming, its page faults counted with getrusage as Linux reports them")
class HeapTest(unittest.TestCase):
    def test_freed_heap_is_kept_for_reuse_by_a_runner_started_from_its_cache(self):
        scratch = tempfile.mkdtemp(prefix="veyyon-heap-test-")
        self.addCleanup(shutil.rmtree, scratch, True)
        boot = runner_package.copy_runner(scratch)
        _stdout_of(boot, scratch, "pass")
        faults = int(_stdout_of(boot, scratch, _CHURN))
        # With the heap trimmed whenever 128 KiB of its top were free, each round faulted 1 MB in again (over 10000).
        self.assertLess(faults, 1000)


if __name__ == "__main__":
    unittest.main()

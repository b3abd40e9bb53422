"""Measures the Python runner's snapshots over the real protocol (pipes, base64 chunks, JSON lines).

    python3 bench/snapshot_python.py [--python /usr/bin/python3] [--mb 100] [--kind numpy|plain]

1. a ~N MB namespace (numpy arrays and a pandas DataFrame, or plain lists and dicts): the time from
   the snapshot request to snapshot_done (all chunks read), and from the first restore piece to
   restore_done in a NEW runner, in MB/s of payload;
2. the cost of a snapshot of a tiny namespace (a few ints), as the host asks after every cell:
   saved (chunks sent) and unchanged (`known` equal), per request, and a cell's round trip beside it.

Not a test: it prints figures. It runs the runner from this checkout (runner/python/runner.py).
"""

import argparse
import base64
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "runner", "python", "runner.py")
PRELUDE = os.path.join(ROOT, "runner", "python", "prelude.py")


class Runner:
    def __init__(self, python):
        self.proc = subprocess.Popen([python, "-u", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.seq = 0
        self.execute("", silent=True, store=False)
        with open(PRELUDE, encoding="utf-8") as file:
            self.execute(file.read(), silent=True, store=False)

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def cpu(self):
        """The runner's CPU seconds so far (user + system), from /proc."""
        with open("/proc/%d/stat" % self.proc.pid) as file:
            fields = file.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def until(self, kind, request_id):
        frames = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("the runner ended")
            if line.startswith(b'{"type":"snapshot_chunk"'):
                # The driver cuts the base64 out itself: the json module scans a 5.6 MB string at tens of MB/s.
                start = line.index(b'"data":"') + 8
                frames.append({"type": "snapshot_chunk", "data": line[start:line.index(b'"', start)]})
                continue
            frame = json.loads(line)
            frames.append(frame)
            if frame["type"] == kind and frame.get("id") == request_id:
                return frames

    def execute(self, code, silent=False, store=True):
        self.seq += 1
        request_id = "c%d" % self.seq
        self.send({"id": request_id, "code": code, "silent": silent, "storeHistory": store})
        frames = self.until("done", request_id)
        errors = [f for f in frames if f["type"] == "error"]
        if errors:
            raise SystemExit("cell failed: %s" % errors[0]["evalue"])
        return frames

    def snapshot(self, known=None, budget=1 << 40):
        self.seq += 1
        request_id = "s%d" % self.seq
        message = {"type": "snapshot", "id": request_id, "budget": budget, "valueBudget": budget}
        if known is not None:
            message["known"] = known
        self.send(message)
        frames = self.until("snapshot_done", request_id)
        chunks = [base64.b64decode(f["data"]) for f in frames if f["type"] == "snapshot_chunk"]
        frames = [f for f in frames if f["type"] != "snapshot_chunk"]
        return frames[-1], b"".join(chunks)

    def restore(self, payload, piece=4 << 20):
        self.seq += 1
        request_id = "r%d" % self.seq
        for at in range(0, max(len(payload), 1), piece):
            last = at + piece >= len(payload)
            self.proc.stdin.write(b'{"type":"restore","id":"%s","more":%s,"data":"%s"}\n' % (
                request_id.encode(), b"false" if last else b"true", base64.b64encode(payload[at:at + piece])))
        self.proc.stdin.flush()
        return self.until("restore_done", request_id)[-1]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


NUMPY_CELL = """
import numpy as np, pandas as pd
rng = np.random.default_rng(1)
arrays = [rng.random(%(n)d // 5) for _ in range(3)]
ints = np.arange(%(n)d // 10, dtype=np.int64)
df = pd.DataFrame({'a': rng.random(%(n)d // 30), 'b': np.arange(%(n)d // 30), 'c': rng.random(%(n)d // 30)})
"""

PLAIN_CELL = """
rows = [{'id': i, 'name': 'row %%d' %% i, 'score': i * 0.5, 'tags': ['a', 'b']} for i in range(%(n)d // 12)]
floats = [i * 1.5 for i in range(%(n)d // 3)]
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--kind", choices=("numpy", "plain"), default="numpy")
    parser.add_argument("--tiny", type=int, default=200)
    args = parser.parse_args()

    runner = Runner(args.python)
    # n: the number of 8-byte items that make about --mb MB
    cell = (NUMPY_CELL if args.kind == "numpy" else PLAIN_CELL) % {"n": args.mb * 1024 * 1024 // 8}
    runner.execute(cell)
    began, cpu = time.perf_counter(), runner.cpu()
    done, payload = runner.snapshot()
    save_s, save_cpu = time.perf_counter() - began, runner.cpu() - cpu
    mb = len(payload) / 1e6
    print("%s namespace: payload %.1f MB, names %s, skipped %s" % (args.kind, mb, done["names"], done["skipped"]))
    print("save (request -> snapshot_done, chunks read): %.3f s = %.0f MB/s; runner CPU %.2f s = %.0f MB/s"
          % (save_s, mb / save_s, save_cpu, mb / max(save_cpu, 0.01)))
    began = time.perf_counter()
    unchanged, _ = runner.snapshot(known=done["digest"])
    print("unchanged (known digest, no chunks): %.3f s, status %s" % (time.perf_counter() - began, unchanged["status"]))
    for delay in (0.0, 0.02, 0.1, 0.3, 0.6):
        runner.seq += 1
        snap_id, cell_id = "y%d" % runner.seq, "yc%d" % runner.seq
        runner.send({"type": "snapshot", "id": snap_id, "budget": 1 << 40, "valueBudget": 1 << 40})
        time.sleep(delay)
        began = time.perf_counter()
        runner.send({"id": cell_id, "code": "1", "silent": False, "storeHistory": True})
        frames = runner.until("done", cell_id)
        waited = time.perf_counter() - began
        status = [f for f in frames if f["type"] == "snapshot_done"]
        print("a cell sent %3d ms into a snapshot: done after %.0f ms (snapshot %s)" % (
            delay * 1000, waited * 1000, status[0]["status"] if status else "?"))
    runner.close()
    fresh = Runner(args.python)
    began, cpu = time.perf_counter(), fresh.cpu()
    answer = fresh.restore(payload)
    restore_s, restore_cpu = time.perf_counter() - began, fresh.cpu() - cpu
    print("restore (first piece -> restore_done, new runner): %.3f s = %.0f MB/s; runner CPU %.2f s = %.0f MB/s; "
          "restored %d, skipped %s, error %s" % (restore_s, mb / restore_s, restore_cpu, mb / max(restore_cpu, 0.01),
                                                 len(answer["restored"]), answer["skipped"], answer.get("error")))
    fresh.close()

    tiny = Runner(args.python)
    tiny.execute("a = 1\nb = 2\nc = 3")
    timings = {"cell": [], "saved": [], "unchanged": []}
    known = None
    for _ in range(args.tiny):
        began = time.perf_counter()
        tiny.execute("a += 1")
        timings["cell"].append(time.perf_counter() - began)
        began = time.perf_counter()
        done, _ = tiny.snapshot()
        timings["saved"].append(time.perf_counter() - began)
        known = done["digest"]
        began = time.perf_counter()
        tiny.snapshot(known=known)
        timings["unchanged"].append(time.perf_counter() - began)
    tiny.close()
    for name, values in timings.items():
        values.sort()
        print("tiny namespace, %-9s p50 %.0f us, p90 %.0f us (payload %d bytes)" % (
            name, values[len(values) // 2] * 1e6, values[len(values) * 9 // 10] * 1e6, done["bytes"]))


if __name__ == "__main__":
    main()

"""Benchmark floor: the least an NDJSON exec loop over stdin/stdout can do.

`floor.py` serves {"id", "code"} lines, running each in one namespace and replying with
stdout/display frames and a `done` frame. `floor.py pipe LINES` waits for one input
line (after saying "ready" on stderr), then prints LINES lines of 1 KiB straight to
the pipe: the raw pipe rate.
"""
import base64
import json
import sys


def send(frame):
    out.write((json.dumps(frame) + "\n").encode())
    out.flush()


class Stdout:
    def write(self, text):
        send({"type": "stdout", "data": text})
        return len(text)

    def flush(self):
        pass


def display_png(data):
    send({"type": "display", "bundle": {"image/png": base64.b64encode(data).decode()}})


def serve():
    namespace = {"display_png": display_png}
    sys.stdout = Stdout()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        status = "ok"
        try:
            exec(compile(request["code"], "<cell>", "exec"), namespace)
        except BaseException:
            status = "error"
        send({"type": "done", "id": request["id"], "status": status})


def pipe(lines):
    sys.stderr.write("ready\n")
    sys.stderr.flush()
    sys.stdin.readline()
    text = "x" * 1023
    for _ in range(lines):
        print(text)


out = sys.stdout.buffer
if __name__ == "__main__":
    pipe(int(sys.argv[2])) if sys.argv[1:2] == ["pipe"] else serve()

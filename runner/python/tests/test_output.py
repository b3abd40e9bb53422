"""Unit tests for output coalescing: stdout/stderr frames by size, by timer, before other frames, in order."""

import importlib.util
import itertools
import json
import os
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner_package  # noqa: E402


class _RecordingOs:
    """Stands in for the runner's os module: records every write to the frame fd."""

    def __init__(self, real, fd):
        self._real = real
        self._fd = fd
        self.writes = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def write(self, fd, data):
        if fd == self._fd:
            self.writes.append(bytes(data))
        return self._real.write(fd, data)


class Wire:
    """A freshly loaded runner module whose frames go to /dev/null and are recorded per os.write."""

    def __init__(self):
        self.runner = runner_package.load(fresh=True)
        self.fd = os.open(os.devnull, os.O_WRONLY)
        self.os = _RecordingOs(os, self.fd)
        self.runner.os = self.os
        self.runner._frame_fd = self.fd
        self.runner._state.current_id = "r1"
        self.pipe = None

    def close(self):
        self.runner._FLUSH_SECONDS = 3600
        self.runner._STARTED_SECONDS = 3600
        os.close(self.fd)
        if self.pipe is not None:
            for fd in self.pipe:
                os.close(fd)

    def attach_fd_pump(self):
        """Give the module's fd pump a pipe; returns its write end (what fd 1 is in a kernel)."""
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        self.pipe = (read_end, write_end)
        self.runner._fd_pump.fd = read_end
        return write_end

    def frames(self):
        data = b"".join(self.os.writes)
        return [json.loads(line) for line in data.decode("utf-8").splitlines()]

    def streams(self):
        return [(f["type"], f["data"]) for f in self.frames() if f["type"] in ("stdout", "stderr")]

    def wait_for_writes(self, count, timeout=10.0):
        deadline = time.monotonic() + timeout
        while len(self.os.writes) < count and time.monotonic() < deadline:
            time.sleep(0.002)
        return len(self.os.writes)


class CoalescingTest(unittest.TestCase):
    def setUp(self):
        self.wire = Wire()
        self.runner = self.wire.runner
        self.runner._FLUSH_SECONDS = 3600
        self.runner._STARTED_SECONDS = 3600

    def tearDown(self):
        self.wire.close()

    def test_lines_of_one_stream_become_one_frame(self):
        for i in range(100):
            print("line", i, file=self.runner._stdout)
        self.assertEqual(self.wire.os.writes, [])
        self.runner._flush_streams()
        self.assertEqual(self.wire.streams(), [("stdout", "".join("line %d\n" % i for i in range(100)))])

    def test_size_flush_sends_whole_chunks_at_once_and_keeps_the_tail(self):
        chunk = self.runner.CHUNK_CHARS
        line = "x" * 999 + "\n"
        count = chunk // len(line) + 2
        for _ in range(count):
            self.runner._stdout.write(line)
        sent = self.wire.streams()
        self.assertEqual(len(sent), 1)
        self.assertEqual(len(sent[0][1]), chunk)
        self.runner._flush_streams()
        sent = self.wire.streams()
        self.assertEqual("".join(data for _, data in sent), line * count)
        self.assertEqual(len(sent[1][1]), count * len(line) - chunk)

    def test_a_long_write_without_newline_streams_in_bounded_chunks(self):
        chunk = self.runner.CHUNK_CHARS
        text = "ab" * (5 * chunk) + "tail"
        self.runner._stdout.write(text)
        sizes = [len(data) for _, data in self.wire.streams()]
        self.assertEqual(sizes, [chunk] * 10)
        self.runner._flush_streams()
        self.assertEqual("".join(data for _, data in self.wire.streams()), text)

    def test_timer_sends_queued_output_without_a_flush(self):
        self.runner._FLUSH_SECONDS = 0.2
        self.runner._stdout.write("progress\n")
        self.assertEqual(self.wire.os.writes, [])
        self.assertEqual(self.wire.wait_for_writes(1), 1)
        self.assertEqual(self.wire.streams(), [("stdout", "progress\n")])

    def test_queued_output_leaves_before_any_other_frame(self):
        self.runner._stdout.write("before status\n")
        self.runner.emit_status("find", count=1)
        self.runner._stdout.write("before display\n")
        self.runner.display({"text/plain": "shown"}, raw=True)
        self.runner._stderr.write("before done\n")
        self.runner._send_raw('{"type":"done","id":"r1","status":"ok","executionCount":1,"cancelled":false}\n')
        self.assertEqual([(f["type"], f.get("data")) for f in self.wire.frames()], [
            ("stdout", "before status\n"), ("display", None), ("stdout", "before display\n"), ("display", None),
            ("stderr", "before done\n"), ("done", None)])

    def test_stdout_and_stderr_keep_the_order_they_were_written_in(self):
        out, err = self.runner._stdout, self.runner._stderr
        out.write("o1\n")
        out.write("o2\n")
        err.write("e1\n")
        out.write("o3")
        err.write("e2\n")
        err.write("e3\n")
        self.runner._flush_streams()
        self.assertEqual(self.wire.streams(), [
            ("stdout", "o1\no2\n"), ("stderr", "e1\n"), ("stdout", "o3"), ("stderr", "e2\ne3\n")])

    def test_output_of_the_previous_request_is_sent_under_its_own_id(self):
        self.runner._stdout.write("first\n")
        self.runner._state.current_id = "r2"
        self.runner._stdout.write("second\n")
        self.runner._flush_streams()
        self.assertEqual([(f["id"], f["data"]) for f in self.wire.frames()], [("r1", "first\n"), ("r2", "second\n")])

    def test_lone_surrogates_and_non_ascii_stay_valid_frames(self):
        self.runner._stdout.write("é€😀 lone:\ud800: end\n")
        self.runner._stdout.buffer.write(b"bad:\xff\xfe:\n")
        self.runner._flush_streams()
        self.assertEqual(self.wire.streams(), [("stdout", "é€😀 lone:\ud800: end\nbad:\ufffd\ufffd:\n")])

    def test_writes_from_threads_never_interleave_inside_a_frame(self):
        def writer(n):
            for i in range(2000):
                self.runner._stdout.write("t%d-%d\n" % (n, i))

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.runner._flush_streams()
        lines = "".join(data for _, data in self.wire.streams()).splitlines()
        self.assertEqual(len(lines), 8000)
        for n in range(4):
            self.assertEqual([line for line in lines if line.startswith("t%d-" % n)],
                             ["t%d-%d" % (n, i) for i in range(2000)])

    def test_fd_1_output_keeps_its_place_once_the_pump_has_seen_data(self):
        fd1 = self.wire.attach_fd_pump()
        self.runner._stdout.write("a\n")
        os.write(fd1, b"b\n")
        self.runner._flush_streams()
        self.assertTrue(self.runner._fd_pump.seen)
        self.runner._stdout.write("c\n")
        os.write(fd1, b"d\n")
        self.runner._stdout.write("e\n")
        os.write(fd1, b"\xc3")
        self.runner._flush_all_output()
        self.assertEqual("".join(data for _, data in self.wire.streams()), "a\nb\nc\nd\ne\n\ufffd")

    @unittest.skipUnless(hasattr(os, "fork"), "needs os.fork")
    def test_a_forked_child_sends_each_line_at_once_and_not_the_parents_queue(self):
        read_end, write_end = os.pipe()
        self.runner._frame_fd = write_end
        self.runner._stdout.write("parent\n")
        pid = os.fork()
        if pid == 0:
            try:
                self.runner._stdout.write("child ")
                self.runner._stdout.write("line\n")
                self.runner._stdout.write("unterminated")
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        self.runner._frame_fd = self.wire.fd
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            frames = [json.loads(line) for line in pipe.read().splitlines()]
        self.assertEqual([f["data"] for f in frames], ["parent\n", "child line\n"])


class StreamLineTest(unittest.TestCase):
    """_stream_line: large chunks take the bytes.replace() escaper, the rest the json module; both decode alike."""

    def setUp(self):
        self.runner = runner_package.load(fresh=True)

    def reference(self, text):
        rid = self.runner._json_string("r1")
        try:
            return ('{"type":"stdout","id":%s,"data":%s}\n' % (rid, self.runner._json_text(text))).encode("utf-8")
        except UnicodeEncodeError:
            return ('{"type":"stdout","id":%s,"data":%s}\n' % (rid, self.runner._json_string(text))).encode("ascii")

    def test_every_size_and_escape_decodes_to_the_text(self):
        alphabet = ["a", " ", "\u00e9", "\u20ac", "\U0001f600", "\\", '"', "\n", "\t", "\r", "\x00", "\x1b", "\x7f",
                    "\u2028", "\ud800", "\udfff"]
        rng = __import__("random").Random(14)
        for _ in range(3000):
            size = rng.choice([0, 1, 7, 511, 512, 600, 3000])
            pool = alphabet if rng.random() < 0.3 else alphabet[:10]
            text = "".join(rng.choice(pool) for _ in range(size))
            line = self.runner._stream_line("stdout", "r1", text)
            self.assertTrue(line.endswith(b"\n"))
            self.assertEqual(line.count(b"\n"), 1)
            self.assertEqual(json.loads(line), json.loads(self.reference(text)))
            if "\ud800" not in text and "\udfff" not in text:
                self.assertEqual(json.loads(line)["data"], text)
                self.assertEqual(line, self.reference(text))

    def test_a_large_plain_chunk_takes_the_replace_escaper(self):
        text = ('say "hi"\t\\ \u00e9\r\n' * 100)
        self.assertEqual(self.runner._json_text_bytes(text), self.runner._json_text(text).encode("utf-8"))
        self.assertIsNone(self.runner._json_text_bytes(text + "\ud800"))


class StartedTest(unittest.TestCase):
    def setUp(self):
        self.wire = Wire()
        self.runner = self.wire.runner

    def tearDown(self):
        self.wire.close()

    def test_a_trivial_cell_writes_started_and_done_at_once(self):
        self.runner._STARTED_SECONDS = 3600
        self.runner._defer_started("r1")
        self.runner._send_raw('{"type":"done","id":"r1","status":"ok","executionCount":1,"cancelled":false}\n')
        self.assertEqual(len(self.wire.os.writes), 1)
        self.assertEqual([f["type"] for f in self.wire.frames()], ["started", "done"])

    def test_a_quick_cells_started_result_and_done_take_one_write(self):
        self.runner._STARTED_SECONDS = 3600
        self.runner._defer_started("r1")
        self.runner._send_with_started({"type": "result", "id": "r1", "bundle": {"text/plain": "1"}})
        self.assertEqual(self.wire.os.writes, [])
        self.runner._send_raw('{"type":"done","id":"r1","status":"ok","executionCount":1,"cancelled":false}\n')
        self.assertEqual(len(self.wire.os.writes), 1)
        self.assertEqual([f["type"] for f in self.wire.frames()], ["started", "result", "done"])

    def test_a_result_after_the_started_frame_left_is_sent_at_once_after_queued_output(self):
        self.runner._STARTED_SECONDS = 3600
        self.runner._FLUSH_SECONDS = 3600
        self.runner._defer_started("r1")
        self.runner._send_started()
        self.runner._stdout.write("before\n")
        self.runner._send_with_started({"type": "result", "id": "r1", "bundle": {"text/plain": "1"}})
        self.assertEqual([f["type"] for f in self.wire.frames()], ["started", "stdout", "result"])

    def test_started_leaves_with_the_first_frame(self):
        self.runner._STARTED_SECONDS = 3600
        self.runner._FLUSH_SECONDS = 3600
        self.runner._defer_started("r1")
        self.runner._stdout.write("hi\n")
        self.runner._flush_streams()
        self.assertEqual(len(self.wire.os.writes), 1)
        self.assertEqual([f["type"] for f in self.wire.frames()], ["started", "stdout"])

    def test_started_is_sent_by_the_timer_when_the_cell_stays_silent(self):
        self.runner._STARTED_SECONDS = 0.001
        self.runner._defer_started("r1")
        self.assertEqual(self.wire.wait_for_writes(1), 1)
        self.assertEqual(self.wire.frames(), [{"type": "started", "id": "r1"}])
        self.runner._send_raw('{"type":"done","id":"r1","status":"ok","executionCount":1,"cancelled":false}\n')
        self.assertEqual([f["type"] for f in self.wire.frames()], ["started", "done"])

    def test_the_timer_thread_goes_idle_when_nothing_waits(self):
        self.runner._IDLE_TICKS = 2
        self.runner._STARTED_SECONDS = 0.001
        self.runner._defer_started("r1")
        self.wire.wait_for_writes(1)
        deadline = time.monotonic() + 10
        while self.runner._ticker_awake and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertFalse(self.runner._ticker_awake)
        self.runner._FLUSH_SECONDS = 0.001
        self.runner._stdout.write("again\n")
        self.assertEqual(self.wire.wait_for_writes(2), 2)


class RequestReaderTest(unittest.TestCase):
    def setUp(self):
        self.wire = Wire()
        self.runner = self.wire.runner
        self.read_end, self.write_end = os.pipe()
        self.reader = self.runner._RequestReader(self.read_end)

    def tearDown(self):
        self.runner._state.cell_active = False
        for fd in (self.read_end, self.write_end):
            try:
                os.close(fd)
            except OSError:
                pass
        self.wire.close()

    def test_the_main_thread_reads_lines_split_across_writes_and_ends_after_them(self):
        os.write(self.write_end, b'{"id":"a","code":"1"}\n\n{"id":"b","co')
        self.assertEqual(self.reader.next_request().id, "a")
        os.write(self.write_end, b'de":"2"}\n{"id":"c","code":"3"}')
        self.assertEqual(self.reader.next_request().id, "b")
        os.close(self.write_end)
        self.assertEqual(self.reader.next_request().id, "c")
        self.assertIs(self.reader.next_request(), self.runner._END_OF_INPUT)
        self.assertIs(self.reader.next_request(), self.runner._END_OF_INPUT)

    def test_the_reader_thread_reads_beside_a_running_cell_once_woken(self):
        self.runner._state.cell_active = True
        thread = threading.Thread(target=self.reader.run, daemon=True)
        thread.start()
        self.reader.wake()
        os.write(self.write_end, b'{"id":"next","code":"1"}\n')
        self.assertEqual(self.reader.requests.get(timeout=30).id, "next")
        self.runner._state.cell_active = False
        os.close(self.write_end)
        self.assertIs(self.reader.next_request(), self.runner._END_OF_INPUT)
        self.reader.wake()
        thread.join(30)
        self.assertFalse(thread.is_alive())

    def test_a_cell_past_its_started_deadline_wakes_the_reader(self):
        woken = threading.Event()
        self.runner._wake_reader = woken.set
        self.runner._STARTED_SECONDS = 0.001
        self.runner._defer_started("r1")
        self.runner._send_started()
        self.assertTrue(woken.wait(30))


# Run in a child interpreter: watch_fd_writers wraps os.write and adds an audit hook for good.
_FD_ORDER_SCRIPT = r"""
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import runner_package

runner = runner_package.load(fresh=True)
if sys.argv[2] == "watch":
    runner.watch_fd_writers()
frames_read, frames_write = os.pipe()
runner._frame_fd = frames_write
runner._state.current_id = "r1"
pump_read, pump_write = os.pipe()
os.set_blocking(pump_read, False)
runner._fd_pump.fd = pump_read
saved = os.dup(1)
os.dup2(pump_write, 1)
out = runner._stdout
out.write("a\n")
subprocess.run(["echo", "b"])
out.write("c\n")
runner._flush_all_output()
os.write(1, b"d\n")
out.write("e\n")
runner._flush_all_output()
os.close(frames_write)
lines = os.read(frames_read, 1 << 16).decode().splitlines()
os.write(saved, json.dumps([json.loads(line)["data"] for line in lines]).encode())
"""


class FdWriteOrderTest(unittest.TestCase):
    """No pump thread runs here, so only the marks of os.write and child processes read fd 1 in time."""

    def order(self, mode):
        import subprocess

        done = subprocess.run([sys.executable, "-c", _FD_ORDER_SCRIPT, HERE, mode], capture_output=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr.decode())
        return "".join(json.loads(done.stdout))

    def test_a_child_process_and_os_write_keep_their_place_among_stream_writes(self):
        self.assertEqual(self.order("watch"), "a\nb\nc\nd\ne\n")

    def test_without_the_marks_fd_1_falls_behind(self):
        self.assertEqual(self.order("plain"), "a\nc\nb\ne\nd\n")


if __name__ == "__main__":
    unittest.main()

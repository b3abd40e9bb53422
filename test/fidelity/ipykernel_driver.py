"""Runs cells through a real ipykernel and prints what each produced, for the differential test.

Usage: python3 ipykernel_driver.py < cells.json > outputs.json   (the kernel runs in the current directory)
cells.json is a JSON list of cell sources; the output is a JSON list with, per cell:
{"status", "executionCount", "stdout", "stderr", "outputs": [{"kind": "display"|"result", "data": {...}}],
 "error": {"ename", "evalue", "traceback"} | null}
Everything the kernel writes (connection file, IPython profile) lives in a private temporary directory.
"""

import json
import os
import shutil
import sys
import tempfile

TIMEOUT = 600


def main():
    cells = json.load(sys.stdin)
    home = tempfile.mkdtemp(prefix="veyyon-ipykernel-")
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(home, "runtime")
    os.environ["IPYTHONDIR"] = os.path.join(home, "ipython")
    os.environ["JUPYTER_DATA_DIR"] = os.path.join(home, "data")
    os.environ["JUPYTER_CONFIG_DIR"] = os.path.join(home, "config")
    os.environ["JUPYTER_PLATFORM_DIRS"] = "1"
    os.environ.pop("MPLBACKEND", None)
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    manager, client = _start()
    try:
        results = [_run(client, code) for code in cells]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        shutil.rmtree(home, ignore_errors=True)
    json.dump(results, sys.stdout)


def _start():
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_cmd=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    manager.start_kernel(cwd=os.getcwd())
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=TIMEOUT)
    return manager, client


# ipykernel forwards what a cell writes to fd 1/2 from a watcher thread, so on a loaded machine
# it can arrive after the cell's reply, under the next request. A silent pause after each cell
# catches it, and its stream output is the cell's.
_SETTLE = "import time as _t; _t.sleep(0.5)"


def _collect(client, msg_id, cell):
    while True:
        msg = client.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            cell[content["name"]] += content["text"]
        elif kind in ("display_data", "execute_result"):
            cell["outputs"].append({"kind": "result" if kind == "execute_result" else "display", "data": content["data"]})
        elif kind == "error":
            cell["error"] = {"ename": content["ename"], "evalue": content["evalue"], "traceback": content["traceback"]}
        elif kind == "status" and content["execution_state"] == "idle":
            break
    while True:
        reply = client.get_shell_msg(timeout=TIMEOUT)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply


def _run(client, code):
    # stop_on_error=False: after a cell raises, ipykernel aborts requests that arrive before it
    # clears its abort flag, which a loaded machine hits even though each cell waits for the last.
    msg_id = client.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
    cell = {"status": None, "executionCount": None, "stdout": "", "stderr": "", "outputs": [], "error": None}
    reply = _collect(client, msg_id, cell)
    _collect(client, client.execute(_SETTLE, silent=True, store_history=False, allow_stdin=False), cell)
    cell["status"] = reply["content"]["status"]
    cell["executionCount"] = reply["content"].get("execution_count")
    return cell


if __name__ == "__main__":
    main()

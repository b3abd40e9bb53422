"""Measures Jupyter (ipykernel through jupyter_client's BlockingKernelClient) for the bench.

Usage: jupyter_driver.py FIGURE JSON_PARAMS. Timing happens here, next to the client;
the last stdout line is "RESULT <json>". Every kernel started is shut down on the way out.
"""
import json
import os
import subprocess
import sys
import time

from jupyter_client import KernelManager

MANAGERS = []


def launch():
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    MANAGERS.append(manager)
    return manager


def connect(manager, timeout=60):
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=timeout)
    return client


def start():
    manager = launch()
    return manager, connect(manager)


def stop(manager, client):
    client.stop_channels()
    manager.shutdown_kernel(now=True)
    MANAGERS.remove(manager)


def kernel_pid(manager):
    provisioner = getattr(manager, "provisioner", None)
    process = getattr(provisioner, "process", None) or getattr(manager, "kernel", None)
    return process.pid


def rss(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pss(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(client, code, on_output=None, on_interrupt_point=None):
    """Executes code and waits for its reply and the kernel going idle; returns the reply status."""
    msg_id = client.execute(code, stop_on_error=on_interrupt_point is None)
    idle = False
    reply = None
    while not idle:
        message = client.get_iopub_msg(timeout=120)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        kind = message["msg_type"]
        if kind == "status" and message["content"]["execution_state"] == "idle":
            idle = True
        elif kind in ("stream", "display_data", "execute_result") and on_output is not None:
            on_output(kind, message["content"])
        if on_interrupt_point is not None and kind == "stream":
            on_interrupt_point()
            on_interrupt_point = None
    while reply is None:
        message = client.get_shell_msg(timeout=120)
        if message["parent_header"].get("msg_id") == msg_id:
            reply = message["content"]["status"]
    return reply


def roundtrip(params):
    manager, client = start()
    try:
        for _ in range(params["warmup"]):
            run(client, params["code"])
        samples = []
        for _ in range(params["cells"]):
            began = time.perf_counter()
            run(client, params["code"])
            samples.append((time.perf_counter() - began) * 1000)
        return {"samplesMs": samples}
    finally:
        stop(manager, client)


def cold(params):
    samples = []
    for _ in range(params["runs"]):
        began = time.perf_counter()
        manager, client = start()
        try:
            values = []
            run(client, "1 + 1", on_output=lambda kind, content: values.append(content))
            samples.append((time.perf_counter() - began) * 1000)
            if not values:
                raise RuntimeError("1 + 1 produced no result")
        finally:
            stop(manager, client)
    return {"samplesMs": samples}


def stream(params):
    manager, client = start()
    try:
        run(client, "import sys")
        counted = {"bytes": 0, "peak": 0}
        base = rss(os.getpid())

        def on_output(kind, content):
            counted["bytes"] += len(content.get("text", "").encode())
            counted["peak"] = max(counted["peak"], rss(os.getpid()) - base)

        began = time.perf_counter()
        status = run(client, params["code"], on_output=on_output)
        elapsed = (time.perf_counter() - began) * 1000
        return {"bytes": counted["bytes"], "ms": elapsed, "status": status, "clientRssGrowth": counted["peak"]}
    finally:
        stop(manager, client)


def rich(params):
    manager, client = start()
    try:
        run(client, params["setup"] + "\nfrom IPython.display import Image, display")
        counted = {"bytes": 0, "count": 0}

        def on_output(kind, content):
            data = content.get("data", {}).get("image/png")
            if data is not None:
                counted["count"] += 1
                counted["bytes"] += len(data) * 3 // 4

        began = time.perf_counter()
        status = run(client, params["code"], on_output=on_output)
        elapsed = (time.perf_counter() - began) * 1000
        return {"bytes": counted["bytes"], "count": counted["count"], "ms": elapsed, "status": status}
    finally:
        stop(manager, client)


def interrupt(params):
    manager, client = start()
    try:
        out = {}
        for name, code in params["cells"].items():
            samples = []
            for _ in range(params["runs"]):
                mark = {}

                def fire():
                    time.sleep(params["settleMs"] / 1000)
                    mark["at"] = time.perf_counter()
                    manager.interrupt_kernel()

                status = run(client, code, on_output=lambda kind, content: None, on_interrupt_point=fire)
                samples.append((time.perf_counter() - mark["at"]) * 1000)
                if status != "error":
                    raise RuntimeError("an interrupted cell replied %r" % status)
            out[name] = samples
        return {"samplesMs": out}
    finally:
        stop(manager, client)


def scale(params):
    base = rss(os.getpid())
    began = time.perf_counter()
    managers = [launch() for _ in range(params["kernels"])]
    kernels = []
    restarts = 0
    for manager in managers:
        try:
            kernels.append((manager, connect(manager, timeout=600)))
        except RuntimeError:
            restarts += 1
            manager.shutdown_kernel(now=True)
            MANAGERS.remove(manager)
            replacement = launch()
            kernels.append((replacement, connect(replacement, timeout=600)))
    started_ms = (time.perf_counter() - began) * 1000
    try:
        time.sleep(params["settleMs"] / 1000)
        pids = [kernel_pid(manager) for manager, _ in kernels]
        rss_values = [rss(pid) for pid in pids]
        pss_values = [pss(pid) for pid in pids]
        began = time.perf_counter()
        ids = [(client, client.execute(params["code"])) for _, client in kernels]
        errors = 0
        for client, msg_id in ids:
            while True:
                message = client.get_shell_msg(timeout=120)
                if message["parent_header"].get("msg_id") == msg_id:
                    errors += message["content"]["status"] != "ok"
                    break
        cell_ms = (time.perf_counter() - began) * 1000
        return {"startMs": started_ms, "cellMs": cell_ms, "errors": errors, "restarts": restarts, "kernelRss": rss_values,
                "kernelPss": pss_values, "clientRssGrowth": rss(os.getpid()) - base}
    finally:
        for manager, client in kernels:
            client.stop_channels()


FIGURES = {"roundtrip": roundtrip, "cold": cold, "stream": stream, "rich": rich, "interrupt": interrupt, "scale": scale}


def main():
    figure, params = sys.argv[1], json.loads(sys.argv[2])
    try:
        result = FIGURES[figure](params)
    finally:
        for manager in list(MANAGERS):
            try:
                manager.shutdown_kernel(now=True)
            except Exception:
                pass
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()

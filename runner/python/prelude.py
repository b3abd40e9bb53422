"""veyyon prelude: the helpers every kernel starts with.

Standard library only, Python 3.8+. The host sends this source as one silent request
right after init. Run that way (``__name__ == "__main__"``), it executes itself once more
as the module ``veyyon_prelude``, so the helpers never look names up in the user's
namespace, then restores the namespace and binds only the public names into it. A second
run finds the module in ``sys.modules`` and rebinds the same objects: it changes nothing.
Loaded any other way (``importlib``, ``exec`` into a fresh dict) it only defines things;
``kv`` then works without a kernel (writing the files itself), the bridge helpers need
``veyyon_runtime``.

Public names:
    agent(prompt, *, agent="deep", model=None, label=None, schema=None, handle=False,
          isolated=None, apply=None, merge=None, images=None) -> str | object | dict
    agent.defer(...same...) -> DeferredCall
    completion(prompt, *, model=None, schema=None, images=None) -> str | object
    completion.defer(...same...) -> DeferredCall
    parallel(*calls, limit=8) -> list          calls: DeferredCall, or one list of them
    kv.set(key, value), kv.get(key, default=None), kv.list(), kv.delete(key) -> bool
    defs() -> Definitions                      name -> shape, sorted, at most 200
    env(key=None, value=None)                  %env as a function
    _emit_status(op, **fields)                 a status event (no-op outside a kernel)

Host bridge, one ``bridge`` frame per call (method, params -> the value the host answers):
    "agent"       {"prompt": str, "agent": str, "model": str|null, "label": str|null,
                   "schema": object|null, "isolated": bool|null, "apply": bool|null,
                   "merge": str|bool|null}
                  -> {"text": str, "id": str, "agent": str, "output"?: any}
    "completion"  {"prompt": str, "model": str|null, "schema": object|null}
                  -> {"text": str, "output"?: any}
    Either may carry "images": [{"mimeType": "image/png"|"image/jpeg", "data": base64}] (at most
    8, each at most 5 MiB), from the call's images= (figures, PIL images, PNG/JPEG bytes).
    null asks for the host's default. "isolated" runs the subagent in its own copy of the
    workspace, "apply" brings its changes back, "merge" names how (host-defined). A bare
    string answer is read as {"text": <it>}. With a schema, an "output" that is not a string
    is taken as the already-structured answer; otherwise "text" is parsed as JSON (one
    surrounding ``` fence is allowed). Either way the answer is checked against the schema.
    parallel() sends no frame of its own: each of its calls goes out under its own method
    with its own callId (so its own pause/resume and its own failure), and its params gain
    "parallel": {"group": str, "index": int, "count": int} so the host can show the fan-out.

kv files, shared with any other runtime of the session:
    directory  $VEYYON_ARTIFACTS_DIR/kv/
    file name  lowercase hex SHA-256 of the key's UTF-8 bytes, then ".json" (69 bytes, so
               every legal key fits a file name and case-insensitive file systems are safe)
    content    UTF-8 JSON {"key": <key>, "value": <value>}; the key is kept in the file
               because a 256-character key cannot be spelled in a file name
    writes     in a kernel, kv.set and kv.delete go to the host as one "kv" bridge call
               ({"op": "set", "key": key, "value": <the value's JSON text>} or
               {"op": "delete", "key": key}); the host checks the limits for the whole store
               and writes. Without a kernel the prelude writes itself. Either way an entry
               goes to ".<file name>.<unique>.tmp" (created exclusively, mode 0600) in the same
               directory, then rename(2) over the file name, so readers see the old or the new
               entry, never a torn one; other names in the directory are ignored
    limits     keys 1-256 code points, no "/", "\\" or NUL, valid UTF-8; a value's compact
               JSON (ensure_ascii off, NaN refused) at most 256 KiB; the entry files together
               at most 4 MiB (checked before each write)
    host reads with VEYYON_KV_READS=host in the environment (the host sets it when the store
               is not these files, e.g. a cluster's database) kv.get and kv.list are "kv"
               bridge calls too: {"op": "get", "key": key} answers the value's JSON text or
               null, {"op": "list"} the keys sorted by code point; no file is read
"""

_prelude_snapshot = dict(globals())

import itertools
import json
import linecache
import os
import re
import sys
import threading
import time
import types

MODULE_NAME = "veyyon_prelude"
EXPORTS = ("agent", "completion", "parallel", "kv", "defs", "env", "_emit_status")
PARALLEL_LIMIT = 8
# The most images one agent()/completion() call may pass, and the largest one, in bytes.
IMAGES_LIMIT = 8
IMAGE_BYTES_MAX = 5 * 1024 * 1024
_IMAGE_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"))
PARALLEL_STOP_SECONDS = 2.0
DEFS_LIMIT = 200
KV_KEY_MAX = 256
KV_VALUE_MAX = 256 * 1024
KV_STORE_MAX = 4 * 1024 * 1024
KV_FILE = re.compile(r"[0-9a-f]{64}\.json\Z")
AGENT_SCHEME = "agent://"

_FENCE = re.compile(r"```[\w+-]*[ \t]*\n(.*?)\n?```\Z", re.S)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*\Z")
_MISSING = object()
_groups = itertools.count(1)
_JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_value_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# ---------------------------------------------------------------------------
# Runtime access and status


def _runtime():
    try:
        import veyyon_runtime
    except ImportError:
        raise RuntimeError("this helper needs the veyyon kernel (module veyyon_runtime is not loaded)") from None
    return veyyon_runtime


def _emit_status(op, **fields):
    """Send a status event {"op": op, **fields} to the host; does nothing outside a kernel."""
    runtime = sys.modules.get("veyyon_runtime")
    if runtime is not None:
        runtime.emit_status(op, **fields)


def _clip(text, limit):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---------------------------------------------------------------------------
# JSON Schema subset: type, enum, properties, required, items


class SchemaError(ValueError):
    """An answer that is not valid JSON or not of the schema's shape; .text holds the raw answer."""

    def __init__(self, message, text=None, problem=None):
        super().__init__(message)
        self.text = text
        self.problem = problem


def json_type(value):
    """The JSON Schema type name of a decoded JSON value (a Python type name for anything else)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _type_matches(value, name):
    actual = json_type(value)
    if actual == name:
        return True
    if name == "number":
        return actual == "integer"
    return name == "integer" and actual == "number" and value.is_integer()


def _json_equal(a, b):
    kind_a, kind_b = json_type(a), json_type(b)
    if {kind_a, kind_b} <= {"integer", "number"}:
        return a == b
    if kind_a != kind_b:
        return False
    if kind_a == "array":
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if kind_a == "object":
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return a == b


def _member_path(path, name):
    return "%s.%s" % (path, name) if _IDENTIFIER.match(name) else "%s[%s]" % (path, json.dumps(name))


def _short_json(value):
    try:
        return _clip(json.dumps(value, ensure_ascii=False), 60)
    except (TypeError, ValueError):
        return _clip(repr(value), 60)


def schema_problem(value, schema, path="$"):
    """The first way value breaks schema, as "path: what is wrong", or None when it fits."""
    if not isinstance(schema, dict):
        return None
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_type_matches(value, name) for name in names):
            return "%s: expected %s, got %s" % (path, " or ".join(names), json_type(value))
    options = schema.get("enum")
    if isinstance(options, list) and not any(_json_equal(value, option) for option in options):
        return "%s: %s is not one of %s" % (path, _short_json(value), _short_json(options))
    if isinstance(value, dict):
        return _object_problem(value, schema, path)
    if isinstance(value, (list, tuple)):
        return _array_problem(value, schema, path)
    return None


def _object_problem(value, schema, path):
    for name in schema.get("required") or ():
        if name not in value:
            return "%s: missing required property %s" % (path, json.dumps(name))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, subschema in properties.items():
            if name in value:
                problem = schema_problem(value[name], subschema, _member_path(path, name))
                if problem is not None:
                    return problem
    return None


def _array_problem(value, schema, path):
    items = schema.get("items")
    for index, item in enumerate(value):
        subschema = items[index] if isinstance(items, list) and index < len(items) else items
        problem = schema_problem(item, subschema, "%s[%d]" % (path, index))
        if problem is not None:
            return problem
    return None


def check_schema_argument(schema):
    """Raise TypeError unless schema is a JSON object whose "type" names only JSON types."""
    if not isinstance(schema, dict):
        raise TypeError("schema must be a dict (a JSON Schema object), not %s" % type(schema).__name__)
    _require_json("schema", schema)
    expected = schema.get("type")
    names = [expected] if isinstance(expected, str) else expected
    if names is not None and (not isinstance(names, list) or any(n not in _JSON_TYPES for n in names)):
        raise TypeError("schema type must be one of %s (or a list of them), got %r" % (", ".join(_JSON_TYPES), expected))


def parse_json_answer(text, what="the answer"):
    """Decode text as JSON, allowing one surrounding ``` fence; SchemaError when it is not JSON."""
    body = text.strip()
    fenced = _FENCE.match(body) if body.startswith("```") else None
    if fenced is not None:
        body = fenced.group(1).strip()
    try:
        return json.loads(body)
    except ValueError as exc:
        raise SchemaError("%s is not valid JSON (%s); it begins %r" % (what, exc, _clip(text, 80)),
                          text=text, problem=str(exc)) from None


def structured_answer(answer, schema, what):
    """The answer's JSON data, checked against schema; SchemaError says where it does not fit."""
    output = answer.get("output")
    data = output if output is not None and not isinstance(output, str) else parse_json_answer(answer["text"], what)
    problem = schema_problem(data, schema)
    if problem is not None:
        raise SchemaError("%s does not match the schema: %s" % (what, problem), text=answer["text"], problem=problem)
    return data


# ---------------------------------------------------------------------------
# Host bridge: agent(), completion(), parallel()


class DeferredCall:
    """A bridge call described but not sent: call it to run it, or give it to parallel()."""

    __slots__ = ("method", "params", "_finish")

    def __init__(self, method, params, finish):
        self.method = method
        self.params = params
        self._finish = finish

    def __call__(self):
        """Send the call, wait for the host and return the helper's result."""
        return self._finish(_runtime().bridge_call(self.method, self.params))

    def run_tagged(self, tag, request_id=None):
        """Send the call with params["parallel"] = tag, only while request_id's cell runs; return the result."""
        params = dict(self.params)
        params["parallel"] = tag
        return self._finish(_runtime().bridge_call(self.method, params, request_id=request_id))

    def __repr__(self):
        return "<deferred %s(%r)>" % (self.method, _clip(self.params.get("prompt", ""), 40))


def _require_json(name, value):
    try:
        _value_encoder.encode(value)
    except (TypeError, ValueError) as exc:
        raise TypeError("%s must be JSON (dicts, lists, strings, numbers, booleans, None): %s" % (name, exc)) from None


def _require_text(name, value, optional=False):
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        kind = "None or " if optional else ""
        raise TypeError("%s must be %sa non-empty str, not %r" % (name, kind, _clip(repr(value), 40)))


def _require_flag(name, value):
    if value is not None and not isinstance(value, bool):
        raise TypeError("%s must be True, False or None, not %r" % (name, value))


def _image_of(index, image):
    """{"mimeType", "data" (base64)} for PNG/JPEG bytes, or for anything display() shows as a PNG or JPEG (a figure)."""
    import base64
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        mime = next((m for signature, m in _IMAGE_SIGNATURES if data.startswith(signature)), None)
        if mime is None:
            raise TypeError("images[%d] is bytes that are neither PNG nor JPEG" % index)
        encoded = base64.b64encode(data).decode("ascii")
    else:
        bundle = _runtime().mime_bundle(image)
        mime = next((m for m in ("image/png", "image/jpeg") if isinstance(bundle.get(m), str)), None)
        if mime is None:
            raise TypeError("images[%d] is %s, which shows no PNG or JPEG image (pass a figure, a PIL image, "
                            "or PNG or JPEG bytes)" % (index, type(image).__name__))
        encoded = bundle[mime]
    if len(encoded) * 3 // 4 > IMAGE_BYTES_MAX:
        raise ValueError("images[%d] is larger than %d MiB" % (index, IMAGE_BYTES_MAX // (1024 * 1024)))
    return {"mimeType": mime, "data": encoded}


def _images_param(images):
    if images is None:
        return None
    if isinstance(images, (bytes, bytearray, memoryview, str)) or not hasattr(images, "__iter__"):
        images = [images]
    images = list(images)
    if len(images) > IMAGES_LIMIT:
        raise ValueError("a call may pass at most %d images, not %d" % (IMAGES_LIMIT, len(images)))
    return [_image_of(index, image) for index, image in enumerate(images)]


def _read_answer(method, value):
    if isinstance(value, str):
        return {"text": value}
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value
    raise _runtime().BridgeError(
        "ProtocolError",
        "the host answered %s() with %s; expected a string or an object with a \"text\" string"
        % (method, _short_json(value)))


def _agent_finish(requested_agent, schema, handle):
    def finish(value):
        answer = _read_answer("agent", value)
        data = structured_answer(answer, schema, "agent() output") if schema is not None else _MISSING
        if not handle:
            return answer["text"] if data is _MISSING else data
        return _agent_node(answer, requested_agent, data)
    return finish


def _agent_node(answer, requested_agent, data):
    agent_id = answer.get("id")
    node = {
        "text": answer["text"],
        "output": answer.get("output", answer["text"]),
        "handle": AGENT_SCHEME + str(agent_id) if agent_id not in (None, "") else None,
        "id": agent_id,
        "agent": answer.get("agent") or requested_agent,
    }
    if data is not _MISSING:
        node["data"] = data
    return node


def _defer_agent(prompt, *, agent="deep", model=None, label=None, schema=None, handle=False,
                 isolated=None, apply=None, merge=None, images=None):
    """Describe an agent() call without sending it (for parallel())."""
    _require_text("prompt", prompt)
    _require_text("agent", agent)
    _require_text("model", model, optional=True)
    _require_text("label", label, optional=True)
    if schema is not None:
        check_schema_argument(schema)
    if not isinstance(handle, bool):
        raise TypeError("handle must be True or False, not %r" % (handle,))
    _require_flag("isolated", isolated)
    _require_flag("apply", apply)
    if merge is not None and not isinstance(merge, (str, bool)):
        raise TypeError("merge must be a str, a bool or None, not %s" % type(merge).__name__)
    params = {"prompt": prompt, "agent": agent, "model": model, "label": label, "schema": schema,
              "isolated": isolated, "apply": apply, "merge": merge}
    encoded = _images_param(images)
    if encoded is not None:
        params["images"] = encoded
    return DeferredCall("agent", params, _agent_finish(agent, schema, handle))


def agent(prompt, *, agent="deep", model=None, label=None, schema=None, handle=False,
          isolated=None, apply=None, merge=None, images=None):
    """Run one subagent on the host and return its final text (schema: the parsed object; handle: a node dict).

    images: figures, PIL images or PNG/JPEG bytes the model sees with the prompt."""
    return _defer_agent(prompt, agent=agent, model=model, label=label, schema=schema, handle=handle,
                        isolated=isolated, apply=apply, merge=merge, images=images)()


def _completion_finish(schema):
    def finish(value):
        answer = _read_answer("completion", value)
        return answer["text"] if schema is None else structured_answer(answer, schema, "completion() output")
    return finish


def _defer_completion(prompt, *, model=None, schema=None, images=None):
    """Describe a completion() call without sending it (for parallel())."""
    _require_text("prompt", prompt)
    _require_text("model", model, optional=True)
    if schema is not None:
        check_schema_argument(schema)
    params = {"prompt": prompt, "model": model, "schema": schema}
    encoded = _images_param(images)
    if encoded is not None:
        params["images"] = encoded
    return DeferredCall("completion", params, _completion_finish(schema))


def completion(prompt, *, model=None, schema=None, images=None):
    """Ask the host's model for one completion and return its text (with schema, the parsed object).

    images: figures, PIL images or PNG/JPEG bytes the model sees with the prompt."""
    return _defer_completion(prompt, model=model, schema=schema, images=images)()


agent.defer = _defer_agent
completion.defer = _defer_completion
_defer_agent.__qualname__ = "agent.defer"
_defer_completion.__qualname__ = "completion.defer"


def _deferred_calls(calls):
    if len(calls) == 1 and not isinstance(calls[0], (DeferredCall, str, bytes)) and not callable(calls[0]):
        try:
            calls = tuple(calls[0])
        except TypeError:
            pass
    for index, call in enumerate(calls):
        if not isinstance(call, DeferredCall):
            raise TypeError("parallel() takes deferred calls such as agent.defer('...') or "
                            "completion.defer('...'); argument %d is %s" % (index, _clip(repr(call), 60)))
    return calls


def _outcome(call, tag, request_id):
    try:
        return call.run_tagged(tag, request_id)
    except BaseException as exc:
        return exc


def _run_concurrently(calls, results, group, limit):
    pending = iter(range(len(calls)))
    lock = threading.Lock()
    stop = threading.Event()
    request_id = _runtime().current_request_id()

    def take():
        with lock:
            return None if stop.is_set() else next(pending, None)

    def work():
        index = take()
        while index is not None:
            results[index] = _outcome(calls[index], {"group": group, "index": index, "count": len(calls)}, request_id)
            index = take()

    threads = [threading.Thread(target=work, name="veyyon-parallel-%d" % n, daemon=True)
               for n in range(min(limit, len(calls)))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except BaseException:
        stop.set()
        _runtime().cancel_bridge_calls(request_id, "parallel() was interrupted")
        deadline = time.monotonic() + PARALLEL_STOP_SECONDS
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        raise


def parallel(*calls, limit=PARALLEL_LIMIT):
    """Run deferred agent()/completion() calls at once; results in order, a failed call's slot holds its exception."""
    calls = _deferred_calls(calls)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError("limit must be a positive int, not %r" % (limit,))
    results = [None] * len(calls)
    if calls:
        _run_concurrently(calls, results, "g%d" % next(_groups), limit)
        failed = sum(1 for r in results if isinstance(r, BaseException))
        _emit_status("parallel", count=len(calls), failed=failed)
    return results


# ---------------------------------------------------------------------------
# kv: JSON values that outlive the kernel


def check_kv_key(key):
    """Raise TypeError/ValueError unless key is a legal kv key (see the module docstring)."""
    if not isinstance(key, str):
        raise TypeError("kv keys are str, not %s" % type(key).__name__)
    if not 1 <= len(key) <= KV_KEY_MAX:
        raise ValueError("kv keys have 1 to %d characters; this one has %d" % (KV_KEY_MAX, len(key)))
    for bad, name in (("/", '"/"'), ("\\", '"\\"'), ("\0", "NUL")):
        if bad in key:
            raise ValueError("kv keys may not contain %s: %r" % (name, _clip(key, 60)))
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("kv keys must be valid Unicode (no lone surrogates): %r" % _clip(key, 60)) from None


def kv_file_name(key):
    """The file name that holds key: hex SHA-256 of its UTF-8 bytes plus ".json"."""
    import hashlib
    return hashlib.sha256(key.encode("utf-8")).hexdigest() + ".json"


def encode_kv_value(key, value):
    """The compact UTF-8 JSON of value; ValueError/TypeError when it is not JSON or over 256 KiB."""
    try:
        data = _value_encoder.encode(value).encode("utf-8")
    except TypeError as exc:
        raise TypeError("kv values must be JSON (dict, list, str, number, bool, None): %s" % exc) from None
    except (ValueError, UnicodeEncodeError) as exc:
        raise ValueError("kv value for %r is not valid JSON: %s" % (_clip(key, 60), exc)) from None
    if len(data) > KV_VALUE_MAX:
        raise ValueError("kv value for %r encodes to %d bytes; one value may have at most %d (256 KiB)"
                         % (_clip(key, 60), len(data), KV_VALUE_MAX))
    return data


def encode_kv_entry(key, value):
    """The bytes of key's file: {"key": key, "value": value} as compact UTF-8 JSON."""
    head = '{"key":%s,"value":' % _value_encoder.encode(key)
    return head.encode("utf-8") + encode_kv_value(key, value) + b"}"


def decode_kv_entry(data, key=None):
    """The (key, value) a kv file holds; ValueError when it is not an entry (for key, when given)."""
    try:
        entry = json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise ValueError("kv entry is not JSON: %s" % exc) from None
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or "value" not in entry:
        raise ValueError("kv entry is not an object with \"key\" and \"value\"")
    if key is not None and entry["key"] != key:
        raise ValueError("kv entry holds key %r, not %r" % (_clip(entry["key"], 60), _clip(key, 60)))
    return entry["key"], entry["value"]


def kv_directory():
    """$VEYYON_ARTIFACTS_DIR/kv; RuntimeError when the host did not set VEYYON_ARTIFACTS_DIR."""
    root = os.environ.get("VEYYON_ARTIFACTS_DIR")
    if not root:
        raise RuntimeError("kv needs VEYYON_ARTIFACTS_DIR, the session's artifacts directory, and it is not set")
    return os.path.join(root, "kv")


def _entry_names(directory):
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [name for name in names if KV_FILE.match(name)]


def _store_size(directory, skip):
    total = 0
    for name in _entry_names(directory):
        if name != skip:
            try:
                total += os.stat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                pass
    return total


def _write_atomically(directory, name, data):
    temp = os.path.join(directory, ".%s.%d-%d-%s.tmp" % (name, os.getpid(), threading.get_ident(), os.urandom(4).hex()))
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _read_entry(path, key):
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return _MISSING
    try:
        return decode_kv_entry(data, key)[1]
    except ValueError as exc:
        raise ValueError("kv entry for %r is damaged (%s)" % (_clip(key, 60), exc)) from None


def _host_reads():
    """Whether kv reads go to the host (VEYYON_KV_READS=host) instead of the files."""
    return os.environ.get("VEYYON_KV_READS") == "host"


def _host_kv(op, **params):
    """The host's answer to a kv call, or _MISSING outside a kernel; the host's refusals raise ValueError."""
    runtime = sys.modules.get("veyyon_runtime")
    if runtime is None:
        return _MISSING
    params["op"] = op
    try:
        return runtime.bridge_call("kv", params)
    except runtime.BridgeError as exc:
        if exc.name in ("KvInvalid", "KvStoreFull"):
            raise ValueError(exc.message) from None
        raise


def _host_kv_read(op, **params):
    """The host's answer to a kv read; RuntimeError outside a kernel, where there is no host to ask."""
    answer = _host_kv(op, **params)
    if answer is _MISSING:
        raise RuntimeError("kv reads go to the host (VEYYON_KV_READS=host), and there is no kernel host to ask")
    return answer


class KvStore:
    """JSON values under $VEYYON_ARTIFACTS_DIR/kv/, one file per key: they outlive %reset and the kernel."""

    def set(self, key, value):
        """Store value (JSON) under key, replacing what was there."""
        check_kv_key(key)
        if _host_kv("set", key=key, value=encode_kv_value(key, value).decode("utf-8")) is not _MISSING:
            return
        data = encode_kv_entry(key, value)
        directory = kv_directory()
        os.makedirs(directory, mode=0o700, exist_ok=True)
        name = kv_file_name(key)
        used = _store_size(directory, name)
        if used + len(data) > KV_STORE_MAX:
            raise ValueError("kv store is full: %d bytes stored, %d more would pass its %d-byte (4 MiB) limit; "
                             "kv.delete() keys you no longer need" % (used, len(data), KV_STORE_MAX))
        _write_atomically(directory, name, data)

    def get(self, key, default=None):
        """The value stored under key (a fresh copy), or default when there is none."""
        check_kv_key(key)
        if _host_reads():
            text = _host_kv_read("get", key=key)
            return default if text is None else json.loads(text)
        value = _read_entry(os.path.join(kv_directory(), kv_file_name(key)), key)
        return default if value is _MISSING else value

    def list(self):
        """The stored keys, sorted."""
        if _host_reads():
            return list(_host_kv_read("list"))
        directory = kv_directory()
        keys = []
        for name in _entry_names(directory):
            try:
                with open(os.path.join(directory, name), "rb") as handle:
                    keys.append(decode_kv_entry(handle.read())[0])
            except (OSError, ValueError):
                continue
        return sorted(keys)

    def delete(self, key):
        """Remove key; True when it was stored."""
        check_kv_key(key)
        answer = _host_kv("delete", key=key)
        if answer is not _MISSING:
            return answer is True
        try:
            os.unlink(os.path.join(kv_directory(), kv_file_name(key)))
        except FileNotFoundError:
            return False
        return True

    def __contains__(self, key):
        return self.get(key, _MISSING) is not _MISSING

    def __repr__(self):
        try:
            count = len(self.list())
        except RuntimeError:
            if _host_reads():
                return "<kv store: read through the host, which is not reachable here>"
            return "<kv store: VEYYON_ARTIFACTS_DIR is not set>"
        return "<kv store: %d key%s>" % (count, "" if count == 1 else "s")


kv = KvStore()


# ---------------------------------------------------------------------------
# defs() and env()


class Definitions(dict):
    """What defs() returns: name -> shape in name order; shown as one "name: shape" line each."""

    omitted = 0

    def __repr__(self):
        lines = ["%s: %s" % item for item in self.items()]
        if self.omitted:
            lines.append("... and %d more" % self.omitted)
        return "\n".join(lines) if lines else "(no user definitions)"

    __str__ = __repr__


def _signature(fn):
    import inspect
    try:
        return _clip(str(inspect.signature(fn)), 60)
    except (TypeError, ValueError):
        return "(...)"


def _dimensions(value):
    if isinstance(value, type):
        return None
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        return "x".join(str(n) for n in shape)
    return None


def _shape(value):
    if isinstance(value, type):
        return "class"
    if isinstance(value, types.ModuleType):
        return "module %s" % value.__name__
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        code = getattr(value, "__code__", None)
        prefix = "async function" if code is not None and code.co_flags & 0x0080 else "function"
        return prefix + _signature(value)
    if value is None or isinstance(value, (bool, int, float, complex)):
        return "%s = %s" % (type(value).__name__, _clip(repr(value), 40))
    if isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset)):
        return "%s[%d]" % (type(value).__name__, len(value))
    dimensions = _dimensions(value)
    if dimensions is not None:
        return "%s(%s)" % (type(value).__name__, dimensions)
    return type(value).__name__


def value_shape(value):
    """A short description of value: function(x), list[3], DataFrame(2x1), int = 5, module json."""
    try:
        return _shape(value)
    except Exception:
        return type(value).__name__


def defs():
    """Names your cells defined (sorted, at most 200), each with a short shape of its value."""
    runtime = _runtime()
    namespace = runtime.user_namespace()
    names = runtime.user_names()
    shown = Definitions((name, value_shape(namespace[name])) for name in names[:DEFS_LIMIT] if name in namespace)
    shown.omitted = max(0, len(names) - DEFS_LIMIT)
    return shown


def env(key=None, value=None):
    """Like %env: every variable (no key), one variable's value (key), or set key to value (printing it)."""
    if key is None:
        if value is not None:
            raise TypeError("env() needs a key to set a value")
        return dict(os.environ)
    if not isinstance(key, str) or not key or "=" in key or "\0" in key:
        raise ValueError("environment variable names are non-empty str without '=' or NUL, not %r" % (key,))
    if value is None:
        if key not in os.environ:
            raise KeyError("environment variable %s is not set" % key)
        return os.environ[key]
    os.environ[key] = str(value)
    print("env: %s=%s" % (key, value))


# ---------------------------------------------------------------------------
# Loading into a kernel


def _relabel(code, filename):
    consts = tuple(_relabel(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _load_module(code):
    if code.co_name != "<module>":
        raise RuntimeError("the prelude must run as a whole cell, not inside %s" % code.co_name)
    module = types.ModuleType(MODULE_NAME, __doc__)
    filename = "<veyyon prelude>"
    source = linecache.cache.get(code.co_filename)
    if source is not None and len(source) == 4:
        linecache.cache[filename] = (source[0], None, source[2], filename)
    exec(_relabel(code, filename), module.__dict__)
    del module._prelude_snapshot
    module.__all__ = list(EXPORTS)
    return module


def _restore(namespace, snapshot, doc):
    missing = object()
    for name in [n for n in namespace if n not in snapshot]:
        del namespace[name]
    for name, value in snapshot.items():
        if namespace.get(name, missing) is not value:
            namespace[name] = value
    if doc is not None and namespace.get("__doc__") == doc:
        namespace["__doc__"] = None


def install(namespace, snapshot, code):
    """Load this source once as module veyyon_prelude, put namespace back as it was, bind the public names."""
    module = sys.modules.get(MODULE_NAME)
    if module is None:
        module = _load_module(code)
        sys.modules[MODULE_NAME] = module
    exports = {name: getattr(module, name) for name in module.__all__}
    _restore(namespace, snapshot, module.__doc__)
    namespace.update(exports)


if __name__ == "__main__":
    install(globals(), _prelude_snapshot, sys._getframe().f_code)

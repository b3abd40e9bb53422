"""Restoring a snapshot's payload for a ``restore`` request (PROTOCOL.md, Snapshots and restores).

The payload is the one ``snapshot`` makes (its docstring has the layout). A payload that is not
of this format and version, or whose sections do not add up, is refused as a whole
(PayloadError, answered with ``restore_done.error``). Otherwise, in order: the working
directory, the environment and the ``sys.path`` additions (so the imports below find what they
found before), the modules (re-imported by name), the definitions (their source replayed),
the values (one unpickler, so shared objects come back shared), the definitions that needed a
value, then the random states. Each name that cannot come back is named with why; the rest of
the restore goes on.
"""

import json
import os
import struct
import sys

from . import definitions
from .snapshot import FORMAT, MAGIC, without_gc


class PayloadError(Exception):
    """The payload cannot be read at all."""


class _Pieces:
    """The base64 pieces of restore requests, by id, until the last one."""

    def __init__(self):
        self.pending = {}
        # id -> the executionCount given with any piece of that restore (the last one given wins)
        self.counts = {}

    def execution_count(self, piece):
        """The executionCount given with a piece of piece's restore, forgotten once asked at its end."""
        count = self.counts.pop(piece.id, None)
        return piece.execution_count if piece.execution_count is not None else count

    def add(self, piece):
        """The whole payload (bytearray) when piece is the last of its restore, else None. Raises PayloadError at
        the last piece when one of them was not base64 (so a restore is answered once)."""
        import binascii

        if piece.execution_count is not None and piece.more:
            self.counts[piece.id] = piece.execution_count
        entry = self.pending.get(piece.id)
        if not isinstance(entry, PayloadError):
            try:
                decoded = binascii.a2b_base64(piece.data)
            except (binascii.Error, ValueError) as exc:
                entry = self.pending[piece.id] = PayloadError("a piece of the payload is not base64: %s" % exc)
            else:
                entry = self.pending[piece.id] = _append(entry, decoded)
        if piece.more:
            return None
        del self.pending[piece.id]
        if isinstance(entry, PayloadError):
            raise entry
        data, size = entry
        if len(data) != size:
            del data[size:]
        return data


def _announced_size(data):
    """The payload's whole size as its header gives it, when data (its start) holds that much; else None."""
    offset = len(MAGIC)
    if bytes(data[:offset]) != MAGIC or len(data) < offset + 8:
        return None
    (header_size,) = struct.unpack(">Q", bytes(data[offset:offset + 8]))
    end = offset + 8 + header_size
    if len(data) < end + 8 or header_size > (64 << 20):
        return None
    try:
        header = json.loads(bytes(data[offset + 8:end]).decode("utf-8"))
        (stream_size,) = struct.unpack(">Q", bytes(data[end:end + 8]))
        total = end + 8 + stream_size + sum(int(size) for size in header["buffers"])
    except Exception:
        return None
    return total if total <= (1 << 40) else None


def _append(entry, decoded):
    """(buffer, bytes used) after appending decoded. The first piece's header announces the whole size: the buffer
    is made that big once (growing it piece by piece copied it again and again), else it grows."""
    if entry is None:
        total = _announced_size(decoded)
        if total is None or total < len(decoded):
            return bytearray(decoded), len(decoded)
        data = bytearray(total)
        data[:len(decoded)] = decoded
        return data, len(decoded)
    data, size = entry
    end = size + len(decoded)
    if end <= len(data):
        data[size:end] = decoded
    else:
        del data[size:]
        data += decoded
    return data, end


pieces = _Pieces()


def read_payload(data):
    """(header, pickle stream view, [buffers]) of a payload, or PayloadError."""
    view = memoryview(data)
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise PayloadError("the payload is not a Python runner snapshot")
    offset = len(MAGIC)
    try:
        (header_size,) = struct.unpack(">Q", view[offset:offset + 8])
        offset += 8
        header = json.loads(bytes(view[offset:offset + header_size]).decode("utf-8"))
        offset += header_size
        (stream_size,) = struct.unpack(">Q", view[offset:offset + 8])
        offset += 8
    except (struct.error, ValueError) as exc:
        raise PayloadError("the payload's header cannot be read: %s" % exc)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise PayloadError("the payload is of format %r; this runner reads format %d"
                           % (header.get("format") if isinstance(header, dict) else None, FORMAT))
    import pickle

    if not isinstance(header.get("pickleProtocol"), int) or header["pickleProtocol"] > pickle.HIGHEST_PROTOCOL:
        raise PayloadError("the payload uses pickle protocol %r; this Python reads up to %d"
                           % (header.get("pickleProtocol"), pickle.HIGHEST_PROTOCOL))
    try:
        stream = view[offset:offset + stream_size]
        offset += stream_size
        buffers = []
        for size in header["buffers"]:
            buffers.append(view[offset:offset + size])
            offset += size
        values = header["values"]
        for _name, start, end, first, count in values:
            if not (0 <= start <= end <= stream_size and 0 <= first and first + count <= len(buffers)):
                raise PayloadError("a value's segment lies outside the payload")
        for _name, _module, _subs in header["modules"]:
            pass
        for _name, _module, _qualname in header.get("imports") or []:
            pass
        for _name, _filename, _start, _source in header["definitions"]:
            pass
        if not isinstance(header["state"], dict):
            raise ValueError("state is not an object")
    except PayloadError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise PayloadError("the payload's header is malformed: %s: %s" % (type(exc).__name__, exc))
    if offset != len(view) or len(stream) != stream_size or any(len(b) != s for b, s in zip(buffers, header["buffers"])):
        raise PayloadError("the payload is %d bytes where its header accounts for %d" % (len(view), offset))
    return header, stream, buffers


def _reason(exc):
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:197] + "..."
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def _apply_paths(state, skipped):
    cwd = state.get("cwd")
    if isinstance(cwd, str):
        try:
            os.chdir(cwd)
        except OSError as exc:
            skipped.append({"name": "cwd", "reason": "the working directory %s cannot be entered: %s"
                            % (cwd, exc.strerror or exc)})
    env = state.get("env") or {}
    for key, value in env.items():
        try:
            os.environ[key] = value
        except (ValueError, TypeError, OSError) as exc:
            skipped.append({"name": "env %s" % key, "reason": _reason(exc)})
    for key in state.get("envUnset") or ():
        os.environ.pop(key, None)
    path = state.get("sysPath") or {}
    for entry in reversed(path.get("front") or []):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    for entry in path.get("back") or []:
        if entry not in sys.path:
            sys.path.append(entry)


def _ints_from_base64(text):
    import array
    import base64

    typecode = "I" if array.array("I").itemsize == 4 else "L"
    packed = array.array(typecode)
    packed.frombytes(base64.b64decode(text))
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tolist()


def _apply_random(state, skipped):
    saved = state.get("random")
    if saved:
        try:
            import random

            random.setstate((saved["version"], tuple(_ints_from_base64(saved["state"])), saved["gauss"]))
        except Exception as exc:
            skipped.append({"name": "random state", "reason": _reason(exc)})
    saved = state.get("numpyRandom")
    if saved:
        try:
            import numpy

            keys = numpy.array(_ints_from_base64(saved["keys"]), dtype=numpy.uint32)
            numpy.random.set_state(("MT19937", keys, saved["pos"], saved["hasGauss"], saved["gauss"]))
        except Exception as exc:
            skipped.append({"name": "numpy random state", "reason": _reason(exc)})


def _import_names(entries, namespace, restored, skipped):
    """Each [name, module, qualified name]: the class or function imported again."""
    import importlib

    for name, module_name, qualname in entries:
        try:
            found = importlib.import_module(module_name)
            for part in qualname.split("."):
                found = getattr(found, part)
        except BaseException as exc:
            skipped.append({"name": name, "reason": "%s.%s cannot be imported: %s" % (module_name, qualname,
                                                                                      _reason(exc))})
            continue
        namespace[name] = found
        restored.append(name)


def _import_modules(entries, namespace, restored, skipped):
    import importlib

    for name, module_name, subs in entries:
        try:
            module = importlib.import_module(module_name)
        except BaseException as exc:
            skipped.append({"name": name, "reason": "module %s cannot be imported: %s" % (module_name, _reason(exc))})
            continue
        for sub in subs:
            if sub not in sys.modules:
                try:
                    importlib.import_module(sub)
                except BaseException:
                    pass
        namespace[name] = module
        restored.append(name)


class _ViewFile:
    """A read-only file over a memoryview, for the unpickler: io.BytesIO would copy the whole stream first."""

    def __init__(self, view):
        self.view = view
        self.pos = 0

    def read(self, size=-1):
        end = len(self.view) if size is None or size < 0 else min(len(self.view), self.pos + size)
        data = self.view[self.pos:end].tobytes()
        self.pos = end
        return data

    def readinto(self, buffer):
        target = memoryview(buffer).cast("B")
        count = min(len(target), len(self.view) - self.pos)
        target[:count] = self.view[self.pos:self.pos + count]
        self.pos += count
        return count

    def readline(self, size=-1):
        # Lines are the arguments of the old text opcodes, short, and rare in a protocol 5 stream.
        limit = len(self.view) if size is None or size < 0 else min(len(self.view), self.pos + size)
        end = self.pos
        while end < limit:
            chunk = self.view[end:min(limit, end + 256)].tobytes()
            found = chunk.find(b"\n")
            if found >= 0:
                end += found + 1
                break
            end += len(chunk)
        return self.read(end - self.pos)

    def seek(self, pos):
        self.pos = pos

    def tell(self):
        return self.pos


def _load_values(stream, buffers, segments, namespace, restored, skipped):
    """Unpickle each value's segment with one unpickler (one memo); after a failure, go on from the next
    segment with a new unpickler holding the memo so far."""
    import pickle

    file = _ViewFile(stream)

    def unpickler(first):
        # The buffers are writable views of the payload (a bytearray): arrays come back writable, without a copy
        # (on a machine where fresh memory is slow to touch, a copy costs more than the rest of the restore).
        return pickle.Unpickler(file, buffers=iter(buffers[first:]))

    current = None
    memo = None
    failed_any = False
    for name, start, end, first, _count in segments:
        if current is None:
            file.seek(start)
            fresh = unpickler(first)
            if memo is not None:
                fresh.memo = memo
            current = fresh
        try:
            value = current.load()
            if file.tell() != end:
                raise pickle.UnpicklingError("the value's segment did not end where the header says")
        except BaseException as exc:
            failed_any = True
            reason = _reason(exc)
            if isinstance(exc, KeyError) or "Memo value not found" in str(exc):
                reason = "it shares an object with a name that could not be restored"
            skipped.append({"name": name, "reason": "it cannot be restored: %s" % reason})
            memo = current.memo
            current = None
            continue
        namespace[name] = value
        restored.append(name)
    return failed_any


@without_gc
def restore(data, namespace, kernel_state, execution_count=None):
    """Restore a payload (bytes-like) into namespace: (restored names, skipped [{name, reason}]); PayloadError
    when it cannot be read at all."""
    header, stream, buffers = read_payload(data)
    restored, skipped = [], []
    state = header["state"]
    _apply_paths(state, skipped)
    if state.get("previousDir") is not None:
        kernel_state.previous_dir = state["previousDir"]
    if state.get("dirStack"):
        kernel_state.dir_stack = list(state["dirStack"])
    _import_modules(header["modules"], namespace, restored, skipped)
    _import_names(header.get("imports") or [], namespace, restored, skipped)
    entries = [tuple(entry) for entry in header["definitions"]]
    done, failed = definitions.replay(entries, namespace)
    restored.extend(done)
    _load_values(stream, buffers, header["values"], namespace, restored, skipped)
    if failed:
        retried = [entry for entry in entries if entry[0] in failed and isinstance(failed[entry[0]], NameError)]
        again, still = definitions.replay(retried, namespace)
        restored.extend(again)
        for name in again:
            failed.pop(name, None)
        failed.update(still)
    for name, exc in failed.items():
        skipped.append({"name": name, "reason": "its definition failed: %s" % _reason(exc)})
    _apply_random(state, skipped)
    if execution_count is not None:
        kernel_state.execution_count = int(execution_count)
    return restored, skipped


def _quietly(function, *args):
    """function(*args) with what it prints (a decorator replayed, a __setstate__) dropped: a restore is no cell,
    its output would reach the host under the id of the request before it."""
    import io

    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()
    try:
        return function(*args)
    finally:
        sys.stdout, sys.stderr = saved


def serve(piece, namespace, kernel_state, send):
    """Take one restore piece; after the last, restore and answer restore_done."""
    try:
        count = None if piece.more else pieces.execution_count(piece)
        data = pieces.add(piece)
        if data is None:
            return
        restored, skipped = _quietly(restore, data, namespace, kernel_state, count)
    except PayloadError as exc:
        return send({"type": "restore_done", "id": piece.id, "restored": [], "skipped": [], "error": str(exc)}, None)
    except BaseException as exc:
        return send({"type": "restore_done", "id": piece.id, "restored": [], "skipped": [],
                     "error": "the restore failed: %s" % _reason(exc)}, None)
    send({"type": "restore_done", "id": piece.id, "restored": restored, "skipped": skipped}, None)

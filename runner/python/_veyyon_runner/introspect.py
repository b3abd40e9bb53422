"""Complete and inspect requests, answered on threads of their own beside a running cell."""

import builtins
import inspect as _inspect
import keyword as _keyword
import pkgutil as _pkgutil
import re
import rlcompleter as _rlcompleter
import sys
import threading
import types

from .state import _state
from .protocol import MAX_COMPLETIONS, MAX_INSPECT_CHARS, _introspection_failed, _send
from .magics import _CELL_MAGICS, _LINE_MAGICS


_INTROSPECT_THREADS = 4
_introspect_slots = threading.BoundedSemaphore(_INTROSPECT_THREADS)
_MISSING = object()
_NAME_CHAIN = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*$")


def _start_introspection(kind, payload):
    request_id = payload[0]
    if not _introspect_slots.acquire(blocking=False):
        _introspection_failed(kind, request_id, "the kernel is still answering earlier completion requests")
        return
    threading.Thread(target=_introspect, args=(kind, payload), name="veyyon-introspect", daemon=True).start()


def _introspect(kind, payload):
    request_id, code, cursor, detail = payload
    try:
        if kind == "complete":
            matches, start = complete(code, cursor)
            _send({"type": "complete_reply", "id": request_id, "matches": matches,
                   "cursorStart": start, "cursorEnd": cursor})
        else:
            text = inspect_text(code, cursor, detail)
            _send({"type": "inspect_reply", "id": request_id, "found": text is not None,
                   "bundle": {} if text is None else {"text/plain": text}})
    except BaseException as exc:
        _introspection_failed(kind, request_id, "%s: %s" % (type(exc).__name__, exc))
    finally:
        _introspect_slots.release()


def _static_attr(obj, name):
    """obj.name without running user code: instance and module values as stored, builtin descriptors bound."""
    try:
        value = _inspect.getattr_static(obj, name)
    except AttributeError:
        return _MISSING
    if isinstance(obj, types.ModuleType):
        return value
    try:
        own = not isinstance(obj, type) and name in object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        own = False
    getter = getattr(type(value), "__get__", None)
    if own or getter is None or isinstance(value, property) or type(value).__module__ != "builtins":
        return value
    try:
        return getter(value, None, obj) if isinstance(obj, type) else getter(value, obj, type(obj))
    except Exception:
        return value


def _resolve(chain):
    """The object a dotted name chain names in the user namespace (or builtins), or _MISSING."""
    parts = chain.split(".")
    ns = _state.namespace or {}
    obj = ns.get(parts[0], _MISSING)
    if obj is _MISSING:
        obj = getattr(builtins, parts[0], _MISSING)
    for part in parts[1:]:
        if obj is _MISSING:
            break
        obj = _static_attr(obj, part)
    return obj


def _names_of(obj):
    try:
        names = dir(obj)
    except Exception:
        names = []
    return [n for n in names if isinstance(n, str)]


def _module_names(package):
    if not package:
        names = set(sys.builtin_module_names)
        names.update(m.name for m in _pkgutil.iter_modules())
        return names
    module = sys.modules.get(package)
    path = getattr(module, "__path__", None) if module is not None else None
    return set(m.name for m in _pkgutil.iter_modules(path)) if path else set()


def _open_call(before):
    """The dotted callee of the innermost call still open before the cursor, or None."""
    depth = 0
    for index in range(len(before) - 1, -1, -1):
        char = before[index]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            if depth == 0:
                if char != "(":
                    return None
                match = _NAME_CHAIN.search(before[:index].rstrip())
                return match.group(0) if match else None
            depth -= 1
    return None


def _keyword_args(callee, prefix):
    obj = _resolve(callee)
    if obj is _MISSING:
        return []
    try:
        params = _inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (_inspect.Parameter.POSITIONAL_OR_KEYWORD, _inspect.Parameter.KEYWORD_ONLY)
    return [p.name + "=" for p in params if p.kind in kinds and p.name.startswith(prefix)]


def _visible(names, prefix):
    hide = not prefix.startswith("_")
    return sorted(set(n for n in names if n.startswith(prefix) and not (hide and n.startswith("_"))))


def complete(code, cursor):
    """(matches, cursor_start) for the token before cursor: magics, modules, attributes, keyword args, names."""
    before = code[:cursor]
    line = before[before.rfind("\n") + 1:]
    magic = re.match(r"\s*(%%?)(\w*)$", line)
    if magic:
        table = _CELL_MAGICS if magic.group(1) == "%%" else _LINE_MAGICS
        names = [magic.group(1) + n for n in sorted(table) if n.startswith(magic.group(2))]
        return names[:MAX_COMPLETIONS], cursor - len(magic.group(1)) - len(magic.group(2))
    imported = re.match(r"\s*from\s+([\w.]+)\s+import\s+(?:[\w\s,]*,\s*)?(\w*)$", line)
    if imported:
        module, prefix = imported.group(1), imported.group(2)
        names = _module_names(module)
        if module in sys.modules:
            names.update(_names_of(sys.modules[module]))
        return _visible(names, prefix)[:MAX_COMPLETIONS], cursor - len(prefix)
    importing = re.match(r"\s*(?:import|from)\s+(?:[\w.]+\s*,\s*)*([\w.]*)$", line)
    if importing:
        dotted = importing.group(1)
        package, _, prefix = dotted.rpartition(".")
        return _visible(_module_names(package), prefix)[:MAX_COMPLETIONS], cursor - len(prefix)
    attribute = re.search(r"([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\.(\w*)$", line)
    if attribute:
        obj = _resolve(attribute.group(1))
        prefix = attribute.group(2)
        names = [] if obj is _MISSING else _visible(_names_of(obj), prefix)
        return names[:MAX_COMPLETIONS], cursor - len(prefix)
    prefix = re.search(r"\w*$", line).group(0)
    if prefix[:1].isdigit():
        return [], cursor
    callee = _open_call(before)
    first = _keyword_args(callee, prefix) if callee else []
    completer = _rlcompleter.Completer(dict(_state.namespace or {}))
    names = set()
    state = 0
    while len(names) < 4 * MAX_COMPLETIONS:
        match = completer.complete(prefix, state) if prefix else None
        if match is None:
            break
        names.add(match.rstrip("(: "))
        state += 1
    if not prefix:
        names.update(n for n in (_state.namespace or {}) if isinstance(n, str))
        names.update(_keyword.kwlist)
        names.update(dir(builtins))
    ordered = first + [n for n in _visible(names, prefix) if n + "=" not in first]
    return ordered[:MAX_COMPLETIONS], cursor - len(prefix)


def _name_at(code, cursor):
    """The dotted name under or just before the cursor, else the callee of the call it is in."""
    start = cursor
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
        start -= 1
    end = cursor
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    match = _NAME_CHAIN.match(code[start:end].strip("."))
    if match and match.group(0) == code[start:end].strip("."):
        return match.group(0)
    return _open_call(code[:cursor])


def _short(text, limit):
    return text if len(text) <= limit else text[:limit - 1] + "…"


def inspect_text(code, cursor, detail=0):
    """IPython-style `obj?` text (`obj??` with detail 1: the source too) for the name at cursor, or None."""
    name = _name_at(code, cursor)
    if not name:
        return None
    obj = _resolve(name)
    if obj is _MISSING:
        return None
    fields = []
    try:
        fields.append(("Signature", name.rpartition(".")[2] + str(_inspect.signature(obj))))
    except (TypeError, ValueError):
        pass
    if not callable(obj) or isinstance(obj, type):
        try:
            form = object.__repr__(obj) if isinstance(obj, property) else repr(obj)
        except Exception as exc:
            form = "<repr failed: %s>" % type(exc).__name__
        fields.append(("String form", _short(form, 1000)))
    try:
        length = len(obj) if isinstance(obj, (str, bytes, list, tuple, dict, set, frozenset)) else None
    except Exception:
        length = None
    if length is not None:
        fields.append(("Length", str(length)))
    try:
        source_file = _inspect.getsourcefile(obj) or _inspect.getfile(obj)
    except (TypeError, OSError):
        source_file = None
    if source_file:
        fields.append(("File", source_file))
    doc = _inspect.getdoc(obj)
    if detail and not isinstance(obj, types.ModuleType):
        try:
            fields.append(("Source", _inspect.getsource(obj).rstrip("\n")))
        except (TypeError, OSError):
            pass
    if doc and not (detail and fields and fields[-1][0] == "Source"):
        fields.append(("Docstring", doc))
    elif not doc and not (fields and fields[-1][0] == "Source"):
        fields.append(("Docstring", "<no docstring>"))
    fields.append(("Type", type(obj).__name__))
    text = "\n".join("%-12s %s" % (label + ":", value) if "\n" not in value else "%s:\n%s" % (label, value)
                     for label, value in fields)
    return _short(text, MAX_INSPECT_CHARS)

"""Display: the IPython-style pretty printer, MIME formatters, display() and status events, figures."""

import io
import os
import re
import sys
import types
import warnings

from .state import _deliver_pending, _state
from .protocol import STATUS_MIME, _send
from .output import _emit_display


MAX_PLAIN_CHARS = 1000000


_PLAIN_TYPES = frozenset({int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, type(None)})
_REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("application/json", "_repr_json_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/latex", "_repr_latex_"),
)


PRETTY_WIDTH = 79
PRETTY_MAX_SEQ = 1000


class _PrettyText:
    __slots__ = ("parts", "width")

    def __init__(self):
        self.parts = []
        self.width = 0

    def output(self, out, width):
        out.extend(self.parts)
        return width + self.width


class _PrettyBreakable:
    __slots__ = ("sep", "width", "printer", "indentation", "group")

    def __init__(self, sep, printer):
        self.sep = sep
        self.width = len(sep)
        self.printer = printer
        self.indentation = printer.indentation
        self.group = printer.group_stack[-1]
        self.group.breakables.append(self)

    def output(self, out, width):
        self.group.breakables.popleft()
        if self.group.want_break:
            out.append("\n" + " " * self.indentation)
            return self.indentation
        if not self.group.breakables:
            self.printer.queue_remove(self.group)
        out.append(self.sep)
        return width + self.width


class _PrettyGroup:
    __slots__ = ("depth", "breakables", "want_break")

    def __init__(self, depth):
        import collections

        self.depth = depth
        self.breakables = collections.deque()
        self.want_break = False


class PrettyPrinter:
    """IPython's RepresentationPrinter API: text, breakable, break_, begin_group/end_group, group, indent, pretty."""

    def __init__(self, max_width=PRETTY_WIDTH, max_seq_length=PRETTY_MAX_SEQ):
        import collections

        self.out = []
        self.max_width = max_width
        self.max_seq_length = max_seq_length
        self.output_width = 0
        self.buffer_width = 0
        self.buffer = collections.deque()
        root = _PrettyGroup(0)
        self.group_stack = [root]
        self.group_queue = [[root]]
        self.indentation = 0
        self.stack = []
        self.verbose = False

    # line breaking

    def queue_remove(self, group):
        try:
            self.group_queue[group.depth].remove(group)
        except (ValueError, IndexError):
            pass

    def _dequeue(self):
        for stack in self.group_queue:
            for index, group in enumerate(reversed(stack)):
                if group.breakables:
                    del stack[index]
                    group.want_break = True
                    return group
            for group in stack:
                group.want_break = True
            del stack[:]
        return None

    def _break_one_group(self, group):
        while group.breakables:
            item = self.buffer.popleft()
            self.output_width = item.output(self.out, self.output_width)
            self.buffer_width -= item.width
        while self.buffer and isinstance(self.buffer[0], _PrettyText):
            item = self.buffer.popleft()
            self.output_width = item.output(self.out, self.output_width)
            self.buffer_width -= item.width

    def _break_outer_groups(self):
        while self.max_width < self.output_width + self.buffer_width:
            group = self._dequeue()
            if not group:
                return
            self._break_one_group(group)

    def text(self, obj):
        """Add literal text."""
        width = len(obj)
        if self.buffer:
            text = self.buffer[-1]
            if not isinstance(text, _PrettyText):
                text = _PrettyText()
                self.buffer.append(text)
            text.parts.append(obj)
            text.width += width
            self.buffer_width += width
            self._break_outer_groups()
        else:
            self.out.append(obj)
            self.output_width += width

    def _newline(self):
        self.flush()
        self.out.append("\n" + " " * self.indentation)
        self.output_width = self.indentation
        self.buffer_width = 0

    def breakable(self, sep=" "):
        """A place the line may break (else sep is written)."""
        if self.group_stack[-1].want_break:
            self._newline()
        else:
            self.buffer.append(_PrettyBreakable(sep, self))
            self.buffer_width += len(sep)
            self._break_outer_groups()

    def break_(self):
        """A forced line break, keeping the indentation."""
        group = self._dequeue()
        if group:
            self._break_one_group(group)
        self._newline()

    def begin_group(self, indent=0, open=""):
        """Start a group (indent: for its continuation lines; open: text before it)."""
        if open:
            self.text(open)
        group = _PrettyGroup(self.group_stack[-1].depth + 1)
        self.group_stack.append(group)
        while group.depth > len(self.group_queue) - 1:
            self.group_queue.append([])
        self.group_queue[group.depth].append(group)
        self.indentation += indent

    def end_group(self, dedent=0, close=""):
        """End the group begun last."""
        self.indentation -= dedent
        group = self.group_stack.pop()
        if not group.breakables:
            self.queue_remove(group)
        if close:
            self.text(close)

    def group(self, indent=0, open="", close=""):
        """begin_group/end_group as a context manager."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            self.begin_group(indent, open)
            try:
                yield
            finally:
                self.end_group(indent, close)
        return scope()

    def indent(self, indent):
        """Extra indentation as a context manager."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            self.indentation += indent
            try:
                yield
            finally:
                self.indentation -= indent
        return scope()

    def flush(self):
        """Write out what is buffered."""
        for item in self.buffer:
            self.output_width += item.output(self.out, self.output_width)
        self.buffer.clear()
        self.buffer_width = 0

    def _enumerate(self, seq):
        for index, item in enumerate(seq):
            if self.max_seq_length and index >= self.max_seq_length:
                self.text(",")
                self.breakable()
                self.text("...")
                return
            yield index, item

    # objects

    def pretty(self, obj):
        """Write obj's pretty representation."""
        obj_id = id(obj)
        cycle = obj_id in self.stack
        self.stack.append(obj_id)
        self.begin_group()
        try:
            if obj is None or obj is True or obj is False or obj is Ellipsis or obj is NotImplemented:
                return _pretty_repr(obj, self, cycle)
            cls = _safe_getattr(obj, "__class__", None) or type(obj)
            for klass in getattr(cls, "__mro__", (cls,)):
                printer = _PRETTY_TYPES.get(klass)
                if printer is None:
                    printer = _PRETTY_BY_NAME.get((_safe_getattr(klass, "__module__"), _safe_getattr(klass, "__name__")))
                if printer is not None:
                    return printer(obj, self, cycle)
                method = klass.__dict__.get("_repr_pretty_") if hasattr(klass, "__dict__") else None
                if method is not None and callable(getattr(klass, "_repr_pretty_", None)):
                    return klass._repr_pretty_(obj, self, cycle)
                if klass is not object and callable(klass.__dict__.get("__repr__")):
                    return _pretty_repr(obj, self, cycle)
            return _pretty_default(obj, self, cycle)
        finally:
            self.end_group()
            self.stack.pop()

    def getvalue(self):
        """Everything written so far."""
        self.flush()
        return "".join(self.out)


def _safe_getattr(obj, name, default=None):
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


_PRETTY_SCALARS = frozenset({int, str, bytes, bool, type(None)})


def _pretty_is_repr(obj, max_width):
    """Whether obj's pretty text is plainly its repr (a scalar, or a short list/tuple of scalars): the fast path."""
    kind = type(obj)
    if kind in _PRETTY_SCALARS:
        return True
    if kind in (list, tuple) and len(obj) < 64 and all(type(item) in _PRETTY_SCALARS for item in obj):
        return len(repr(obj)) <= max_width
    return False


def pretty(obj, max_width=PRETTY_WIDTH, max_seq_length=PRETTY_MAX_SEQ):
    """obj's text as IPython's pretty printer writes it."""
    if _pretty_is_repr(obj, max_width):
        return repr(obj)
    printer = PrettyPrinter(max_width, max_seq_length)
    printer.pretty(obj)
    return printer.getvalue()


def _pretty_repr(obj, p, cycle):
    p.begin_group()
    for index, line in enumerate(repr(obj).splitlines()):
        if index:
            p.break_()
        p.text(line)
    p.end_group()


def _pretty_default(obj, p, cycle):
    cls = _safe_getattr(obj, "__class__", None) or type(obj)
    if _safe_getattr(cls, "__repr__", None) is not object.__repr__:
        return _pretty_repr(obj, p, cycle)
    p.begin_group(1, "<")
    p.pretty(cls)
    p.text(" at 0x%x" % id(obj))
    if cycle:
        p.text(" ...")
    p.end_group(1, ">")


def _pretty_sequence(start, end):
    def printer(obj, p, cycle):
        if cycle:
            return p.text(start + "..." + end)
        p.begin_group(len(start), start)
        for index, item in p._enumerate(obj):
            if index:
                p.text(",")
                p.breakable()
            p.pretty(item)
        if len(obj) == 1 and isinstance(obj, tuple):
            p.text(",")
        p.end_group(len(start), end)
    return printer


def _sorted_for_pretty(items):
    items = list(items)
    for key in (None, str):
        try:
            return sorted(items, key=key)
        except Exception:
            pass
    return items


def _pretty_set(start, end):
    def printer(obj, p, cycle):
        if cycle:
            return p.text(start + "..." + end)
        if not obj:
            return p.text(type(obj).__name__ + "()")
        p.begin_group(len(start), start)
        items = obj if p.max_seq_length and len(obj) >= p.max_seq_length else _sorted_for_pretty(obj)
        for index, item in p._enumerate(items):
            if index:
                p.text(",")
                p.breakable()
            p.pretty(item)
        p.end_group(len(start), end)
    return printer


def _pretty_dict(start, end):
    def printer(obj, p, cycle):
        if cycle:
            return p.text("{...}")
        p.begin_group(len(start), start)
        for index, key in p._enumerate(obj.keys()):
            if index:
                p.text(",")
                p.breakable()
            p.pretty(key)
            p.text(": ")
            p.pretty(obj[key])
        p.end_group(len(start), end)
    return printer


def _pretty_call(p, name, args, kwargs=()):
    """name(arg, ..., key=value, ...) with IPython's wrapping."""
    prefix = name + "("
    with p.group(len(prefix), prefix, ")"):
        first = True
        for key, value in [(None, a) for a in args] + list(kwargs):
            if not first:
                p.text(",")
                p.breakable()
            first = False
            if key is None:
                p.pretty(value)
            else:
                with p.group(len(key) + 1, key + "="):
                    p.pretty(value)


class _PrettyRaw:
    def __init__(self, text):
        self.text = text

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def _pretty_type(obj, p, cycle):
    if [m for m in type(obj).__mro__ if "__repr__" in vars(m)][:1] != [type]:
        return _pretty_repr(obj, p, cycle)
    module = _safe_getattr(obj, "__module__")
    name = _safe_getattr(obj, "__qualname__")
    if not isinstance(name, str):
        name = _safe_getattr(obj, "__name__")
        if not isinstance(name, str):
            name = "<unknown type>"
    p.text(name if module in (None, "__builtin__", "builtins", "exceptions") else "%s.%s" % (module, name))


def _pretty_function(obj, p, cycle):
    import inspect

    name = _safe_getattr(obj, "__qualname__", obj.__name__)
    module = obj.__module__
    if module and module not in ("__builtin__", "builtins", "exceptions"):
        name = module + "." + name
    try:
        name += str(inspect.signature(obj))
    except ValueError:
        pass
    p.text("<function %s>" % name)


def _pretty_exception(obj, p, cycle):
    cls = obj.__class__
    name = getattr(cls, "__qualname__", cls.__name__)
    if cls.__module__ not in ("exceptions", "builtins"):
        name = "%s.%s" % (cls.__module__, name)
    _pretty_call(p, name, getattr(obj, "args", ()))


def _pretty_super(obj, p, cycle):
    p.begin_group(8, "<super: ")
    p.pretty(obj.__thisclass__)
    p.text(",")
    p.breakable()
    p.pretty(obj.__self__)
    p.end_group(8, ">")


def _pretty_pattern(obj, p, cycle):
    pattern = repr(obj.pattern)
    args = [_PrettyRaw("r" + pattern.replace("\\\\", "\\"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flags = [name for name in ("TEMPLATE", "IGNORECASE", "LOCALE", "MULTILINE", "DOTALL", "UNICODE", "VERBOSE",
                                   "DEBUG") if hasattr(re, name) and obj.flags & getattr(re, name)]
    if flags:
        args.append(_PrettyRaw("|".join("re." + name for name in flags)))
    _pretty_call(p, "re.compile", args)


def _pretty_namespace(obj, p, cycle):
    if cycle:
        return _pretty_call(p, "namespace", [_PrettyRaw("...")])
    _pretty_call(p, "namespace", (), list(obj.__dict__.items()))


def _pretty_constructor(contents):
    """A printer writing ClassName(<contents(obj)>), as IPython shows the collections types."""
    def printer(obj, p, cycle):
        name = obj.__class__.__name__
        if cycle:
            return _pretty_call(p, name, [_PrettyRaw("...")])
        args, kwargs = contents(obj)
        _pretty_call(p, name, args, kwargs)
    return printer


def _deque_contents(obj):
    return [list(obj)], ([] if obj.maxlen is None else [("maxlen", obj.maxlen)])


_PRETTY_TYPES = {
    int: _pretty_repr, float: _pretty_repr, str: _pretty_repr, bytes: _pretty_repr, range: _pretty_repr,
    slice: _pretty_repr, types.MethodType: _pretty_repr,
    tuple: _pretty_sequence("(", ")"), list: _pretty_sequence("[", "]"),
    dict: _pretty_dict("{", "}"), types.MappingProxyType: _pretty_dict("mappingproxy({", "})"),
    set: _pretty_set("{", "}"), frozenset: _pretty_set("frozenset({", "})"),
    super: _pretty_super, type(re.compile("")): _pretty_pattern, type: _pretty_type,
    types.FunctionType: _pretty_function, types.BuiltinFunctionType: _pretty_function,
    types.SimpleNamespace: _pretty_namespace, BaseException: _pretty_exception,
}
if type(os.environ) is not dict:
    _PRETTY_TYPES[type(os.environ)] = _pretty_dict("environ{", "}")
_PRETTY_BY_NAME = {
    ("datetime", "datetime"): _pretty_repr,
    ("datetime", "timedelta"): _pretty_repr,
    ("collections", "defaultdict"): _pretty_constructor(lambda o: ([o.default_factory, dict(o)], [])),
    ("collections", "OrderedDict"): _pretty_constructor(lambda o: ([list(o.items())] if len(o) else [], [])),
    ("collections", "deque"): _pretty_constructor(_deque_contents),
    ("collections", "Counter"): _pretty_constructor(lambda o: ([dict(o)] if len(o) else [], [])),
    ("collections", "UserList"): _pretty_constructor(lambda o: ([o.data], [])),
}


# ---------------------------------------------------------------------------
# Rich display


def _call_repr(obj, name, *args, **kwargs):
    try:
        method = getattr(obj, name, None)
        if method is None or not callable(method):
            return None
        return method(*args, **kwargs)
    except Exception:
        return None


def _normalize_mime(mime, value):
    if value is None:
        return None
    if mime in ("image/png", "image/jpeg"):
        if isinstance(value, (bytes, bytearray, memoryview)):
            import base64

            return base64.b64encode(bytes(value)).decode("ascii")
        return value if isinstance(value, str) else None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, (dict, list, int, float, bool)):
        return value
    return None


def _plain_text(obj):
    try:
        text = pretty(obj) if _state.pretty_printing else repr(obj)
    except Exception:
        try:
            text = repr(obj)
        except Exception as exc:
            text = "<%s object; repr() raised %s>" % (type(obj).__name__, type(exc).__name__)
    if not isinstance(text, str):
        text = str(text)
    if len(text) > MAX_PLAIN_CHARS:
        omitted = len(text) - MAX_PLAIN_CHARS
        text = "%s… [%d characters omitted]" % (text[:MAX_PLAIN_CHARS], omitted)
    return text


# Formatters by type, as IPython's display formatters hold them: (module, qualname) of a class in
# the object's MRO -> {mime: fn(obj) -> value or None}. They win over the object's _repr_*_ methods.
_FORMATTERS = {}
_figure_formats = ["png"]


def register_formatter(mime, cls, fn):
    """Render instances of cls (a class, or "module.QualName") as mime with fn(obj) -> str | bytes | None."""
    if isinstance(cls, str):
        module, _, name = cls.rpartition(".")
        key = (module, name)
    else:
        key = (cls.__module__, cls.__qualname__)
    _FORMATTERS.setdefault(key, {})[mime] = fn


def _formatted(obj):
    """The bundle the registered formatters give obj (empty when none applies)."""
    for cls in getattr(type(obj), "__mro__", ()):
        table = _FORMATTERS.get((_safe_getattr(cls, "__module__"), _safe_getattr(cls, "__qualname__")))
        if table is not None:
            bundle = {}
            for mime, fn in table.items():
                value = _normalize_mime(mime, fn(obj))
                if value is not None:
                    bundle[mime] = value
            return bundle
    return {}


def _figure_image(figure, fmt):
    """A figure as the inline backend renders it (IPython's print_figure); None for a figure with nothing drawn."""
    if not figure.axes and not figure.lines:
        return None
    dpi = figure.dpi * (2 if fmt == "retina" else 1)
    buffer = io.BytesIO()
    if figure.canvas is None:
        from matplotlib.backend_bases import FigureCanvasBase

        FigureCanvasBase(figure)
    figure.canvas.print_figure(buffer, format="png" if fmt == "retina" else fmt, facecolor=figure.get_facecolor(),
                               edgecolor=figure.get_edgecolor(), dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def _figure_png(figure):
    fmt = "retina" if "retina" in _figure_formats else "png" if "png" in _figure_formats else None
    return None if fmt is None else _figure_image(figure, fmt)


def _figure_svg(figure):
    return _figure_image(figure, "svg") if "svg" in _figure_formats else None


def _figure_pdf(figure):
    import base64

    data = _figure_image(figure, "pdf") if "pdf" in _figure_formats else None
    return None if data is None else base64.b64encode(data).decode("ascii")


register_formatter("image/png", "matplotlib.figure.Figure", _figure_png)
register_formatter("image/svg+xml", "matplotlib.figure.Figure", _figure_svg)
register_formatter("application/pdf", "matplotlib.figure.Figure", _figure_pdf)


def mime_bundle(obj):
    """MIME bundle for obj: registered formatters, _repr_mimebundle_, the _repr_*_ methods; always with text/plain."""
    bundle = {}
    if type(obj) not in _PLAIN_TYPES and not isinstance(obj, type):
        bundle.update(_formatted(obj))
        data = _call_repr(obj, "_repr_mimebundle_", include=None, exclude=None)
        if isinstance(data, tuple) and data:
            data = data[0]
        if isinstance(data, dict):
            for mime, value in data.items():
                value = _normalize_mime(mime, value)
                if isinstance(mime, str) and value is not None and mime not in bundle:
                    bundle[mime] = value
        for mime, name in _REPR_METHODS:
            if mime in bundle:
                continue
            value = _call_repr(obj, name)
            if isinstance(value, tuple) and len(value) == 2:
                value = value[0]
            value = _normalize_mime(mime, value)
            if value is not None:
                bundle[mime] = value
    if not isinstance(bundle.get("text/plain"), str):
        bundle["text/plain"] = _plain_text(obj)
    return bundle


def display(*objs, raw=False, **ignored):
    """Show each object as a display frame (raw=True: each object already is a MIME bundle)."""
    for obj in objs:
        if raw and isinstance(obj, dict):
            _emit_display(dict(obj))
        else:
            _emit_display(mime_bundle(obj))


def emit_status(op, **fields):
    """Send a status event: a display frame with an application/x-veyyon-status bundle."""
    event = {"op": op}
    event.update(fields)
    _send({"type": "display", "id": _state.current_id, "bundle": {STATUS_MIME: event}})
    if _state.pending:
        _deliver_pending()


_shown_figures = set()


def _flush_figures():
    """Show and close the figures open at the end of a cell (one the cell returned was shown already)."""
    shown = set(_shown_figures)
    _shown_figures.clear()
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    try:
        numbers = list(pyplot.get_fignums())
    except Exception:
        return
    for number in numbers:
        figure = pyplot.figure(number)
        try:
            if id(figure) not in shown:
                _emit_display(mime_bundle(figure))
        except Exception as exc:
            sys.stderr.write("could not render figure %s: %s: %s\n" % (number, type(exc).__name__, exc))
        finally:
            pyplot.close(figure)

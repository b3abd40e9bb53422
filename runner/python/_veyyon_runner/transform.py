"""The magic transformer: IPython-style %magic, %%cell magic, !shell and $var rewritten to plain calls."""

import re


_CODE_SPECIAL = re.compile(r"""[#'"()\[\]{}\\]""")
_FEXPR_SPECIAL = re.compile(r"""[#'"()\[\]{}\\:]""")
_FSPEC_SPECIAL = re.compile(r"[{}]")
_STRING_SPECIAL = {
    (quote, fmt): re.compile("[\\\\%s%s]" % (quote, "{}" if fmt else ""))
    for quote in ("'", '"') for fmt in (False, True)
}
_PREFIX_CHARS = frozenset("rbuftRBUFT")
_MAGIC_NAME = re.compile(r"([A-Za-z_]\w*)(.*)\Z", re.S)
_ASSIGN_MAGIC = re.compile(
    r"((?:[^\W\d][\w.]*(?:\[[^\]]*\])*)(?:\s*,\s*[^\W\d][\w.]*(?:\[[^\]]*\])*)*)\s*=\s*([!%])(.*)\Z", re.S)
_DOLLAR_NAME = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_NO_EXPAND_MAGICS = frozenset({"time", "timeit"})


class _Scanner:
    """Follows strings, brackets and continuations across physical lines of Python source."""

    def __init__(self):
        self.stack = []
        self.depth = 0
        self.continued = False

    def at_statement_start(self):
        """Whether the next physical line begins a logical line outside any string or bracket."""
        return not self.stack and self.depth == 0 and not self.continued

    def feed(self, line):
        """Advance the state over one physical line (without its newline)."""
        line = line.rstrip("\r")
        stack = self.stack
        pos = 0
        end = len(line)
        escaped_eol = False
        trailing_backslash = False
        while pos < end:
            top = stack[-1] if stack else None
            kind = top[0] if top else "c"
            if kind == "s":
                match = _STRING_SPECIAL[(top[1], top[3])].search(line, pos)
                if match is None:
                    break
                pos = match.start()
                char = line[pos]
                if char == "\\":
                    if pos + 1 >= end:
                        escaped_eol = True
                    pos += 2
                elif char == top[1]:
                    if top[2]:
                        if line.startswith(top[1] * 3, pos):
                            stack.pop()
                            pos += 3
                        else:
                            pos += 1
                    else:
                        stack.pop()
                        pos += 1
                elif char == "{":
                    if line.startswith("{{", pos):
                        pos += 2
                    else:
                        stack.append(["e", 0])
                        pos += 1
                else:
                    pos += 1
                continue
            if kind == "p":
                match = _FSPEC_SPECIAL.search(line, pos)
                if match is None:
                    break
                pos = match.start() + 1
                if match.group() == "{":
                    stack.append(["e", 0])
                else:
                    del stack[-2:]
                continue
            pattern = _FEXPR_SPECIAL if kind == "e" else _CODE_SPECIAL
            match = pattern.search(line, pos)
            if match is None:
                break
            pos = match.start()
            char = line[pos]
            if char == "#":
                break
            if char in "'\"":
                fmt = self._is_fstring(line, pos)
                triple = line.startswith(char * 3, pos)
                stack.append(["s", char, triple, fmt])
                pos += 3 if triple else 1
            elif char in "([{":
                if kind == "e":
                    top[1] += 1
                else:
                    self.depth += 1
                pos += 1
            elif char in ")]}":
                if kind == "e":
                    if char == "}" and top[1] == 0:
                        stack.pop()
                    else:
                        top[1] = max(0, top[1] - 1)
                else:
                    self.depth = max(0, self.depth - 1)
                pos += 1
            elif char == ":":
                if top[1] == 0:
                    stack.append(["p"])
                pos += 1
            else:
                if pos + 1 >= end:
                    trailing_backslash = True
                pos += 2
        if not escaped_eol:
            while any(entry[0] == "s" and not entry[2] for entry in stack):
                stack.pop()
        self.continued = trailing_backslash and not stack

    @staticmethod
    def _is_fstring(line, pos):
        start = pos
        while start > 0 and pos - start < 2 and line[start - 1] in _PREFIX_CHARS:
            start -= 1
        if start > 0 and line[start - 1].isalnum():
            return False
        prefix = line[start:pos].lower()
        return "f" in prefix or "t" in prefix


def _matching_brace(text, start):
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_field(inner):
    depth = 0
    quote = None
    for index, char in enumerate(inner):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and char == "!" and not inner.startswith("!=", index):
            rest = inner[index + 1:]
            conversion, _, spec = rest.partition(":")
            return inner[:index], conversion, spec
        elif depth == 0 and char == ":":
            return inner[:index], "", inner[index + 1:]
    return inner, "", ""


def _valid_field(expr):
    if not expr.strip():
        return False
    try:
        compile("lambda: (%s)" % expr, "<field>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def split_interpolation(text):
    """Split shell text into literal strings and (expr, raw, conversion, spec) fields, IPython style.

    ``$name`` / ``$a.b`` (not inside single quotes) and ``{expr}`` are fields; ``$$``, ``{{``
    and ``}}`` stand for ``$``, ``{`` and ``}``; braces holding no valid expression stay literal.
    """
    parts = []
    literal = []
    in_single = in_double = False
    index = 0
    size = len(text)

    def flush():
        if literal:
            parts.append("".join(literal))
            del literal[:]

    while index < size:
        char = text[index]
        if char == "\\" and not in_single:
            literal.append(text[index:index + 2])
            index += 2
        elif char == "'" and not in_double:
            in_single = not in_single
            literal.append(char)
            index += 1
        elif char == '"' and not in_single:
            in_double = not in_double
            literal.append(char)
            index += 1
        elif char == "$" and not in_single:
            if text.startswith("$$", index):
                literal.append("$")
                index += 2
                continue
            match = _DOLLAR_NAME.match(text, index + 1)
            if match:
                flush()
                parts.append((match.group(), "$" + match.group(), "", ""))
                index = match.end()
            else:
                literal.append(char)
                index += 1
        elif char == "{":
            if text.startswith("{{", index):
                literal.append("{")
                index += 2
                continue
            close = _matching_brace(text, index)
            if close != -1:
                expr, conversion, spec = _split_field(text[index + 1:close])
                if conversion in ("", "r", "s", "a") and _valid_field(expr):
                    flush()
                    parts.append((expr, text[index:close + 1], conversion, spec))
                    index = close + 1
                    continue
            literal.append(char)
            index += 1
        elif char == "}" and text.startswith("}}", index):
            literal.append("}")
            index += 2
        else:
            literal.append(char)
            index += 1
    flush()
    return parts


def _interpolation_code(text):
    parts = split_interpolation(text)
    if all(isinstance(part, str) for part in parts):
        return repr(parts[0] if parts else "")
    items = []
    for part in parts:
        if isinstance(part, str):
            items.append(repr(part))
        else:
            expr, raw, conversion, spec = part
            items.append("(lambda: (%s), %r, %r, %r)" % (expr, raw, conversion, spec))
    return "__veyyon__.expand((%s,))" % ", ".join(items)


def _line_magic_code(text):
    match = _MAGIC_NAME.match(text)
    if match is None:
        return "__veyyon__.line_magic(%r, '')" % text.strip()
    name, args = match.group(1), match.group(2).strip()
    if name in _NO_EXPAND_MAGICS:
        return "__veyyon__.line_magic(%r, %r)" % (name, args)
    return "__veyyon__.line_magic(%r, %s)" % (name, _interpolation_code(args))


def _magic_text(lines, index, stripped):
    """The magic's text with backslash continuations joined, and how many lines it spans."""
    pieces = []
    text = stripped
    consumed = 1
    while text.endswith("\\") and index + consumed < len(lines):
        pieces.append(text[:-1])
        text = lines[index + consumed].rstrip("\r")
        consumed += 1
    pieces.append(text)
    return "".join(pieces), consumed


def _rewrite_magic_line(lines, index):
    raw = lines[index].rstrip("\r")
    stripped = raw.lstrip()
    if not stripped:
        return None, 0
    first = stripped[0]
    assign = None
    if first not in "%!":
        if "=" not in stripped or not ("!" in stripped or "%" in stripped):
            return None, 0
        assign = _ASSIGN_MAGIC.match(stripped)
        if assign is None:
            return None, 0
    indent = raw[:len(raw) - len(stripped)]
    text, consumed = _magic_text(lines, index, stripped)
    if assign is not None:
        target_end = len(assign.group(1))
        rest = text[text.index(assign.group(2), target_end) + 1:]
        if assign.group(2) == "!":
            value = "__veyyon__.getoutput(%s)" % _interpolation_code(rest.strip())
        else:
            value = _line_magic_code(rest)
        return "%s%s = %s" % (indent, assign.group(1), value), consumed
    if text.startswith("%%"):
        name = _MAGIC_NAME.match(text[2:])
        return "%s__veyyon__.misplaced_cell_magic(%r)" % (indent, name.group(1) if name else ""), consumed
    if first == "%":
        return indent + _line_magic_code(text[1:]), consumed
    if text.startswith("!!"):
        return "%s__veyyon__.getoutput(%s)" % (indent, _interpolation_code(text[2:].strip())), consumed
    return "%s__veyyon__.system(%s)" % (indent, _interpolation_code(text[1:].strip())), consumed


def _cell_magic_code(lines):
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("%%"):
            return None
        match = _MAGIC_NAME.match(stripped[2:])
        name = match.group(1) if match else ""
        args = match.group(2).strip() if match else stripped[2:]
        if stripped.startswith("%%!"):
            name, args = "!", stripped[3:].strip()
        body = "\n".join(lines[index + 1:])
        line_code = repr(args) if name in _NO_EXPAND_MAGICS else _interpolation_code(args)
        call = "__veyyon__.cell_magic(%r, %s, %r)" % (name, line_code, body)
        return "\n".join([""] * index + [call] + [""] * (len(lines) - index - 1))
    return None


def transform(source):
    """Rewrite IPython-style magics in a cell into plain Python calls, keeping line numbers."""
    if "%" not in source and "!" not in source:
        return source
    lines = source.split("\n")
    cell = _cell_magic_code(lines)
    if cell is not None:
        return cell
    out = []
    scanner = _Scanner()
    index = 0
    while index < len(lines):
        if scanner.at_statement_start():
            rewritten, consumed = _rewrite_magic_line(lines, index)
            if rewritten is not None:
                out.append(rewritten)
                out.extend([""] * (consumed - 1))
                index += consumed
                continue
        scanner.feed(lines[index])
        out.append(lines[index])
        index += 1
    return "\n".join(out)

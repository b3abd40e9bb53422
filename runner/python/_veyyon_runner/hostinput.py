"""A cell's input: each line it reads from sys.stdin or input() is asked of the host (bridge method "input").

The host asks a person (MCP elicitation) or answers end of input with a sentence; getpass is refused
at once, since a secret is never asked for through the eval tool.
"""

import builtins
import io
import sys

from .bridge import BridgeError, bridge_call

INPUT_METHOD = "input"
_GETPASS_REFUSED = ("getpass() is refused: the eval tool never asks a person for a secret (MCP forbids form "
                    "elicitation of passwords); have the cell read the secret from a file instead")
_original_input = builtins.input


def ask_line(prompt):
    """The person's line for prompt, without a newline; EOFError (saying why) when there is none."""
    try:
        line = bridge_call(INPUT_METHOD, {"prompt": prompt})
    except BridgeError as exc:
        raise EOFError(exc.message if exc.name == "EOFError" else str(exc)) from None
    return line if isinstance(line, str) else ""


class HostStdin(io.TextIOBase):
    """sys.stdin replacement: stdin carries requests, so a line read here is asked of the host; "" at end of input."""

    @property
    def encoding(self):
        return "utf-8"

    @property
    def closed(self):
        return False

    def close(self):
        """Ignored."""

    def readable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return 0

    def readline(self, size=-1):
        """One line from the host, with its newline; "" once there is none."""
        try:
            return ask_line("") + "\n"
        except EOFError:
            return ""

    def read(self, size=-1):
        """One line from the host (a person answers a line at a time); "" once there is none."""
        return self.readline()

    def readlines(self, hint=-1):
        """The host's lines until end of input."""
        return list(iter(self.readline, ""))

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line


def host_input(prompt=""):
    """builtins.input: the prompt written as a terminal shows it, then the line the host answers (echoed), or EOFError."""
    if not isinstance(sys.stdin, HostStdin):
        return _original_input(prompt)
    text = str(prompt)
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()
    line = ask_line(text)
    sys.stdout.write(line + "\n")
    return line


def refuse_getpass(prompt="Password: ", stream=None):
    """getpass.getpass: refused at once, with the reason."""
    raise EOFError(_GETPASS_REFUSED)


def install():
    """Route sys.stdin, input() and getpass through the host."""
    import getpass
    sys.stdin = HostStdin()
    builtins.input = host_input
    getpass.getpass = refuse_getpass

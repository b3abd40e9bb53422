"""Kernel state shared by every part of the runner, and SIGINT delivery into user code only."""

import builtins
import os
import _signal
import sys
import threading
import time


class _KernelState:
    def __init__(self):
        self.current_id = None
        self.execution_count = 0
        self.cell_seq = 0
        self.cell_active = False
        self.entered = False
        self.pending = False
        self.interrupted = False
        self.redelivered = False
        self.generation = 0
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.protected = {}
        self.previous_dir = None
        self.dir_stack = []
        self.history = {}
        self.last_traceback = None
        self.xmode = "Context"
        self.float_format = None
        self.pretty_printing = True
        self.extensions = {}
        self.runtime = None


_state = _KernelState()
_main_ident = threading.main_thread().ident
_redeliver_wake = None
# Set by the server once every module is loaded: the code objects SIGINT must not interrupt.
_BOUNDARY_CODE = None
_PLUMBING_CODES = frozenset()
_CRITICAL_CODES = frozenset()


def _on_sigint(signum, frame):
    st = _state
    if st.redelivered:
        st.redelivered = False
        if not st.pending:
            return
    if not st.cell_active:
        return
    if frame is not None and frame.f_code not in _PLUMBING_CODES and _interrupt_allowed(frame):
        st.pending = False
        st.interrupted = True
        raise KeyboardInterrupt
    st.pending = True
    if _redeliver_wake is not None:
        try:
            os.write(_redeliver_wake, b"!")
        except OSError:
            pass


def _interrupt_allowed(frame):
    """Whether a SIGINT landing in frame may raise: inside user code and outside runner bookkeeping."""
    while frame is not None:
        code = frame.f_code
        if code in _CRITICAL_CODES:
            return False
        if code is _BOUNDARY_CODE:
            return _state.entered
        frame = frame.f_back
    return False


def _deliver_pending():
    """Raise a deferred SIGINT now if the critical function calling this returns into user code."""
    st = _state
    if st.pending and st.cell_active and threading.get_ident() == _main_ident:
        if _interrupt_allowed(sys._getframe(2)):
            st.pending = False
            st.interrupted = True
            raise KeyboardInterrupt


def _user_call(fn, *args):
    st = _state
    st.entered = True
    try:
        if st.pending:
            st.pending = False
            st.interrupted = True
            raise KeyboardInterrupt
        return fn(*args)
    finally:
        st.entered = False


def _redeliver_loop(wake_fd):
    """Re-send a deferred SIGINT until it lands in user code or the cell ends."""
    while True:
        try:
            os.read(wake_fd, 256)
        except OSError:
            return
        while _state.pending and _state.cell_active:
            generation = _state.generation
            time.sleep(0.01)
            if _state.pending and _state.cell_active and _state.generation == generation:
                _state.redelivered = True
                _signal.pthread_kill(_main_ident, _signal.SIGINT)

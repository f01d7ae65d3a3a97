"""hpcrun's Python support (`hpcrun -a python`), put first on PYTHONPATH by the launcher.

Installs the measurement's profile hook (libhpcrun.so's hpcrun_python_thread, called with
the GIL held) in this thread and, through threading.setprofile, in every thread the
threading module starts, and in each thread _thread.start_new_thread starts; then runs the
sitecustomize this one shadows, if there is one."""
import sys


def _hpcrun_install():
    import ctypes
    import threading
    try:
        start = ctypes.PyDLL(None).hpcrun_python_thread
    except (OSError, AttributeError):  # not measured (PYTHONPATH kept without hpcrun)
        return
    start.restype = ctypes.c_int
    start()

    def first_event(frame, event, arg):  # the new thread's first event: the C hook instead
        start()

    threading.setprofile(first_event)

    # Threads started by _thread itself (threading keeps the function it bound on import):
    # the hook installed first thing in the new thread. Its function's name and qualified
    # name are the program's, as an unhandled exception's message shows them.
    import _thread
    import functools
    original = _thread.start_new_thread

    def start_new_thread(function, args, kwargs=None):
        @functools.wraps(function)
        def run(*a, **k):
            start()
            return function(*a, **k)
        return original(run, args) if kwargs is None else original(run, args, kwargs)

    _thread.start_new_thread = start_new_thread
    _thread.start_new = start_new_thread  # its old name


def _hpcrun_next_sitecustomize():
    import importlib.util
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        if not d or os.path.abspath(d) == here:
            continue
        f = os.path.join(d, "sitecustomize.py")
        if os.path.isfile(f):
            spec = importlib.util.spec_from_file_location("_hpcrun_shadowed_sitecustomize", f)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


_hpcrun_install()
_hpcrun_next_sitecustomize()

"""Command-line entry point: ``quantscope [FILE] [options]`` opens the window; subcommands
(``report``, ``scan``, ``export``) print or write results without a window.

Each subcommand lives in its own module under ``quantscope.commands`` and exposes
``add_parser(subparsers)`` and ``run(args) -> int``; this module only dispatches, so adding a
command never touches the others.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from quantscope.commands import export, plan, report, scan
from quantscope.errors import QuantscopeError, Terminated, one_line

#: Subcommand name -> its module (``add_parser(subparsers)``, ``run(args) -> int``).
COMMANDS = {"report": report, "scan": scan, "export": export, "plan": plan}


class _Parser(argparse.ArgumentParser):
    """argparse with its refusals in the same one-line form as every other error."""

    def error(self, message: str):
        print(f"quantscope: error: {one_line(message)} (see {self.prog} --help)",
              file=sys.stderr)
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run quantscope with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    Without ``argv`` this is the program itself: SIGTERM is turned into :class:`Terminated`
    (so the same unwinding as Ctrl-C removes temporary files), and after an interruption the
    process ends at once instead of waiting for the engine's worker threads to finish what
    they were computing (a scan's workers are told to stop and have handed in what they
    finished by then)."""
    program = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    if program and args and args[0] in COMMANDS:  # the window keeps SIGTERM's default: an
        _terminate_as_exception()  # exception raised inside Qt's event loop would be lost
    if program:
        # Numba loads SciPy's BLAS (for np.linalg in compiled code, which quantscope never
        # uses); OpenBLAS then starts a thread per core with a 32 MiB buffer each, and under
        # a low ``ulimit -v`` it retries those allocations without end (a minute of system
        # time, no output). One thread needs one buffer. The engine's own threads are not
        # BLAS's, and NumPy's BLAS was loaded before this line, so nothing else changes.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    code = _main(args)
    if program and code in (130, 143, 141):
        _leave(code)
    return code


def _main(argv: list[str]) -> int:
    commands = COMMANDS
    try:
        if argv and argv[0] in commands:
            parser = _Parser(prog="quantscope")
            sub = parser.add_subparsers(dest="command", required=True)
            for module in commands.values():
                module.add_parser(sub)
            args = parser.parse_args(argv)
            module = commands[args.command]
        else:
            from quantscope.gui import launch  # Qt is loaded only for the window

            module = launch
            parser = _Parser(prog="quantscope", description=module.__doc__)
            module.add_arguments(parser)
            args = parser.parse_args(argv)
        code = int(module.run(args))
        sys.stdout.flush()  # a full disk or a closed pipe is met here, not at exit
        return code
    except QuantscopeError as exc:
        return _error(one_line(str(exc)))
    except MemoryError:  # anywhere: a tensor or a request too big for this machine
        return _error("not enough memory for this request (try a smaller tensor, or "
                      "per-tensor instead of per-group)")
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        _say("quantscope: " + ("terminated" if terminated else "interrupted"))
        return 143 if terminated else 130
    except BrokenPipeError:  # the reader left (``report | head -1``): nothing more to say
        _silence_stdout()
        return 141
    except OSError as exc:
        if exc.filename is None and _is_stdout_error(exc):
            _silence_stdout()
            return _error(f"cannot write the output ({exc.strerror or exc})")
        raise
    except RuntimeError as exc:
        if "can't start new thread" not in str(exc):
            raise
        return _error("cannot start worker threads (can't start new thread): the memory or "
                      "thread limit of this process (ulimit -v, ulimit -u) is too low")


def _error(message: str) -> int:
    _say(f"quantscope: error: {message}")
    return 2


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _is_stdout_error(exc: OSError) -> bool:
    """Whether ``exc`` came from writing stdout: the errors a write to a pipe or a device
    gives (a file quantscope writes itself names its path and is reported where it is)."""
    import errno

    return exc.errno in (errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EFBIG, errno.EDQUOT)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit has nothing to fail
    on (it would print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _terminate_as_exception() -> None:
    def handler(signum, frame):
        raise Terminated("terminated")

    try:
        signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # not the main thread: the default action stays
        pass


def _leave(code: int) -> None:
    """End the process now: flush what was printed, skip joining worker threads that are
    still inside a compiled loop."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)

"""Command-line entry point: ``quantscope [FILE] [options]`` opens the window; subcommands
(``report``, ``scan``, ``export``, ``plan``) print or write results without a window.

Each subcommand lives in its own module under ``quantscope.commands`` and exposes
``add_parser(subparsers)`` and ``run(args) -> int``; this module only dispatches, and adds
what every command shares: ``--version``, ``-q``/``-v``, the examples under each ``--help``
(the top-level one lists every command), help text free of the docstrings' reST markup, and
shell completion where ``argcomplete`` is installed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from collections.abc import Sequence

from quantscope.commands import export, plan, report, scan
from quantscope.errors import QuantscopeError, Terminated, one_line

#: Subcommand name -> its module (``add_parser(subparsers)``, ``run(args) -> int``).
COMMANDS = {"report": report, "scan": scan, "export": export, "plan": plan}
#: What each command does in a line, and examples of it (the first is the one the top-level
#: help shows).
EXAMPLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "(window)": ("open the explorer window", (
        "quantscope",
        "quantscope weights.safetensors --tensor encoder.layer.0.attention.self.query.weight",
        "quantscope --generator outliers --bits 4",
        "quantscope --screenshot panes.png --metrics panes.json")),
    "report": ("print the four schemes' numbers (or number formats) for a tensor", (
        "quantscope report weights.safetensors --tensor fc.weight --bits 4 --json",
        "quantscope report activations.npy --method percentile --percentile 99.9",
        "quantscope report --sample gelu_activations --format all",
        "quantscope report model.onnx --tensor fc.weight --preset onnxruntime")),
    "scan": ("rank a checkpoint's tensors by what per-channel scaling gains", (
        "quantscope scan model.safetensors --top 10",
        "quantscope scan model_folder/ --formats --json",
        "quantscope scan a.safetensors b.safetensors")),
    "export": ("write a tensor's quantized form (codes, scales, zero points)", (
        "quantscope export weights.npy -o q.npz --granularity channel --bits 4",)),
    "plan": ("choose each tensor's format under a bits budget", (
        "quantscope plan model_folder/ --budget 4.5",)),
}
#: Verbosity: -q gives 0 (errors only, no compile notice), default 1, -v gives 2 (an error's
#: traceback too).
VERBOSITY_FLAGS = {"-q": 0, "--quiet": 0, "-v": 2, "--verbose": 2}

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


def plain(text: str | None) -> str | None:
    """Help text without the docstrings' reST markup: ``x`` -> x, :func:`~a.b` -> b."""
    if not text:
        return text
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~")
                     else m.group(1), text)
    return text.replace("``", "")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and examples' lines as written, without reST markup."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text) or "")

    def _expand_help(self, action) -> str:
        return plain(super()._expand_help(action)) or ""


class _Parser(argparse.ArgumentParser):
    """argparse with its refusals in the same one-line form as every other error."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        print(f"quantscope: error: {one_line(message)} (see {self.prog} --help)",
              file=sys.stderr)
        raise SystemExit(2)


def version_text() -> str:
    """``quantscope 0.1.0 (numpy 2.4.6, numba 0.68.1, Python 3.11.7)``."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import quantscope

    parts = []
    for dist in ("numpy", "numba"):
        try:
            parts.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:  # pragma: no cover - both are dependencies
            continue
    return (f"quantscope {quantscope.__version__} ({', '.join(parts)}, "
            f"Python {platform.python_version()})")


def examples_text(name: str) -> str:
    """The ``examples:`` block under a command's help."""
    return "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name][1])


def commands_text() -> str:
    """The top-level help's list of every command with one example each."""
    lines = ["commands (quantscope COMMAND --help for each one's options and examples):"]
    for name, (what, examples) in EXAMPLES.items():
        lines.append(f"  {name:<9} {what}")
        lines.append(f"  {'':<9}   e.g. {examples[0]}")
    lines.append("\noptions of every command: --version, -q/--quiet (errors only), "
                 "-v/--verbose (an error's traceback too)")
    return "\n".join(lines)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=version_text())
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_const", const=0, dest="verbosity",
                       help="print errors only (no notices while the engine compiles)")
    group.add_argument("-v", "--verbose", action="store_const", const=2, dest="verbosity",
                       help="print an error's traceback too")


def _split_verbosity(argv: list[str]) -> tuple[list[str], int | None]:
    """Leading -q/-v (before the command name) taken out of ``argv``."""
    level = None
    while argv and argv[0] in VERBOSITY_FLAGS:
        level = VERBOSITY_FLAGS[argv.pop(0)]
    return argv, level


def build_parser(command: str | None) -> tuple[argparse.ArgumentParser, object]:
    """The parser for ``command`` (None: the window) and the module that runs it."""
    if command is not None:
        parser = _Parser(prog="quantscope")
        sub = parser.add_subparsers(dest="command", required=True)
        for name, module in COMMANDS.items():
            module.add_parser(sub)
            p = sub.choices[name]
            p.formatter_class = _Formatter
            p.description = plain(p.description)
            if name in EXAMPLES:
                p.epilog = examples_text(name)
            _common(p)
        return parser, COMMANDS[command]
    from quantscope.gui import launch  # Qt is loaded only for the window, not for a report

    parser = _Parser(prog="quantscope", description=plain(launch.__doc__),
                     epilog=commands_text() + "\n\n" + examples_text("(window)"))
    launch.add_arguments(parser)
    _common(parser)
    return parser, launch


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
    argv, level = _split_verbosity(argv)
    if argv and argv[0] == "--version":
        print(version_text())
        return 0
    verbosity = 1 if level is None else level
    try:
        parser, module = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        try:
            import argcomplete  # optional: completion for bash/zsh (register-python-argcomplete)

            argcomplete.autocomplete(parser)
        except ImportError:
            pass
        args = parser.parse_args(argv)
        if args.verbosity is not None:
            verbosity = args.verbosity
        from quantscope.core.kernels.compile_notice import set_verbosity

        set_verbosity(verbosity)
        code = int(module.run(args))  # type: ignore[attr-defined]
        sys.stdout.flush()  # a full disk or a closed pipe is met here, not at exit
        return code
    except QuantscopeError as exc:
        if verbosity >= 2:
            import traceback

            traceback.print_exc()
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

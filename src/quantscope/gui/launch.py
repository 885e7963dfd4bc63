"""``quantscope [FILE] [--tensor NAME] [--sample NAME] [--generator NAME]``: open the explorer.

With ``--screenshot OUT.png`` (and/or ``--metrics OUT.json``) the window renders offscreen,
waits until every pane shows its numbers, writes the picture and the numbers each pane
displays (JSON keyed by pane), and exits 0 -- for CI checks and slides. Without a source it
opens on the built-in demo tensor, whose first numbers equal ``quantscope report``'s.
``--talk [FILE.json]`` opens a talk (the built-in one without a file) on the stage, at scene
``--scene N``; PageDown / PageUp step through it.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from quantscope.core.kernels.compile_notice import announce_compiles
from quantscope.core.tensors.generators import GENERATORS
from quantscope.errors import UserError, one_line
from quantscope.gui.system_libs import xcb_problem
from quantscope.io.writing import check_output, write_text
from quantscope.jsonable import dumps
from quantscope.state import ExplorerState, SettingsError, Source
from quantscope.state.compile_ahead import (
    panes_cached,
    stand_in_for_command,
    start_if_cold,
    start_with_stand_ins,
)
from quantscope.state.options import (
    add_settings_arguments,
    add_source_arguments,
    settings_from_args,
)
from quantscope.state.setting_names import add_setting_options, changes_from_args
from quantscope.state.source import DEMO_SAMPLE
from quantscope.state.talk import builtin_talk, load_talk
from quantscope.state.warm_up import warm_up_engine

#: How long ``--screenshot`` waits for the panes before giving up (a 10^8-element file may
#: take a while to prepare on a slow machine).
SCREENSHOT_TIMEOUT_S = 600
_APP = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The window's command-line options (``quantscope.cli`` calls this)."""
    add_source_arguments(parser)
    parser.add_argument("--generator", choices=list(GENERATORS),
                        help="start on a generated tensor instead of a file or sample")
    parser.add_argument("--shape", help="generator shape, e.g. 256x1024 (default per generator)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    add_settings_arguments(parser)
    parser.add_argument("--screenshot", metavar="OUT.png|OUT.svg",
                        help="render offscreen once every pane has results, save (PNG at 2x "
                             "pixel density, or SVG), exit")
    parser.add_argument("--session", metavar="FILE.json",
                        help="open a saved session (source, settings and theme)")
    parser.add_argument("--metrics", metavar="OUT.json",
                        help="write the numbers each pane displays (JSON keyed by pane), exit")
    parser.add_argument("--presentation", action="store_true",
                        help="presentation mode: large fonts, thick lines (F11 toggles)")
    parser.add_argument("--theme", choices=("light", "dark"),
                        help="light or dark theme (default: the session's, else light)")
    parser.add_argument("--talk", nargs="?", const="", metavar="FILE.json",
                        help="open a talk (the built-in one without FILE) in presentation "
                             "mode; PageDown / PageUp step through its scenes")
    parser.add_argument("--scene", type=int, metavar="N",
                        help="with --talk: start at scene N (with --screenshot: render it)")
    parser.add_argument("--size", help="window size (default: 1600x1000 where the screen "
                                       "has room, else maximized; rendered: 1600x1000)")
    parser.add_argument("--reference", metavar="ORIGINAL",
                        help="with a quantized checkpoint FILE: compare it with its original "
                             "in the model view (File > Compare with original...)")
    add_setting_options(parser, "window")  # --compare


def source_from_args(args: argparse.Namespace) -> Source:
    """The Source the command line asks for (the demo sample when none is given)."""
    given = [n for n in ("file", "sample", "generator") if getattr(args, n, None)]
    if len(given) > 1:
        raise UserError(f"give only one of FILE, --sample and --generator (got {given})")
    if args.generator:
        # Qt, like every gui module: imported only after the warm-up (see main)
        from quantscope.gui.source_panel import parse_shape

        shape = parse_shape(args.shape) if args.shape else GENERATORS[args.generator].default_shape
        src = Source.generator(args.generator, shape, args.seed)
    elif args.file:
        src = Source("file", str(Path(args.file)), tensor=args.tensor)
    else:
        name = args.sample or DEMO_SAMPLE
        src = Source("sample", name, tensor=args.tensor)
    if args.axis is not None or args.role:
        src = Source(**{**src.__dict__, "axis": args.axis, "role": args.role})
    return src


def talk_from_args(args: argparse.Namespace):
    """The talk ``--talk`` asks for (None without it), checked with ``--scene`` before any
    window opens: a talk brings its own tensors, so it takes no FILE, sample or generator."""
    talk_arg, scene = getattr(args, "talk", None), getattr(args, "scene", None)
    if talk_arg is None:
        if scene is not None:
            raise UserError("--scene N needs --talk (a talk file, or none for the built-in)")
        return None
    shown = {"file": "file", "sample": "sample", "generator": "generator",
             "session": "--session", "formats": "--compare"}
    given = [text for dest, text in shown.items() if getattr(args, dest, None)]
    if given:
        raise UserError("--talk brings its own tensors and settings: give it without "
                        + ", ".join(given))
    talk = load_talk(talk_arg) if talk_arg else builtin_talk()
    talk.scene(scene or 1)  # a scene the talk lacks is refused now, with the numbers it has
    return talk


def _no_display() -> bool:
    """True on Linux with no X11/Wayland display and no Qt platform chosen: Qt would abort the
    process with a plugin error there instead of saying what is missing."""
    env = os.environ
    return (sys.platform.startswith("linux") and not env.get("QT_QPA_PLATFORM")
            and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"))


def _parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UserError(f"--size {text!r}: write it as WIDTHxHEIGHT, e.g. 1600x1000") from None
    if not (200 <= w <= 10000 and 200 <= h <= 10000):
        raise UserError(f"--size {text!r} is out of range (200..10000 per side)")
    return w, h


def run(args: argparse.Namespace) -> int:
    """Open the window (or render it once, with --screenshot/--metrics); return the exit code."""
    headless = bool(args.screenshot or args.metrics)
    if args.screenshot and Path(args.screenshot).suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--screenshot {one_line(args.screenshot)}: write .png or .svg")
    for option, out in (("--screenshot", args.screenshot), ("--metrics", args.metrics)):
        if out:  # before the window is built: a bad path fails in a second, not after a load
            check_output(out, option)
    if headless:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif _no_display():
        raise UserError("no display to open the window on (DISPLAY and WAYLAND_DISPLAY are "
                        "unset); run it on a desktop, or render it with --screenshot OUT.png")
    else:  # before any compile: Qt would abort on a missing library only at the first window

        problem = xcb_problem()
        if problem is not None:
            raise UserError(problem)
    size = _parse_size(args.size) if args.size else None
    talk = talk_from_args(args)
    source = source_from_args(args)
    settings = settings_from_args(args)
    if getattr(args, "formats", None):
        try:
            settings = changes_from_args(args, settings, groups=("window",))
        except SettingsError as exc:
            raise UserError(f"--compare: {exc}") from None

    # the engine's compiled loops loaded now, before Qt (imported first, it doubles Numba's
    # start-up): a load in the window then never stalls the GUI thread loading one

    announce_compiles()
    if headless:
        # a rendering ends once written, as a command does: on a first run the twins paint
        # its panes (the same numbers) and the loops are compiled for the next run in a
        # process that outlives it; a loop without a twin compiles here, announced
        if not stand_in_for_command():
            warm_up_engine()
    elif panes_cached() or not start_with_stand_ins():
        warm_up_engine()
        start_if_cold()  # a first run: the loops of formats, scans and the API compile meanwhile
    # else a first run: NumPy twins paint the panes while another process compiles the loops
    # Qt now, after the warm-up: imported before Numba, it doubles Numba's start-up
    from PySide6.QtWidgets import QApplication

    from quantscope.gui import create_window
    from quantscope.gui.compact import OPENING_SIZE, open_fitting
    from quantscope.gui.session import apply_session, remember_window, startup_session

    session = startup_session(getattr(args, "session", None), headless=headless,
                              explicit_source=bool(args.file or args.sample or args.generator
                                                   or talk is not None))

    global _APP  # the QApplication must outlive every widget, up to interpreter exit
    app = _APP = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else
                                                          "quantscope"])
    if headless:
        from quantscope.gui.qt_messages import drop_offscreen_noise

        drop_offscreen_noise()
    window = create_window(ExplorerState(settings))
    if headless:  # rendered: the size asked for, or the default, whatever the screen
        window.resize(*(size or OPENING_SIZE))
    else:
        open_fitting(window, size)
        if size is None:  # the place it had on this screen last time, where it still fits
            from quantscope.gui.geometry import restore_geometry
            from quantscope.gui.session import user_settings

            restore_geometry(window, user_settings())
        window.desktop.remember_files = True  # File ▸ Open Recent (headless runs keep none)
    theme = getattr(args, "theme", None)
    dark = None if theme is None else theme == "dark"
    presentation = True if args.presentation else None
    if session is not None:  # a remembered one that no longer loads gives way to the demo
        apply_session(window, session, dark=dark, presentation=presentation,
                      fallback=None if getattr(args, "session", None) else source)
    if dark is not None:  # the command line wins over the session's look
        window.dark_action.setChecked(dark)
    if presentation or talk is not None:
        window.presentation_action.setChecked(True)
    window.show()
    # Everything built so far lives as long as the window: move it out of the cyclic GC's
    # reach, so a full collection during a slider drag does not stall the GUI thread.
    gc.freeze()
    if talk is not None:
        window.talk_player.open(talk, args.scene or 1)
    elif session is not None and session.source is not None:
        pass  # apply_session is loading it
    else:  # several tensors and no --tensor: the picker asks (headless: the error lists them)
        window.load(source, pick=not headless, settings=settings)
        if getattr(args, "reference", None):
            window.compare_with_original(args.reference)
    if not headless:
        code = app.exec()
        remember_window(window)
        from quantscope.gui.geometry import remember_geometry
        from quantscope.gui.session import user_settings

        remember_geometry(window, user_settings())
        _dispose(app, window)
        return code
    try:
        return _render_once(app, window, args)
    finally:
        _dispose(app, window)


def _dispose(app, window) -> None:
    """Stop the background work and delete the window while Qt is fully alive: leaving it to the
    interpreter's final garbage collection crashes PySide6 + pyqtgraph on some versions."""
    window.shutdown()
    window.close()
    app.processEvents()
    gc.unfreeze()  # the window's cycles become collectable again (see gc.freeze in run)
    gc.collect()


def _render_once(app, window, args: argparse.Namespace) -> int:
    from PySide6.QtCore import QEventLoop, QTimer

    errors: list[str] = []
    loop = QEventLoop()

    def on_error(message: str) -> None:
        # nothing at start-up should fail (a bad file, an engine error): say so and exit 2
        # rather than render a half-filled window or wait for the timeout
        errors.append(message)
        loop.quit()

    def poll() -> None:  # the panes signal results_shown; views are polled (is_ready)
        if window.ready_to_render():
            loop.quit()

    window.error_shown.connect(on_error)
    timer = QTimer()
    timer.setSingleShot(True)
    timer.timeout.connect(loop.quit)
    timer.start(SCREENSHOT_TIMEOUT_S * 1000)
    ticker = QTimer()
    ticker.timeout.connect(poll)
    ticker.start(50)
    if not window.ready_to_render():
        loop.exec()
    ticker.stop()
    timer.stop()
    if errors:
        print(f"quantscope: error: {one_line(errors[0])}", file=sys.stderr)
        return 2
    if not window.ready_to_render():
        print(f"quantscope: error: the panes had no results after {SCREENSHOT_TIMEOUT_S} s",
              file=sys.stderr)
        return 2
    app.processEvents()
    settle = getattr(getattr(window, "views_controller", None), "settle", None)
    if settle is not None:  # the explanatory views draw from their own background jobs
        settle()
    if args.screenshot:
        from quantscope.gui.export import save_image  # Qt, as above

        try:
            save_image(window, check_output(args.screenshot, "--screenshot"))
        except OSError as exc:
            raise UserError(f"--screenshot {one_line(args.screenshot)}: cannot write "
                            f"({exc.strerror or exc})") from None
        print(f"wrote {one_line(args.screenshot)}")
    if args.metrics:
        write_text(args.metrics, dumps(window.metrics(), indent=2), "--metrics")
        print(f"wrote {one_line(args.metrics)}")
    return 0

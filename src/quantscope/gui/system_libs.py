"""The system libraries Qt's X11 (xcb) platform needs, checked before anything slow starts.

PySide6's wheels bring Qt but not the X11 client libraries its xcb platform plugin links
against. Where one is missing (``libxcb-cursor0`` on many fresh Debian/Ubuntu desktops, since
Qt 6.5; ``libxcb-icccm4`` and ``libxcb-keysyms1`` on minimal ones), Qt aborts the process at
the first window with "Could not load the Qt platform plugin xcb" -- after the engine's loops
have compiled for a minute. So ``quantscope`` asks the dynamic loader for each library first
(loading one by its soname is exactly what Qt would do) and names the missing ones with the
command that installs them, before it compiles or imports anything.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: soname -> the Debian/Ubuntu package that provides it: the libraries PySide6's xcb plugin
#: (``libqxcb.so`` and ``libQt6XcbQpa.so.6``) is linked against, less the C runtime and Qt's own.
XCB_LIBRARIES = {
    "libxcb.so.1": "libxcb1",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libGL.so.1": "libgl1",
}


def _loads(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def missing_xcb_packages(loads=None) -> list[str]:
    """The packages of :data:`XCB_LIBRARIES` whose library the loader cannot find."""
    loads = loads or _loads
    return sorted({pkg for soname, pkg in XCB_LIBRARIES.items() if not loads(soname)})


def uses_xcb(env=os.environ) -> bool:
    """True where Qt will pick its xcb platform: Linux, an X display, no other platform
    chosen (``QT_QPA_PLATFORM``) and no Wayland session."""
    platform = env.get("QT_QPA_PLATFORM", "")
    if not sys.platform.startswith("linux") or (platform and not platform.startswith("xcb")):
        return False
    return bool(env.get("DISPLAY")) and (platform.startswith("xcb")
                                        or not env.get("WAYLAND_DISPLAY"))


def xcb_problem(env=os.environ, loads=None) -> str | None:
    """A sentence naming the missing libraries and the apt command, or None when the window
    can open (or another platform than xcb will draw it)."""
    if not uses_xcb(env):
        return None
    missing = missing_xcb_packages(loads)
    if not missing:
        return None
    return (f"Qt's X11 platform needs system libraries that are missing: {', '.join(missing)}; "
            f"install them with: sudo apt-get install {' '.join(missing)} (or render without a "
            "display: quantscope --screenshot OUT.png, or quantscope.widget in a notebook)")

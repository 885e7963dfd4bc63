"""The ordinary window on a small screen: a 1280x720 laptop or projector.

The controls, four panes and the views side by side need about 1600 px of width, and the
panes' plots need the height that their captions take. When the window is narrower than that,
the views step behind a button in the menu bar's corner ("Views ▸", also F9): it swaps the
panes for the views, full width, and back ("◂ Panes"). When the window is shorter than
:data:`SHORT_ROWS`, the panes' captions and code-occupancy strips give their rows to the
histograms (the numbers stay; View ▸ Show captions still says whether captions are on; both
return when the window is taller). Nothing here
runs in presentation mode, which has its own layout (:mod:`quantscope.gui.stage`).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QSize, Qt, QTimer
from PySide6.QtWidgets import QLayout

from quantscope.gui.tight_lines import TightButton

#: Below this many rows of window the panes' captions are left out.
SHORT_ROWS = 900
#: The share of the splitter the views beside the panes get when the panes can spare it.
VIEWS_SHARE = 0.4
#: Pixels the panes keep beyond their minimum width when they give the views room.
PANES_SLACK_PX = 40
#: The window's size on opening, where the screen has room for it.
OPENING_SIZE = (1600, 1000)
#: Of the screen's free area, what a window's title bar and frame take at most.
FRAME_PX = (16, 48)


def open_fitting(window, size: tuple[int, int] | None = None) -> None:
    """Size a window about to be shown to fit its screen: ``size`` (default
    :data:`OPENING_SIZE`) where the screen's free area holds it with its frame, else
    maximized (a 1280x720 or 1366x768 laptop or projector), never larger than the screen
    (a window opened at 1600x1000 on a 1280x720 screen hung off its edges)."""
    want_w, want_h = size or OPENING_SIZE
    screen = window.screen()
    if screen is None:
        window.resize(want_w, want_h)
        return
    free = screen.availableGeometry()
    room_w, room_h = free.width() - FRAME_PX[0], free.height() - FRAME_PX[1]
    if want_w <= room_w and want_h <= room_h:
        window.resize(want_w, want_h)
        return
    window.resize(min(want_w, room_w), min(want_h, room_h))
    window.setWindowState(window.windowState() | Qt.WindowState.WindowMaximized)


class Compact(QObject):
    """Fits the ordinary window to its size (see the module docstring).

    Attributes
    ----------
    narrow : bool
        True while the views are behind the button (too little width for them beside the
        panes).
    short : bool
        True while the captions and strips are left out for the histograms' sake.
    enabled : bool
        False once :meth:`disable` handed the layout to the caller.
    button : QPushButton
        "Views ▸" / "◂ Panes" (shown only while narrow).
    """

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.narrow = False
        self.short = False
        self.enabled = True
        # the menu bar is as tall as this button: no taller than its letters need
        self.button = TightButton("Views ▸")
        self.button.setObjectName("viewsButton")
        self.button.setToolTip("show the views instead of the panes, and back (F9)")
        self.button.clicked.connect(self._toggle)
        self.button.hide()
        # the views' room is made once the layout has settled (a resize reaches the window
        # before its splitter has the new width)
        self.room_timer = QTimer(self)
        self.room_timer.setSingleShot(True)
        self.room_timer.setInterval(0)
        self.room_timer.timeout.connect(self._make_room)

    def install(self) -> None:
        """Let the window be narrower than panes and views together (the views' own minimum
        no longer holds it wider than a laptop's screen: they step aside instead), and no
        taller than its compact layout needs (see :meth:`hold_floor`)."""
        self.window.views.setMinimumWidth(1)
        self.window.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)

    def floor(self) -> QSize:
        """The least size of the window outside presentation: its layout's minimum without
        the panes' captions, which a window shorter than :data:`SHORT_ROWS` leaves out.

        Qt's default is the layout's minimum of the moment, captions included while the
        window is tall: a window opened at 1080 rows could then not be made shorter than
        about 715 (more with wider fonts), and the compact layout that fits 720 rows was
        never reached."""
        w = self.window
        size = w.layout().totalMinimumSize()
        if w.presentation:
            return QSize(0, 0)  # the text follows the window's height instead
        # a layout request can reach the window while it builds, before its panes exist
        panes = list(getattr(w, "panes", {}).values())
        if not panes:
            return size  # no captions to leave out yet
        spacing = panes[0].layout().spacing()
        rows: dict[int, int] = {}
        for i, pane in enumerate(panes):
            if pane.caption.isVisibleTo(pane):
                row = i // 2
                rows[row] = max(rows.get(row, 0), pane.caption.minimumHeight() + spacing)
        return QSize(size.width(), size.height() - sum(rows.values()))

    def hold_floor(self) -> None:
        """Make :meth:`floor` the window's minimum size."""
        floor = self.floor()
        if self.window.minimumSize() != floor:
            self.window.setMinimumSize(floor)

    def need_width(self) -> int:
        """The width the dock, the panes and the views need side by side."""
        w = self.window
        dock = w.side_dock.minimumSizeHint().width() if not w.side_dock.isHidden() else 0
        panes = w.splitter.widget(0).minimumSizeHint().width()
        views = w.views.minimumSizeHint().width()
        margins = w.centralWidget().layout().contentsMargins()
        return (dock + panes + views + w.splitter.handleWidth() + margins.left()
                + margins.right())

    def fit(self) -> None:
        """Decide from the window's size (called on every resize outside presentation)."""
        w = self.window
        if w.presentation:  # the stage has its own layout, strips included
            self.button.hide()
            self._set_short(False)
            return
        if w.views.count() == 0 or not self.enabled:
            return
        controller = getattr(w, "views_controller", None)
        wide = controller is not None and controller.wide_action.isChecked()
        narrow = w.width() < self.need_width()
        self.narrow = narrow
        w.views.setHidden(narrow and not wide)  # wide: the views instead of the panes
        if not narrow and not wide:
            self.room_timer.start()
        self.button.setVisible(narrow)
        self.button.setText("◂ Panes" if wide else "Views ▸")
        if self._set_short(w.height() < SHORT_ROWS):
            self._pass_up_minimums()
        self.hold_floor()

    def _make_room(self) -> None:
        """The views beside the panes get their whole minimum width (their tabs overflowed
        into scroll arrows when the splitter gave them less), taken from the controls'
        column down to its minimum if the panes have none to spare; the column gets its
        natural width back whenever there is room for it."""
        w = self.window
        sizes = w.splitter.sizes()
        # views shown with no width (a talk at a small size left the splitter so) get room
        if (w.views.isHidden() or w.splitter.widget(0).isHidden() or w.presentation
                or self.narrow or not self.enabled):  # (the views alone: all the width)
            return
        room = w.views.minimumSizeHint().width()
        dock = w.side_dock
        if not dock.isHidden():
            free = dock.width() + sum(sizes) - w.splitter.widget(0).minimumSizeHint().width()
            want = max(dock.minimumSizeHint().width(), min(dock.sizeHint().width(),
                                                           free - room))
            if want != dock.width():
                w.resizeDocks([dock], [want], Qt.Orientation.Horizontal)
                w.layout().activate()
                sizes = w.splitter.sizes()
        # on a wide screen the views get a fair share, as far as the panes have width to
        # spare: at 1920 px their 30% (440 px) cramped every view (the Matmul controls
        # scrolled sideways, the Mapping plots were a sliver beside their numbers)
        total = sum(sizes)
        spare = total - w.splitter.widget(0).minimumSizeHint().width() - PANES_SLACK_PX
        room = max(room, min(round(total * VIEWS_SHARE), spare))
        if sizes[1] < room:
            w.splitter.setSizes([total - room, room])

    def disable(self) -> None:
        """Leave the layout to the caller from now on (a figure sizes the window to its
        picture): the strips and captions back, the views as the caller shows them."""
        self.enabled = False
        self.narrow = False
        self.button.hide()
        self._set_short(False)

    def _set_short(self, short: bool) -> bool:
        """Leave out (or bring back) the captions and strips; whether that changed anything."""
        if short == self.short:
            return False
        self.short = short
        for pane in self.window.panes.values():
            pane.set_short(short)
        controller = getattr(self.window, "views_controller", None)
        if controller is not None:
            controller.update_captions()
        return True

    def _pass_up_minimums(self) -> None:
        """Make the window's layout count the captions just hidden or shown, now.

        Qt passes a child's new minimum up one layout at a time, as the event loop delivers
        each level's layout request; until then the window's layout reports its old minimum.
        :meth:`floor` read just after the captions went out thus counted them still, while no
        longer subtracting them: with a font whose lines are a few pixels taller (Noto Sans
        Mono as the fixed-width face) the floor read 751 rows, and a window being made
        1280x720 was held at 751. Invalidating each level's cached size from the panes up
        makes the window's layout compute its minimum from the panes as they are."""
        seen: set[int] = set()
        for pane in self.window.panes.values():
            widget = pane
            while widget is not None and widget is not self.window and id(widget) not in seen:
                seen.add(id(widget))
                widget.updateGeometry()
                widget = widget.parentWidget()

    def _toggle(self) -> None:
        controller = getattr(self.window, "views_controller", None)
        if controller is not None:
            controller.set_views_wide(not controller.wide_action.isChecked())
        self.fit()

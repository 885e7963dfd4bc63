"""View tabs built when first shown or first asked for.

A window's views cost ~40 % of its build (the Matmul lab ~58 ms CPU, Bit width with Formats
~44 ms), and most windows -- every test's, a figure's, a talk that stays on the panes -- never
show most of them. :class:`LazyTabs` puts a bare placeholder in a tab until the tab is brought
forward (by a click, a talk, the stage's keys or code) or its page is read, then builds the
page and puts it in the placeholder's place, so from then on the tab holds the page itself
(``tabs.currentWidget()`` is the view, as with a page built at once).

A page built later must look as if it had been there all along: the window's style sheet
reaches it as Qt polishes it, and the ``style`` callback given here gives it the window's
theme (plots, themed views, the presentation's hidden clutter). A tab whose page sets the
views' minimum size must not wait (the window's minimum would change as tabs are shown): the
caller builds those at once and adds them as pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QTabWidget, QWidget


class Placeholder(QWidget):
    """What a tab holds until its page is built: nothing to draw, always ready."""

    def is_ready(self) -> bool:
        return True


class LazyTabs(QObject):
    """The pages of ``tabs`` by title, some built only when first shown or read.

    ``add_tab(title, widget)`` adds a tab (the window's ``add_view``); ``style(page)`` gives a
    page built later the window's current look before it is put in place.
    """

    #: Emitted with the title and the page after a deferred page is built and put in place.
    page_built = Signal(str, QWidget)

    def __init__(self, tabs: QTabWidget, add_tab: Callable[[str, QWidget], None],
                 style: Callable[[QWidget], None]) -> None:
        super().__init__(tabs)
        self.tabs = tabs
        self._add_tab = add_tab
        self._style = style
        self._pages: dict[str, QWidget] = {}
        self._builders: dict[str, tuple[Placeholder, Callable[[], QWidget]]] = {}
        tabs.currentChanged.connect(self._on_current_changed)

    def add(self, title: str, page: QWidget) -> None:
        """A tab whose page is built already."""
        self._pages[title] = page
        self._add_tab(title, page)

    def add_later(self, title: str, build: Callable[[], QWidget]) -> None:
        """A tab whose page ``build()`` makes when the tab is first shown or read."""
        placeholder = Placeholder()
        self._builders[title] = (placeholder, build)
        self._add_tab(title, placeholder)  # the first tab added becomes current: built now

    def page(self, title: str) -> QWidget:
        """The tab's page, built now if it was not yet."""
        if title in self._builders:
            self._build(title)
        return self._pages[title]

    def built(self) -> dict[str, QWidget]:
        """The pages that exist now, by title (reading them builds nothing)."""
        return dict(self._pages)

    def _on_current_changed(self, index: int) -> None:
        widget = self.tabs.widget(index)
        if isinstance(widget, Placeholder):
            title = next((t for t, (p, _) in self._builders.items() if p is widget), None)
            if title is not None:
                self._build(title)

    def _build(self, title: str) -> None:
        placeholder, build = self._builders.pop(title)
        page = build()
        self._style(page)
        self._pages[title] = page
        tabs = self.tabs
        index = tabs.indexOf(placeholder)
        current = tabs.currentIndex() == index
        tabs.insertTab(index, page, tabs.tabText(index))  # the placeholder moves right
        if current:
            tabs.setCurrentIndex(index)
        tabs.removeTab(index + 1)
        placeholder.deleteLater()
        self.page_built.emit(title, page)


class ViewTable(Mapping[str, QWidget]):
    """The views by title; a view on a tab not built yet is built when read (iterating the
    titles builds nothing; :meth:`built` gives only the views that exist)."""

    def __init__(self, tabs: LazyTabs) -> None:
        self._tabs = tabs
        self._views: dict[str, tuple[str, Callable[[QWidget], QWidget]]] = {}

    def add(self, title: str, tab: str, pick: Callable[[QWidget], QWidget] = lambda p: p
            ) -> None:
        """The view ``title`` is ``pick(page)`` of the tab ``tab`` (the page by default)."""
        self._views[title] = (tab, pick)

    def __getitem__(self, title: str) -> QWidget:
        tab, pick = self._views[title]
        return pick(self._tabs.page(tab))

    def __iter__(self) -> Iterator[str]:
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)

    def built(self) -> dict[str, QWidget]:
        """The views whose tabs are built, by title."""
        pages = self._tabs.built()
        return {title: pick(pages[tab]) for title, (tab, pick) in self._views.items()
                if tab in pages}

"""``quantscope.widget`` in a real browser: JupyterLab served here, Chromium headless driven
over the DevTools protocol. The notebook is run from the page, then controls are moved in the
page itself (the method's drop-down, the bits slider by keyboard) and a screenshot is taken
before and after; it prints how long the browser waited for the new images.

    PYTHONPATH=src python bench/widget_in_browser.py [OUT_DIR]   # needs jupyterlab, chromium

Nothing here runs in the test suite (it needs a browser); the widget's behaviour is tested
headless by tests/test_notebook_widget.py and tests/test_notebook_run.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
from tornado.websocket import websocket_connect

ROOT = Path(__file__).resolve().parents[1]
CELLS = [
    "import numpy as np, quantscope as qs\n"
    "x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)\n"
    "w = qs.widget(x)\nw",
]
#: The page's panes: the four images the widget's first cell shows.
IMAGES_JS = "[...document.querySelectorAll('.jp-OutputArea-output img')]"

#: The drop-downs' choices and the sliders' readouts, as the page shows them.
CONTROLS_JS = """(() => [...document.querySelectorAll('select')].map(
    s => s.options[s.selectedIndex] ? s.options[s.selectedIndex].textContent : '').concat(
    [...document.querySelectorAll('.widget-readout')].map(e => e.textContent.trim())))()"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class Page:
    """One Chromium tab over the DevTools protocol."""

    def __init__(self, ws) -> None:
        self.ws, self.next_id = ws, 0

    async def call(self, method: str, **params):
        self.next_id += 1
        mine = self.next_id
        await self.ws.write_message(json.dumps({"id": mine, "method": method,
                                                "params": params}))
        while True:
            msg = json.loads(await self.ws.read_message())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def js(self, expression: str):
        out = await self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                              awaitPromise=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression[:60]}: {out['exceptionDetails']}")
        return out["result"].get("value")

    async def until(self, expression: str, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while True:
            value = await self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout} s for {what}")
            await asyncio.sleep(0.1)

    async def shot(self, path: Path) -> None:
        out = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(out["data"]))
        print(f"  screenshot: {path} ({path.stat().st_size:,} bytes)")

    async def key(self, key: str, code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            await self.call("Input.dispatchKeyEvent", type=kind, key=key, code=key,
                            windowsVirtualKeyCode=code)


async def drive(debug_port: int, lab_url: str, out: Path) -> None:
    tabs = json.loads(wait_http(f"http://127.0.0.1:{debug_port}/json", 60))
    tab = next(t for t in tabs if t["type"] == "page")
    page = Page(await websocket_connect(tab["webSocketDebuggerUrl"], max_message_size=1 << 28))
    await page.call("Page.enable")
    await page.call("Page.navigate", url=lab_url)
    start = time.monotonic()
    await page.until("!!(window.jupyterapp && document.querySelector('.jp-Notebook'))", 120,
                     "JupyterLab and the notebook")
    await page.until("!!document.querySelector('.jp-Notebook .jp-Cell')", 60, "the cells")
    await page.until("jupyterapp.serviceManager.kernels.running().next().value !== undefined"
                     " || true", 5, "a kernel")
    await asyncio.sleep(2)  # the kernel's session starts after the page
    print(f"JupyterLab open in {time.monotonic() - start:.1f} s")
    t0 = time.monotonic()
    await page.js("jupyterapp.commands.execute('notebook:run-all-cells')")
    await page.until(f"{IMAGES_JS}.filter(i => i.naturalWidth > 0).length >= 4", 300,
                     "the four panes")
    print(f"the widget's cell ran and drew its four panes in {time.monotonic() - t0:.1f} s")
    await asyncio.sleep(1)
    await page.shot(out / "widget_before.png")
    before = await page.js(f"{IMAGES_JS}.map(i => i.src)")

    # the method's drop-down: chosen in the page, as a person chooses it
    t0 = time.monotonic()
    changed = await page.js("""(() => {
        const s = [...document.querySelectorAll('select')].find(
            e => [...e.options].some(o => o.textContent === 'percentile'));
        if (!s) return false;
        const o = [...s.options].find(o => o.textContent === 'percentile');
        s.value = o.value; s.dispatchEvent(new Event('change', {bubbles: true}));
        return true; })()""")
    assert changed, "no method drop-down in the page"
    srcs = json.dumps(before)
    await page.until(f"(() => {{ const b = {srcs}; const now = {IMAGES_JS}.map(i => i.src);"
                     " return now.length === 4 && now.every((s, k) => s !== b[k]); })()", 60,
                     "new images after the method change")
    print(f"method -> percentile in the page: new images in the page after "
          f"{1000 * (time.monotonic() - t0):.0f} ms")
    await asyncio.sleep(1)
    print(f"  the page's controls then: {await page.js(CONTROLS_JS)}")
    after_method = await page.js(f"{IMAGES_JS}.map(i => i.src)")

    # the bits slider: focused and moved with the arrow keys, as a person moves it
    focused = await page.js("""(() => {
        const h = [...document.querySelectorAll('.widget-slider')].find(
            e => (e.closest('.widget-inline-hbox') || e).textContent.includes('bits'));
        const handle = h && h.querySelector('.noUi-handle');
        if (!handle) return false;
        handle.focus(); return document.activeElement === handle; })()""")
    if focused:
        t0 = time.monotonic()
        for _ in range(5):
            await page.key("ArrowLeft", 37)
        srcs = json.dumps(after_method)
        await page.until(f"(() => {{ const b = {srcs}; const now = {IMAGES_JS}"
                         ".map(i => i.src); return now.every((s, k) => s !== b[k]); })()", 60,
                         "new images after the bits change")
        await asyncio.sleep(1.5)  # the last of the five steps drawn
        print(f"bits slider moved 5 steps left by keyboard: new images after "
              f"{1000 * (time.monotonic() - t0):.0f} ms (the last step's included)")
    else:
        print("bits slider: no focusable handle found; only the drop-down was changed")
    print(f"  the page's controls then: {await page.js(CONTROLS_JS)}")
    readout = await page.js("""(() => [...document.querySelectorAll('.widget-readout')]
        .map(e => e.textContent.trim()))()""")
    tables = await page.js("""(() => [...document.querySelectorAll('.jp-OutputArea table')]
        .map(t => t.innerText.replace(/\\s+/g, ' ').slice(0, 160)))()""")
    print(f"readouts now: {readout}")
    print(f"first pane's table: {tables[0] if tables else None}")
    await page.shot(out / "widget_after_change.png")
    page.ws.close()


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shots")
    out.mkdir(parents=True, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium on PATH")
        return 2
    work = Path(tempfile.mkdtemp(prefix="qs-browser-"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, work / "widget.ipynb")
    token, lab_port, debug_port = secrets.token_hex(16), free_port(), free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), JUPYTER_CONFIG_DIR=str(work / "cfg"))
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={lab_port}",
         "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
         "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={work}",
         "--allow-root"], env=env, stdout=subprocess.DEVNULL, stderr=open(work / "lab.log", "w"))
    browser = None
    try:
        wait_http(f"http://127.0.0.1:{lab_port}/api/status?token={token}", 120)
        browser = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
             f"--remote-debugging-port={debug_port}", "--window-size=1400,1600",
             f"--user-data-dir={work / 'chromium'}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{lab_port}/lab/tree/widget.ipynb?token={token}"
        asyncio.run(drive(debug_port, url, out))
    finally:
        for proc in (browser, lab):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

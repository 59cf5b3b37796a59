"""Headless Chromium driven over the DevTools protocol, for the report's browser tests and
bench/report.py: load a local file, and get back the rendered DOM, a screenshot, every
network request the page made, every console error, and how long it took to load.

Debian's ``chromium`` is started with a throw-away profile and no background traffic; the
driver speaks to it over a websocket on 127.0.0.1 (websocket-client).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SKIP_REASON = "install chromium (apt-get install chromium)"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--remote-debugging-port=0",
)


def chromium() -> str | None:
    """The chromium binary, or ``None`` when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Loaded:
    """What one page load gave: ``dom`` (outerHTML after scripts ran), ``requests`` (URLs
    the page asked for, the page itself excluded), ``errors`` (console errors, uncaught
    exceptions, CSP violations), ``load_s`` (navigation to the load event, wall clock) and
    ``timing`` (the page's own navigation and paint timings, ms)."""

    dom: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    load_s: float = 0.0
    timing: dict[str, float] = field(default_factory=dict)


class Browser:
    """One chromium process and a DevTools session on its first page."""

    def __init__(self, ws: Any, proc: subprocess.Popen[bytes]):
        self._ws, self._proc, self._id = ws, proc, 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self._ws.recv())
            self.events.append(msg)
            if msg.get("method") == method:
                return msg
        raise TimeoutError(f"no {method} within {timeout} s")

    def evaluate(self, expression: str) -> Any:
        found = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in found:
            raise RuntimeError(f"{expression!r} raised {found['exceptionDetails']}")
        return found["result"].get("value")

    def load(self, path: Path, *, width: int = 1280, height: int = 900) -> Loaded:
        """Opens ``path`` and waits for its load event and two frames after it."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.events.clear()
        url = path.resolve().as_uri()
        start = time.perf_counter()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        load_s = time.perf_counter() - start
        timing = self.evaluate(_TIMING)
        dom = self.evaluate("document.documentElement.outerHTML")
        return Loaded(
            dom=dom,
            requests=self._requests(url),
            errors=self._errors(),
            load_s=load_s,
            timing=timing,
        )

    def screenshot(self, *, scale: float = 0.5) -> bytes:
        """The viewport as PNG, at ``scale``."""
        import base64

        size = self.evaluate("[innerWidth, innerHeight]")
        shot = self.call(
            "Page.captureScreenshot",
            format="png",
            clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": scale},
        )
        return base64.b64decode(shot["data"])

    def _requests(self, page_url: str) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
            and e["params"]["request"]["url"] != page_url
            and not e["params"]["request"]["url"].startswith("data:")
        ]  # inline, no network

    def _errors(self) -> list[str]:
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(json.dumps(params["exceptionDetails"])[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                )
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                out.append(params["entry"]["text"])
        return out


_TIMING = """(() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const out = {dom_content_loaded_ms: nav.domContentLoadedEventEnd, load_ms: nav.loadEventEnd};
  for (const p of performance.getEntriesByType("paint")) out[p.name.replace(/-/g, "_") + "_ms"] = p.startTime;
  return out;
})()"""


@contextmanager
def browser() -> Iterator[Browser]:
    """A fresh headless chromium (its own temporary profile), closed afterwards."""
    import websocket  # websocket-client

    binary = chromium()
    if binary is None:
        raise RuntimeError(SKIP_REASON)
    with tempfile.TemporaryDirectory(prefix="sopbus-chromium-") as profile:
        # A session of its own: chromium's helpers (zygote, renderers, crashpad) are its
        # process group, and all of them are gone before the profile is removed (a helper
        # still writing into it made the removal fail now and then).
        proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            port = _port(Path(profile), proc)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.load(r)
            page = next(t for t in targets if t["type"] == "page")
            ws = websocket.create_connection(
                page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True
            )
            try:
                b = Browser(ws, proc)
                for domain in ("Page", "Network", "Runtime", "Log"):
                    b.call(f"{domain}.enable")
                yield b
            finally:
                ws.close()
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _end_group(proc.pid)


def _end_group(pgid: int) -> None:
    """Kills what is left of chromium's process group and waits until none of it runs."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10  # a guard against a hung test, not a timing assertion
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.01)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies do not count)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _port(profile: Path, proc: subprocess.Popen[bytes]) -> int:
    """The DevTools port chromium chose (it writes it into the profile when it listens)."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if marker.is_file() and marker.read_text().strip():
            return int(marker.read_text().splitlines()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode} before listening")
        time.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port within 60 s")


def png_pixels(png: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Width, height and the pixels of an 8-bit RGB or RGBA PNG (what chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        chunk = png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6), f"unsupported PNG (depth {depth}, color {color})"
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        _unfilter(kind, line, prev, channels)
        rows.append(line)
        prev = line
    pixels = [tuple(row[x : x + channels]) for row in rows for x in range(0, stride, channels)]
    return width, height, pixels


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> None:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + a) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + b) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (a + b) // 2) & 0xFF
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF

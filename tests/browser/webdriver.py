"""A small W3C WebDriver client (chromedriver over HTTP) for the dashboard's browser tests.

Only what the tests use: a headless Chromium session, navigation, running a script, finding,
clicking and typing into elements, the browser's console log, screenshots. Standard library only.
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class WebDriverError(Exception):
    pass


def chromium_binary():
    """The Chromium executable (Debian's wrapper script, or the binary behind it), or None."""
    for path in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "",
                 shutil.which("chromium-browser") or ""):
        if path and os.access(path, os.X_OK):
            return path
    return None


def _port_open(port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Chrome:
    """chromedriver on `port` and one headless Chromium session; close() ends both."""

    def __init__(self, port, width=1600, height=1000, log_path=None):
        driver = shutil.which("chromedriver")
        binary = chromium_binary()
        if not driver or not binary:
            raise FileNotFoundError("chromium and chromedriver are needed "
                                    "(Debian: apt-get install chromium chromium-driver)")
        self.base = f"http://127.0.0.1:{port}"
        log = open(log_path, "w") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen([driver, f"--port={port}"], stdout=log, stderr=log)
        deadline = time.time() + 20
        while not _port_open(port):
            if self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                raise WebDriverError(f"chromedriver did not listen on port {port}")
            time.sleep(0.1)
        self.session = None
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--force-device-scale-factor=1", "--no-first-run",
                "--disable-extensions", "--disable-background-networking",
                f"--window-size={width},{height}"]
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": binary, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}}
        try:
            self.session = self._call("POST", "/session", caps, timeout=60)["sessionId"]
        except Exception:
            self.close()
            raise

    def _call(self, method, path, body=None, timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise WebDriverError(f"{method} {path}: {e.code} {detail[:500]}") from None

    def _s(self, path):
        return f"/session/{self.session}{path}"

    def get(self, url):
        self._call("POST", self._s("/url"), {"url": url}, timeout=60)

    def refresh(self):
        self._call("POST", self._s("/refresh"), {}, timeout=60)

    def run(self, script, *args):
        """Runs `script` (a function body: use `return`) in the page; its value, as JSON."""
        return self._call("POST", self._s("/execute/sync"), {"script": script, "args": list(args)})

    def find(self, css):
        return self._call("POST", self._s("/element"), {"using": "css selector", "value": css})[ELEMENT]

    def click(self, css):
        self._call("POST", self._s(f"/element/{self.find(css)}/click"), {})

    def type(self, css, text):
        self._call("POST", self._s(f"/element/{self.find(css)}/value"), {"text": text})

    def set_size(self, width, height):
        self._call("POST", self._s("/window/rect"), {"width": width, "height": height})

    def console(self):
        """The browser's console entries since the last call: [{level, message}]."""
        return self._call("POST", self._s("/se/log"), {"type": "browser"}) or []

    def screenshot(self, path):
        png = base64.b64decode(self._call("GET", self._s("/screenshot"), timeout=60))
        with open(path, "wb") as f:
            f.write(png)
        return path

    def wait(self, script, what, timeout=30, interval=0.25):
        """Polls `script` until it returns something true; that value. Fails after `timeout`."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = self.run(script)
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")

    def close(self):
        if self.session:
            try:
                self._call("DELETE", self._s(""), timeout=10)
            except Exception:
                pass
            self.session = None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

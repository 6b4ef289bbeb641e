"""Browser tests: Debian's chromium, driven by Playwright, against a real `jupyter lab`.

The server runs on 127.0.0.1 with a random free port, a token and its own config,
settings, workspace and runtime directories, so nothing of the user's leaks in.
It serves copies of notebooks (never the originals) and the lab extension built in
this checkout (`pallaslab/labextension`), or the installed one when there is none.

Without chromium, Playwright or a built extension these tests are skipped; with
`PALLASLAB_BROWSER_TESTS=required` (as `scripts/test` sets) they fail instead.
Screenshots go to `test-artifacts/browser/`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PALLASLAB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "browser"
REQUIRED = os.environ.get("PALLASLAB_BROWSER_TESTS") == "required"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
# Without Playwright these modules cannot even be imported: leave them out, unless
# they are required (then the import error says what is missing).
try:
    import playwright.sync_api  # noqa: F401
except ImportError:
    if not REQUIRED:
        collect_ignore_glob = ["test_*.py"]

# Kernels import JAX and trace on a shared 2-core machine: be patient, not flaky.
KERNEL_TIMEOUT_MS = int(os.environ.get("PALLASLAB_KERNEL_TIMEOUT_MS", "240000"))


def built_extension() -> Path | None:
    """The lab extension to serve: this checkout's build first, else the installed one."""
    candidates = [
        ROOT / "pallaslab" / "labextension",
        Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "pallaslab",
    ]
    for candidate in candidates:
        if (candidate / "package.json").is_file() and (candidate / "static").is_dir():
            return candidate
    return None


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed"
    if built_extension() is None:
        return "the lab extension is not built (cd labextension && jlpm install && jlpm build)"
    return None


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"browser tests are required but cannot run: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_copy(source: Path, target: Path, *, keep_outputs: bool = False) -> Path:
    """Copies a notebook without saved widget state (and without outputs, unless kept)."""
    notebook = json.loads(source.read_text(encoding="utf-8"))
    notebook.get("metadata", {}).pop("widgets", None)
    if not keep_outputs:
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"] = []
                cell["execution_count"] = None
    target.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return target


def write_notebook(path: Path, cells: list[str]) -> Path:
    """Writes a notebook of code cells (Python 3 kernel)."""
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {
                "id": f"cell-{k}",
                "cell_type": "code",
                "metadata": {},
                "source": source,
                "outputs": [],
                "execution_count": None,
            }
            for k, source in enumerate(cells)
        ],
    }
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return path


class JupyterServer:
    """A running `jupyter lab` and the directories it uses."""

    def trust(self, name: str) -> None:
        """Signs a notebook as the server would after the user ran it (trusted output)."""
        import nbformat
        from nbformat.sign import NotebookNotary

        path = self.root / name
        notebook = nbformat.read(path, as_version=4)
        NotebookNotary(data_dir=self.env["JUPYTER_DATA_DIR"]).sign(notebook)
        nbformat.write(notebook, path)

    def __init__(self, home: Path, root: Path, settings: Path, env: dict[str, str]):
        self.home = home
        self.root = root
        self.settings = settings
        self.env = env
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.log_path = home / "jupyter.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """A page of the server, with the token."""
        separator = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{separator}token={self.token}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Calls the server's REST API with the token; returns the decoded JSON."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
        return json.loads(text) if text else None

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.open_browser=False",
            # A loaded 2-core CI machine can take over a minute to start a kernel.
            "--MappingKernelManager.kernel_info_timeout=300",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")  # CI containers often run as root
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.root
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited:\n{self.log_tail()}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                self.api("GET", "/api/status")
                return
            time.sleep(0.5)
        raise RuntimeError(f"jupyter lab did not start in 120 s:\n{self.log_tail()}")

    def shutdown_sessions(self) -> None:
        """Ends every notebook session and its kernel (each holds JAX: hundreds of MB)."""
        with contextlib.suppress(Exception):
            for session in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{session['id']}")

    def stop(self) -> None:
        if self.process is None:
            return
        # Shut kernels down through the API first so no kernel outlives the server.
        with contextlib.suppress(Exception):
            for kernel in self.api("GET", "/api/kernels"):
                self.api("DELETE", f"/api/kernels/{kernel['id']}")
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture(scope="session")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """A `jupyter lab` serving copies of the course notebooks, with pallaslab's extension."""
    reason = _missing()
    if reason:
        _unavailable(reason)
    extension = built_extension()
    assert extension is not None
    home = tmp_path_factory.mktemp("jupyter")
    root = home / "notebooks"
    root.mkdir()
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        clean_copy(notebook, root / notebook.name)
    data = home / "data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "pallaslab").symlink_to(extension, target_is_directory=True)
    settings = home / "settings"
    notification = settings / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    # No news or update checks: no network, no toasts over the page.
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = dict(os.environ)
    env.update(
        {
            "JUPYTER_PATH": os.pathsep.join(filter(None, [str(data), env.get("JUPYTER_PATH")])),
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            # Notebook signatures (trust) live here, away from the user's own.
            "JUPYTER_DATA_DIR": str(home / "user-data"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "IPYTHONDIR": str(home / "ipython"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            "JAX_PLATFORMS": env.get("JAX_PLATFORMS", "cpu"),
            "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
    )
    server = JupyterServer(home, root, settings, env)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(server.log_path, ARTIFACTS / "jupyter.log")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian chromium (Playwright never downloads a browser here)."""
    reason = _missing()
    if reason:
        _unavailable(reason)
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield instance
        finally:
            instance.close()


class PageErrors:
    """Uncaught errors and console errors of a page, for assertions."""

    def __init__(self, page: Any):
        self.uncaught: list[str] = []
        self.stacks: list[str] = []
        self.console: list[str] = []
        page.on("pageerror", self._uncaught)
        page.on(
            "console",
            lambda message: self.console.append(message.text) if message.type == "error" else None,
        )

    def _uncaught(self, error: Any) -> None:
        self.uncaught.append(str(error))
        self.stacks.append(str(error.stack or error))

    def ours(self) -> list[str]:
        """Uncaught errors thrown by pallaslab's code: the lab extension or the widget.

        The widget's module runs from a blob: URL (anywidget), the extension from
        /lab/extensions/pallaslab/; anything else is the host's own business.
        """
        return [
            stack
            for stack in self.stacks
            if "/lab/extensions/pallaslab/" in stack or "blob:" in stack or "pallaslab" in stack
        ]

    def about(self, needle: str) -> list[str]:
        """The errors that mention `needle` (case-insensitive)."""
        return [e for e in self.uncaught + self.console if needle.lower() in e.lower()]


@pytest.fixture
def new_page(browser: Any, jupyter: JupyterServer) -> Iterator[Any]:
    """Makes pages in fresh browser contexts; closes them after the test."""
    contexts = []

    def make(width: int = 1600, height: int = 1000) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(60_000)
        contexts.append(context)
        page = context.new_page()
        page.errors = PageErrors(page)
        return page

    yield make
    for context in contexts:
        context.close()
    jupyter.shutdown_sessions()


@pytest.fixture(scope="module")
def module_page(browser: Any, jupyter: JupyterServer) -> Iterator[Any]:
    """One page shared by the tests of a module (a notebook is run once, then inspected)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.errors = PageErrors(page)
    yield page
    context.close()
    jupyter.shutdown_sessions()


def screenshot(page: Any, name: str) -> Path:
    """Saves a screenshot into the artifacts folder (for people; tests assert on the DOM)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path

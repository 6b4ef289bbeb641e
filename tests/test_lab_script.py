"""`scripts/lab` builds the front ends only when their sources changed, and quietly.

The shell functions of `scripts/bootstrap.sh` run against a copy of it in a scratch
tree, with a `jlpm` of our own first on PATH that records how it was called, prints
yarn's kind of chatter and writes the build's outputs: the oracle is what it was asked
to do, and what reached the terminal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHATTER = (
    "YN0004: esbuild@npm:0.25.12 lists build scripts, but all build scripts have been disabled."
)
FAKE_JLPM = f"""#!/usr/bin/env bash
echo "$*" >> "$JLPM_CALLS"
echo "{CHATTER}"
if [ -n "${{JLPM_FAIL:-}}" ]; then echo "error TS2339: no such property" >&2; exit 1; fi
if [ "$1" = build:prod ]; then
  mkdir -p ../pallaslab/labextension ../pallaslab/_src/views/frontend
  echo '{{}}' > ../pallaslab/labextension/package.json
  echo 'export default {{}}' > ../pallaslab/_src/views/frontend/inspector.js
  echo 'export default {{}}' > ../pallaslab/_src/views/frontend/bench.js
fi
"""


@pytest.fixture
def tree(tmp_path):
    """A checkout's shape: scripts/bootstrap.sh, labextension/ sources, a venv with jlpm."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    source = tmp_path / "labextension"
    (source / "src").mkdir(parents=True)
    (source / "package.json").write_text('{"name": "pallaslab"}')
    (source / "yarn.lock").write_text("# lock\n")
    (source / "src" / "index.ts").write_text("export const a = 1;\n")
    # What installs and builds write beside the sources must not count as a change.
    (source / "node_modules").mkdir()
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    jlpm = venv / "bin" / "jlpm"
    jlpm.write_text(FAKE_JLPM)
    jlpm.chmod(0o755)
    return tmp_path


def build(tree: Path, **env: str) -> tuple[int, str, str, list[str]]:
    """Runs build_frontends_if_changed; returns (status, stdout, stderr, jlpm's calls)."""
    calls = tree / "calls.txt"
    calls.write_text("")
    script = f'source "{tree}/scripts/bootstrap.sh" && build_frontends_if_changed'
    done = subprocess.run(
        ["bash", "-c", script],
        check=False,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PALLASLAB_VENV": str(tree / "venv"),
            "JLPM_CALLS": str(calls),
            **env,
        },
        cwd=tree,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr, calls.read_text().splitlines()


def test_builds_once_then_only_when_sources_change(tree):
    status, out, err, calls = build(tree)
    assert status == 0, err
    assert calls == ["install --immutable", "build:prod"]
    assert "building" in out and CHATTER not in out + err  # yarn's chatter in the log only
    assert CHATTER in (tree / "labextension" / ".build.log").read_text()

    status, out, err, calls = build(tree)
    assert (status, calls) == (0, [])
    assert out.strip() == "==> lab extension and widgets: up to date"

    # Files installs and builds write (node_modules, the log) change nothing.
    (tree / "labextension" / "node_modules" / "x.js").write_text("1")
    assert build(tree)[3] == []

    (tree / "labextension" / "src" / "index.ts").write_text("export const a = 2;\n")
    assert build(tree)[3] == ["install --immutable", "build:prod"]
    assert build(tree)[3] == []
    (tree / "labextension" / "yarn.lock").write_text("# another lock\n")
    assert build(tree)[3] == ["install --immutable", "build:prod"]


def test_a_missing_output_is_built_again(tree):
    assert build(tree)[0] == 0
    (tree / "pallaslab" / "_src" / "views" / "frontend" / "bench.js").unlink()
    status, _, _, calls = build(tree)
    assert status == 0 and calls == ["install --immutable", "build:prod"]


def test_a_failed_build_shows_its_log_and_stops(tree):
    assert build(tree)[0] == 0  # an earlier build's outputs are there
    (tree / "labextension" / "src" / "index.ts").write_text("export const a = 'oops';\n")
    status, _, err, _ = build(tree, JLPM_FAIL="1")
    assert status != 0
    assert "The front-end build failed" in err and "error TS2339" in err
    # Nothing recorded as built: the next start tries again.
    assert build(tree)[3] == ["install --immutable", "build:prod"]


def test_scripts_lab_uses_it():
    lab = (ROOT / "scripts" / "lab").read_text()
    assert "build_frontends_if_changed" in lab and "\n  build_frontends\n" not in lab

# Shared by scripts/lab and scripts/test: make .venv and install pallaslab into it.
# Sourced, not run. Idempotent: a second run only checks what is installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PALLASLAB_VENV:-$ROOT/.venv}"

pick_python() {
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "pallaslab needs Python 3.11 or newer on PATH" >&2
  exit 1
}

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV"
  "$(pick_python)" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi

# $1: the extras to install, e.g. "triton" or "triton,test".
install_pallaslab() {
  echo "==> installing pallaslab[$1] into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --progress-bar off -e "$ROOT[$1]"
}

export PATH="$VENV/bin:$PATH"
# CPU by default: a laptop's GPU is not what the course is about. Set
# JAX_PLATFORMS yourself (e.g. JAX_PLATFORMS=cuda) to run kernels on a GPU.
export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"

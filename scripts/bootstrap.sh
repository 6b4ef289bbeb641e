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
  local extras="$1"
  # gpu-compile brings JAX's CUDA 12 plugin; a JAX set up with the CUDA 13 plugin keeps
  # its own (two CUDA plugins cannot live in one environment): then only NVIDIA's tools.
  if [[ ",$extras," == *",gpu-compile,"* ]] && "$VENV/bin/python" -c \
      'import importlib.util, sys; sys.exit(importlib.util.find_spec("jax_cuda13_plugin") is None)' \
      2>/dev/null; then
    extras="${extras//gpu-compile/}"
    extras="${extras//,,/,}"
    extras="${extras#,}"
    extras="${extras%,}"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --progress-bar off \
      nvidia-cuda-nvcc nvidia-cuda-nvdisasm nvidia-cuda-runtime
  fi
  echo "==> installing pallaslab[$extras] into $VENV"
  # The build hook would build the front ends inside pip (and only warn when it cannot):
  # the scripts build them once, afterwards, with build_frontends.
  SKIP_JUPYTER_BUILDER=1 "$VENV/bin/python" -m pip install --quiet \
    --disable-pip-version-check --progress-bar off -e "$ROOT[$extras]"
}

# The lab extension and the widgets' front end are built from labextension/ (TypeScript),
# here, where a failure stops the script.
build_frontends() {
  # `|| return`: inside an `if`, bash ignores set -e, and a failed build is not built.
  (cd "$ROOT/labextension" && jlpm install --immutable && jlpm build:prod) || return
  mkdir -p "$(dirname "$FRONTEND_STAMP")"
  frontend_digest >"$FRONTEND_STAMP"
}

# What the front ends are built from: their sources, styles, schemas, package and lock
# files and build configuration (labextension/, less what installs and builds write).
frontend_digest() {
  (
    cd "$ROOT/labextension" &&
      find . \( -path ./node_modules -o -path ./lib -o -path ./.yarn -o -path ./coverage \
        -o -name '*.tsbuildinfo' -o -name .eslintcache -o -name '.build*' \) -prune \
        -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
  )
}

# Where the digest of the last build is kept: beside what it built (both are ignored by
# git, and a removed build takes its digest with it).
FRONTEND_STAMP="$ROOT/pallaslab/_src/views/frontend/.sources-digest"

# Builds the front ends only when their sources changed since the last build (or a
# build output is missing), quietly: one line, and the build's log only if it fails.
build_frontends_if_changed() {
  local outputs=(
    "$ROOT/pallaslab/labextension/package.json"
    "$ROOT/pallaslab/_src/views/frontend/inspector.js"
    "$ROOT/pallaslab/_src/views/frontend/bench.js"
  )
  local output missing=""
  for output in "${outputs[@]}"; do
    [ -f "$output" ] || missing="$output"
  done
  if [ -z "$missing" ] && [ -f "$FRONTEND_STAMP" ] &&
    [ "$(cat "$FRONTEND_STAMP")" = "$(frontend_digest)" ]; then
    echo "==> lab extension and widgets: up to date"
    return 0
  fi
  local log="$ROOT/labextension/.build.log" start=$SECONDS
  echo "==> lab extension and widgets: building (sources changed since the last build)"
  if ! build_frontends >"$log" 2>&1; then
    echo "The front-end build failed; the end of its log ($log):" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
  echo "    built in $((SECONDS - start)) s (log: $log)"
}

# Links the built extension into the environment (a symlink to pallaslab/labextension),
# replacing any copy an install left there: JupyterLab then serves every later build.
link_labextension() {
  echo "==> linking the lab extension into $VENV"
  if command -v jupyter-builder >/dev/null 2>&1; then
    jupyter-builder develop --overwrite "$ROOT"
  else
    jupyter labextension develop --overwrite "$ROOT"
  fi
}

# Says what XLA's GPU compile (xla-gpu targets) still lacks, if anything.
check_gpu_compile() {
  "$VENV/bin/python" -c 'from pallaslab._src.core import gpu_toolchain as t; p = t.problem(); print(p or "xla-gpu targets: ready"); raise SystemExit(1 if p else 0)'
}

export PATH="$VENV/bin:$PATH"
# CPU by default: a laptop's GPU is not what the course is about. Set
# JAX_PLATFORMS yourself (e.g. JAX_PLATFORMS=cuda) to run kernels on a GPU.
export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"

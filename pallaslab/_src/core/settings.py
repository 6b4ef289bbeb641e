"""The user's pallaslab settings, as JupyterLab's settings editor saves them.

The lab extension declares the settings (its `schema/plugin.json`); JupyterLab
stores what the user sets as JSON5 under the user-settings directory, with
administrators' defaults in `overrides.json`. The kernel runs on the machine
that serves JupyterLab, so Python reads the same files: defaults, then
overrides, then the user's values. Without JupyterLab (a script, VS Code,
Colab) there is no file and the defaults hold.

A setting that is malformed is ignored with a note in `Settings.problems`: a
typo in the settings editor never stops a kernel cell.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import json5

from pallaslab._src.records import hardware


class SettingsNotice(UserWarning):
    """A settings file or a setting that was ignored (the defaults hold); says why."""


#: The lab extension's plugin whose schema declares these settings.
PLUGIN_ID = "pallaslab:plugin"

#: IR targets the inspector can open first ("auto": the backend at hand's own).
TARGETS = (
    "auto",
    "stablehlo",
    "mosaic-gpu",
    "triton",
    "ttgir",
    "llir",
    "ptx",
    "sass",
    "mosaic-tpu",
    "tpu-compile",
    "xla-gpu",
)

#: TPU generations a target can be lowered for, from the hardware table.
TPU_GENERATIONS = tuple(hardware.TPUS)


@dataclasses.dataclass(frozen=True)
class Settings:
    """pallaslab's settings.

    Attributes:
        default_target: The IR target shown first (one of `TARGETS`).
        tpu_generation: The TPU generation TPU targets lower for (one of
            `TPU_GENERATIONS`).
        interpret: Run kernels in Pallas interpret mode on every backend, as
            `%%kernel --interpret` does (on a CPU they always are).
        persistent_compile_cache: Keep compiled programs on disk with JAX's
            persistent compilation cache, so a new session does not compile them
            again (`pallaslab.use_persistent_cache`).
        persistent_compile_cache_dir: Its directory ("" for pallaslab's cache
            directory's `xla/`).
        loop_iteration_budget: Iterations each `while` loop of an emulated or
            interpreted kernel may run per program (`pallaslab.set_run_budget`).
        run_seconds_budget: Wall-clock seconds such a run may take (0: no limit).
        tuning_cluster: Where `%%kernel --tune` runs its configs: "" (here), "local"
            (a Ray on this machine) or a Ray cluster's address; a default `--cluster`.
        files: The settings files that were read, lowest precedence first.
        problems: Settings that were ignored, and why.
    """

    default_target: str = "auto"
    tpu_generation: str = "v5e"
    interpret: bool = False
    persistent_compile_cache: bool = False
    persistent_compile_cache_dir: str = ""
    loop_iteration_budget: int = 10_000_000
    run_seconds_budget: float = 0
    tuning_cluster: str = ""
    files: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


# Schema key -> (field, allowed values or the type).
_FIELDS: dict[str, tuple[str, tuple[str, ...] | type]] = {
    "defaultTarget": ("default_target", TARGETS),
    "tpuGeneration": ("tpu_generation", TPU_GENERATIONS),
    "interpret": ("interpret", bool),
    "persistentCompileCache": ("persistent_compile_cache", bool),
    "persistentCompileCacheDir": ("persistent_compile_cache_dir", str),
    "loopIterationBudget": ("loop_iteration_budget", int),
    "runSecondsBudget": ("run_seconds_budget", float),
    "tuningCluster": ("tuning_cluster", str),
}
# Numeric settings' smallest values (the schema's "minimum").
_MINIMUM = {"loopIterationBudget": 1000, "runSecondsBudget": 0}


def user_settings_dir() -> Path:
    """JupyterLab's user-settings directory (`$JUPYTERLAB_SETTINGS_DIR` wins)."""
    configured = os.environ.get("JUPYTERLAB_SETTINGS_DIR")
    if configured:
        return Path(configured)
    from jupyter_core.paths import jupyter_config_dir  # noqa: PLC0415 (only when needed)

    return Path(jupyter_config_dir()) / "lab" / "user-settings"


def user_settings_file() -> Path:
    """The file the settings editor writes pallaslab's settings to."""
    package, _, plugin = PLUGIN_ID.partition(":")
    return user_settings_dir() / package / f"{plugin}.jupyterlab-settings"


def overrides_files() -> list[Path]:
    """Administrators' defaults, lowest precedence first (as jupyterlab_server reads them)."""
    app_dir = os.environ.get("JUPYTERLAB_DIR") or str(
        Path(sys.prefix) / "share" / "jupyter" / "lab"
    )
    settings = Path(app_dir) / "settings"
    conf_d = sorted([*settings.glob("overrides.d/*.json"), *settings.glob("overrides.d/*.json5")])
    return [*conf_d, settings / "overrides.json", settings / "overrides.json5"]


def load(user_file: Path | None = None, overrides: list[Path] | None = None) -> Settings:
    """Reads the settings: defaults, then overrides, then the user's own.

    Args:
        user_file: The user-settings file (default: `user_settings_file()`).
        overrides: Override files (default: `overrides_files()`).
    """
    values: dict[str, Any] = {}
    problems: list[str] = []
    read: list[str] = []
    for path in overrides_files() if overrides is None else overrides:
        data = _read(path, problems)
        if data is None:
            continue
        read.append(str(path))
        plugin = data.get(PLUGIN_ID, {})
        if isinstance(plugin, dict):
            values.update(plugin)
        else:
            problems.append(f"{path}: {PLUGIN_ID} is not an object; ignored")
    path = user_settings_file() if user_file is None else user_file
    data = _read(path, problems)
    if data is not None:
        read.append(str(path))
        values.update(data)
    fields: dict[str, Any] = {}
    for key, value in values.items():
        if key not in _FIELDS:
            problems.append(f"unknown setting {key!r}; ignored")
            continue
        field, allowed = _FIELDS[key]
        if key in _MINIMUM and _fits(value, allowed) and value < _MINIMUM[key]:
            problems.append(f"{key} = {value!r} is below {_MINIMUM[key]}; the default holds")
            continue
        if not _fits(value, allowed):
            expected = allowed.__name__ if isinstance(allowed, type) else ", ".join(allowed)
            problems.append(f"{key} = {value!r} is not one of: {expected}; the default holds")
            continue
        fields[field] = value
    return Settings(**fields, files=tuple(read), problems=tuple(problems))


def _fits(value: Any, allowed: tuple[str, ...] | type) -> bool:
    """Whether a setting's value is one of those allowed, or of the allowed type."""
    if not isinstance(allowed, type):
        return value in allowed
    if isinstance(value, bool) and allowed is not bool:  # JSON's true is no number
        return False
    if allowed is float:
        return isinstance(value, int | float)
    return isinstance(value, allowed)


def _read(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as error:
        problems.append(
            f"{path} is not UTF-8 text (byte {error.object[error.start]:#04x} at "
            f"position {error.start}); ignored"
        )
        return None
    except OSError as error:
        problems.append(f"{path}: {error.strerror or error}")
        return None
    if not text.strip():
        return None
    try:
        data = json5.loads(text)
    except ValueError as error:
        problems.append(f"{path} is not valid JSON5 ({error}); ignored")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path} does not hold an object; ignored")
        return None
    return data

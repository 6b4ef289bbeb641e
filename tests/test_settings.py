"""pallaslab's settings as JupyterLab stores them, read by the Python side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pallaslab
from pallaslab._src.core import session, settings

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "labextension" / "schema" / "plugin.json"


@pytest.fixture
def lab_dirs(tmp_path, monkeypatch):
    """Empty user-settings and app directories, as a fresh JupyterLab has."""
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path / "user-settings"))
    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path / "app"))
    return tmp_path


def write_user(lab_dirs: Path, text: str) -> Path:
    path = settings.user_settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_jupyterlab(lab_dirs):
    loaded = settings.load()
    assert (loaded.default_target, loaded.tpu_generation, loaded.interpret) == (
        "auto",
        "v5e",
        False,
    )
    assert loaded.files == () and loaded.problems == ()
    assert pallaslab.settings() == loaded


def test_the_file_is_where_jupyterlab_writes_it(lab_dirs):
    assert settings.user_settings_file() == (
        lab_dirs / "user-settings" / "pallaslab" / "plugin.jupyterlab-settings"
    )


def test_user_settings_are_json5_with_comments(lab_dirs):
    path = write_user(
        lab_dirs,
        """{
        // Set by the settings editor
        "defaultTarget": "ptx",
        "tpuGeneration": "v6e",
        "interpret": true, /* trailing comma next */
    }""",
    )
    loaded = settings.load()
    assert (loaded.default_target, loaded.tpu_generation, loaded.interpret) == ("ptx", "v6e", True)
    assert loaded.files == (str(path),)
    assert loaded.problems == ()


def test_overrides_come_before_the_user(lab_dirs):
    overrides = lab_dirs / "app" / "settings"
    overrides.mkdir(parents=True)
    (overrides / "overrides.json").write_text(
        json.dumps({"pallaslab:plugin": {"tpuGeneration": "v4", "interpret": True}})
    )
    write_user(lab_dirs, '{"tpuGeneration": "v5p"}')
    loaded = settings.load()
    assert loaded.tpu_generation == "v5p"  # the user's value wins
    assert loaded.interpret is True  # the administrator's default holds
    assert len(loaded.files) == 2


def test_bad_values_are_ignored_with_a_reason(lab_dirs):
    write_user(lab_dirs, '{"defaultTarget": "cuda", "interpret": "yes", "colour": 1}')
    loaded = settings.load()
    assert (loaded.default_target, loaded.interpret) == ("auto", False)
    assert any("defaultTarget = 'cuda'" in p for p in loaded.problems)
    assert any("interpret = 'yes'" in p for p in loaded.problems)
    assert any("unknown setting 'colour'" in p for p in loaded.problems)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_a_broken_file_is_ignored(lab_dirs, text):
    path = write_user(lab_dirs, text)
    loaded = settings.load()
    assert loaded.default_target == "auto"
    assert any(str(path) in p for p in loaded.problems)


def test_python_and_the_schema_agree():
    schema = json.loads(SCHEMA.read_text())
    properties = schema["properties"]
    assert schema["additionalProperties"] is False
    assert set(properties) == set(settings._FIELDS)
    assert tuple(properties["defaultTarget"]["enum"]) == settings.TARGETS
    assert tuple(properties["tpuGeneration"]["enum"]) == settings.TPU_GENERATIONS
    defaults = settings.Settings()
    assert properties["defaultTarget"]["default"] == defaults.default_target
    assert properties["tpuGeneration"]["default"] == defaults.tpu_generation
    assert properties["interpret"]["default"] == defaults.interpret
    for key, (field, _) in settings._FIELDS.items():
        assert properties[key]["default"] == getattr(defaults, field), key


def test_the_magic_takes_interpret_from_the_settings(ip, lab_dirs, monkeypatch):
    seen = []
    real = session.execute_cell

    def spy(*args, **kwargs):
        seen.append(kwargs["options"].interpret)
        return real(*args, **kwargs)

    monkeypatch.setattr("pallaslab._src.magic.execute_cell", spy)
    cell = "x = 1"
    ip.run_cell_magic("kernel", "--no-run", cell)
    write_user(lab_dirs, '{"interpret": true}')
    ip.run_cell_magic("kernel", "--no-run", cell)
    assert seen == [False, True]


def test_a_file_that_is_not_utf8_is_ignored_with_a_reason(lab_dirs):
    path = settings.user_settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"interpret": true, "note": "caf\xe9"}')  # Latin-1, not UTF-8
    loaded = settings.load()
    assert loaded.interpret is False  # the defaults hold
    assert any(str(path) in p and "not UTF-8" in p for p in loaded.problems)


def test_a_bad_settings_file_never_stops_the_extension(lab_dirs):
    """`%load_ext pallaslab` and every %%kernel cell work; a notice names the file."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    path = settings.user_settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xfe{\x00b\x00a\x00d\x00")  # UTF-16, as some editors save
    getattr(session, "_noticed", set()).clear()  # notices are once a session
    shell = InteractiveShell.instance()
    # As in a fresh kernel: the extension not loaded, no %%kernel magic.
    shell.extension_manager.loaded.discard("pallaslab")
    shell.magics_manager.magics["cell"].pop("kernel", None)
    with capture_output() as captured, pytest.warns(settings.SettingsNotice, match=str(path)):
        loaded = shell.extension_manager.load_extension("pallaslab")
    with capture_output() as ran:
        result = shell.run_cell("%%kernel --no-run\nx = 1 + 1\n")
    assert loaded is None
    assert result.success, result.error_in_exec
    assert "Cell magic" not in captured.stdout + captured.stderr + ran.stdout + ran.stderr
    assert shell.user_ns["x"] == 2


def test_the_run_budget_follows_the_settings_until_set_in_the_session(lab_dirs, monkeypatch):
    from pallaslab._src.core import run_budget

    monkeypatch.setattr(run_budget, "_explicit", False)
    monkeypatch.setattr(run_budget, "_budget", run_budget.RunBudget())
    write_user(lab_dirs, '{"loopIterationBudget": 50000, "runSecondsBudget": 12.5}')
    session.cell_settings()
    assert run_budget.run_budget() == run_budget.RunBudget(50_000, 12.5)
    write_user(lab_dirs, '{"loopIterationBudget": 10, "runSecondsBudget": true}')
    loaded = settings.load()
    assert loaded.loop_iteration_budget == 10_000_000  # below the minimum: the default
    assert loaded.run_seconds_budget == 0  # true is no number
    assert any("loopIterationBudget = 10 is below 1000" in p for p in loaded.problems)
    pallaslab.set_run_budget(loop_iterations=70_000, seconds=None)
    write_user(lab_dirs, '{"loopIterationBudget": 50000}')
    session.cell_settings()
    assert run_budget.run_budget().loop_iterations == 70_000  # the session's own wins

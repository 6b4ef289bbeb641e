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

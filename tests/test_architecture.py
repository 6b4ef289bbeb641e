"""The public API and the layers: what `import pallaslab` loads, what it lists, cycles.

The layers themselves are import-linter contracts (`lint-imports` in scripts/test,
contracts in pyproject.toml); these tests pin what the contracts cannot say.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pallaslab
import pallaslab.course
import pallaslab.types

ROOT = Path(__file__).resolve().parents[1]

# Loaded on first use only: the course's catalog, the views, and the libraries they need.
HEAVY = (
    "jax",
    "pandas",
    "matplotlib",
    "IPython",
    "anywidget",
    "ipywidgets",
    "pallaslab._src.course",
    "pallaslab._src.views",
    "pallaslab._src.core",
    "ray",
)


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_importing_pallaslab_loads_no_course_views_pandas_matplotlib_ipython_or_jax():
    assert _heavy(_loaded_after("import pallaslab")) == []


def test_the_probe_sees_what_a_name_loads():
    # The same probe, after using a name: it does load the core (and JAX), so the test
    # above would see them if `import pallaslab` loaded them.
    loaded = _loaded_after("import pallaslab\npallaslab.inspect")
    assert "jax" in loaded and "pallaslab._src.core.inspection" in loaded
    assert "pallaslab._src.views.inspector" not in loaded and "pandas" not in loaded


def test_tuning_loads_ray_only_for_a_cluster():
    # The magic and `pallaslab.tune` are loaded, tuning here is set up: Ray is not.
    loaded = _loaded_after(
        "import pallaslab\nimport pallaslab._src.magic\npallaslab.tune\n"
        "from pallaslab._src.bench.cluster.spec import cluster_spec\ncluster_spec(None)"
    )
    assert "pallaslab._src.bench.tune" in loaded
    assert not [m for m in loaded if m == "ray" or m.startswith("ray.")]


def test_dir_lists_exactly_all_and_every_name_resolves():
    assert sorted(dir(pallaslab)) == sorted(pallaslab.__all__)
    assert len(set(pallaslab.__all__)) == len(pallaslab.__all__)
    for name in pallaslab.__all__:
        assert getattr(pallaslab, name) is not None, name
    # Lazy names are listed like the others (tab completion sees bench and tune).
    assert {"bench", "tune", "inspect", "exercise", "types", "course"} <= set(dir(pallaslab))
    with pytest.raises(AttributeError, match="no attribute 'kernel_merit'"):
        pallaslab.kernel_merit  # noqa: B018 - one spelling per verb: inspection.merit()


def test_types_and_course_export_what_they_list():
    for module in (pallaslab.types, pallaslab.course):
        assert sorted(module.__all__) == sorted(set(module.__all__))
        for name in module.__all__:
            assert getattr(module, name) is not None, (module.__name__, name)


# Names in return annotations that are not pallaslab's records.
_NOT_RECORDS = {
    "Any",
    "Callable",
    "DataFrame",
    "Figure",
    "Iterator",
    "None",
    "Path",
    "Self",
    "Sequence",
}


def _returned_names(function: object) -> set[str]:
    annotation = inspect.signature(function).return_annotation  # type: ignore[arg-type]
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return {name.split(".")[-1] for name in re.findall(r"[A-Z][\w.]*", text)} - _NOT_RECORDS


def test_everything_the_api_returns_is_a_public_type():
    public = set(pallaslab.types.__all__) | set(pallaslab.course.__all__)
    functions = [
        getattr(pallaslab, name)
        for name in pallaslab.__all__
        if inspect.isfunction(getattr(pallaslab, name))
    ]
    methods = [
        member
        for cls in (
            pallaslab.types.Inspection,
            pallaslab.types.TileMap,
            pallaslab.types.KernelMerit,
        )
        for name, member in vars(cls).items()
        if inspect.isfunction(member) and not name.startswith("_")
    ]
    assert len(functions) > 15 and len(methods) > 20
    missing = {
        f"{function.__qualname__} -> {name}"
        for function in (*functions, *methods)
        for name in _returned_names(function)
        if name not in public
    }
    assert not missing, sorted(missing)


def test_the_module_graph_has_no_cycle():
    grimp = pytest.importorskip("grimp", reason="comes with import-linter (the test extra)")
    graph = grimp.build_graph("pallaslab")
    modules = sorted(m for m in graph.modules if m.startswith("pallaslab"))
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in modules}
    # Kahn's algorithm: a graph is acyclic exactly when every module can be removed
    # once nothing left imports it.
    importers = dict.fromkeys(modules, 0)
    for imported in edges.values():
        for m in imported:
            importers[m] += 1
    free = [m for m, count in importers.items() if count == 0]
    removed = 0
    while free:
        module = free.pop()
        removed += 1
        for m in edges[module]:
            importers[m] -= 1
            if importers[m] == 0:
                free.append(m)
    cyclic = sorted(m for m, count in importers.items() if count > 0)
    assert removed == len(modules), f"modules on import cycles: {cyclic}"

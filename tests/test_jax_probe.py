"""scripts/jax-probe: building a newer JAX's source into a probe environment.

Its rewriting of Python 3.12 syntax is checked on code in each form JAX's source uses;
the export from a folder, a wheel and an sdist on tiny fakes. Running the probe itself
needs JAX's source, which CI does not fetch.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    loader = importlib.machinery.SourceFileLoader("jax_probe", str(ROOT / "scripts" / "jax-probe"))
    spec = importlib.util.spec_from_loader("jax_probe", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


probe = _load()

PEP_695 = textwrap.dedent(
    '''
    """A module in JAX 0.11's style."""
    from __future__ import annotations
    import abc
    from typing import Protocol

    def loop[T](x: T, *, n: int = 2) -> list[T]:
        return [x] * n

    class Box[K, V](abc.ABC):
        def get(self, key: K) -> V | None:
            return None

    class Plain[T]:
        pass

    class Call[**P, R](Protocol):
        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def bound[T: (int, str)](value: T) -> T:
        return value

    class Multi[
        A,
        B: int,
    ](dict):
        pass

    type Pair = tuple[int, int]
    '''
)


def test_type_parameter_syntax_becomes_3_11_syntax():
    rewritten = probe.rewrite_type_params(PEP_695)
    compile(rewritten, "<probe>", "exec")  # 3.11 accepts it
    namespace: dict = {}
    exec(compile(rewritten, "<probe>", "exec"), namespace)
    assert namespace["loop"]("a", n=3) == ["a", "a", "a"]
    assert namespace["bound"](7) == 7
    assert namespace["Box"][int, str] is not None  # generic classes still subscript
    assert namespace["Plain"][int] is not None
    assert issubclass(namespace["Multi"], dict)
    assert namespace["Pair"] == tuple[int, int]
    kinds = {name: type(namespace[name]).__name__ for name in ("T", "K", "V", "P", "R", "A", "B")}
    assert kinds["P"] == "ParamSpec" and kinds["T"] == kinds["A"] == "TypeVar"


# JAX 0.12's forms: generic aliases (`jax/_src/numpy/lax_numpy.py`) and recursive ones
# (`jax/_src/pallas/core.py`), both lazily evaluated in 3.12.
PEP_695_ALIASES = textwrap.dedent(
    """
    from typing import Sequence, Mapping, Union

    type PadValueLike[T] = Union[T, Sequence[T], Sequence[Sequence[T]]]
    type PadValue[T] = tuple[tuple[T, T], ...]

    class Shape:
        pass

    type ShapeTree = (
        Sequence[Shape | ShapeTree | None]
        | Mapping[str, Shape | ShapeTree]
    )

    def pad(width: PadValue[int]) -> PadValueLike[int]:
        return width
    """
)


def test_generic_and_recursive_type_aliases_become_3_11_syntax():
    rewritten = probe.rewrite_type_params(PEP_695_ALIASES)
    namespace: dict = {}
    exec(compile(rewritten, "<probe>", "exec"), namespace)
    T = namespace["T"]
    assert type(T).__name__ == "TypeVar"
    assert namespace["PadValue"] == tuple[tuple[T, T], ...]
    assert namespace["PadValue"][int] == tuple[tuple[int, int], ...]  # still subscripts
    assert namespace["pad"](((1, 2),)) == ((1, 2),)
    # A recursive alias names itself: it stands for Any in 3.11.
    from typing import Any

    assert namespace["ShapeTree"] is Any


def test_fstrings_reusing_their_quote_become_3_11_fstrings():
    source = 'def f(has_abs):\n    return f"{".abs" if has_abs else ""}.NaN"\n'
    if sys.version_info < (3, 12):
        with pytest.raises(SyntaxError):
            compile(source, "<probe>", "exec")
    rewritten = probe.rewrite_fstrings(source)
    namespace: dict = {}
    exec(compile(rewritten, "<probe>", "exec"), namespace)
    assert namespace["f"](True) == ".abs.NaN" and namespace["f"](False) == ".NaN"


def test_code_that_compiles_is_left_alone():
    source = 'x = f"{1 + 1}"\ntype_ = 3\ndef g(type): return type\n'
    assert probe.rewrite_type_params(source) == source
    assert probe.rewrite_fstrings(source) == source


def _tiny_jax(root: Path) -> Path:
    package = root / "jax"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from jax.version import _version as __version__\n")
    (package / "version.py").write_text(
        '_version = "0.11.0"\n_release_version: str | None = None\n'
        "_minimum_jaxlib_version = '0.11.0'\n"
    )
    (package / "generic.py").write_text("def first[T](xs: list[T]) -> T:\n    return xs[0]\n")
    return package


@pytest.mark.parametrize("form", ["folder", "wheel", "sdist"])
def test_export_patch_and_backport(tmp_path, form):
    package = _tiny_jax(tmp_path / "src")
    if form == "folder":
        source = tmp_path / "src"
    elif form == "wheel":
        source = tmp_path / "jax-0.11.0-py3-none-any.whl"
        with zipfile.ZipFile(source, "w") as wheel:
            for file in package.iterdir():
                wheel.write(file, f"jax/{file.name}")
            wheel.writestr("jax-0.11.0.dist-info/METADATA", "Name: jax\n")
    else:
        source = tmp_path / "jax-0.11.0.tar.gz"
        with tarfile.open(source, "w:gz") as sdist:
            for file in package.iterdir():
                sdist.add(file, f"jax-0.11.0/jax/{file.name}")
            sdist.addfile(tarfile.TarInfo("jax-0.11.0/setup.py"), io.BytesIO(b""))
    into = tmp_path / "probe"
    probe.export_source(str(source), None, "", into)
    assert sorted(p.name for p in (into / "jax").iterdir()) == [
        "__init__.py",
        "generic.py",
        "version.py",
    ]
    probe.patch_version(into, "0.10.2", "0.11.0")
    version = (into / "jax" / "version.py").read_text()
    assert "_minimum_jaxlib_version = '0.10.2'" in version
    assert "_release_version: str | None = '0.11.0'" in version
    assert probe.source_version(into) == "0.11.0"
    rewritten, failing = probe.backport_syntax(into)
    if sys.version_info < (3, 12):
        assert rewritten == ["jax/generic.py"] and failing == []
    namespace: dict = {}
    exec((into / "jax" / "generic.py").read_text(), namespace)
    assert namespace["first"]([4, 5]) == 4


def test_the_environment_puts_the_probe_first(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    env = probe.probe_env(tmp_path)
    assert env["PYTHONPATH"].split(":") == [str(tmp_path), str(ROOT), "/elsewhere"]
    assert env["JAX_PLATFORMS"] == "cpu"
    assert set(probe.CORE_TESTS) <= {str(p.relative_to(ROOT)) for p in ROOT.glob("tests/test_*.py")}


def test_frames_of_jax_from_a_source_checkout_are_library_frames(monkeypatch):
    import types

    from pallaslab._src.base import sources

    # A JAX on PYTHONPATH (the probe, a developer's checkout) is no site-packages.
    checkout = types.ModuleType("jax")
    checkout.__file__ = "/home/dev/src/jax/jax/__init__.py"
    monkeypatch.setitem(sys.modules, "jax", checkout)
    assert sources.is_library_file("/home/dev/src/jax/jax/_src/state/primitives.py")
    assert not sources.is_library_file("/home/dev/src/kernels/matmul.py")
    assert sources.is_library_file("/usr/lib/python3/dist-packages/numpy/core.py")


def test_mosaic_gpu_ops_newer_than_the_jaxlib_are_registered_only_where_it_has_them(tmp_path):
    # jax 0.12 registers rules for dialect ops jaxlib 0.10 lacks (VectorConcatOp).
    folder = tmp_path / "jax" / "experimental" / "mosaic" / "gpu"
    folder.mkdir(parents=True)
    (folder / "dialect_lowering.py").write_text(
        "@_register_lowering(mgpu.VectorConcatOp)\ndef a(): ...\n"
        "@_register_lowering(mgpu.WGMMAOp, support_warp_semantics=True)\ndef b(): ...\n"
    )
    assert "jax/experimental/mosaic/gpu/dialect_lowering.py" in probe.apply_jaxlib_shims(tmp_path)
    text = (folder / "dialect_lowering.py").read_text()
    assert '@_register_lowering(getattr(mgpu, "VectorConcatOp", None))' in text
    assert (
        '@_register_lowering(getattr(mgpu, "WGMMAOp", None), support_warp_semantics=True)' in text
    )

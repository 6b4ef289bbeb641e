"""The code every reproducer script ends with, as text: load the operands, run or lower, compare.

It runs where pallaslab is not installed (JAX and NumPy only), so it is a template
here, not a module of ours; its checksum is `reproducer.checksum`'s, written again
for the script. `TPU_ANSWER` answers a kernel that asks which TPU it is on.
"""

# Kernels that ask which TPU they are on while traced (`pltpu.emit_pipeline`) get an
# answer off a TPU, as pallaslab gave them: JAX has no public way to name one.
TPU_ANSWER = """
# This kernel asks which TPU it is on while it is traced; on a machine without one,
# answer as a {kind!r} does (as pallaslab did). Private JAX: the lookups live in
# jax._src.tpu_info (newer JAX) or jax._src.pallas.mosaic.tpu_info.
if jax.default_backend() != "tpu":
    for _name in ("jax._src.tpu_info", "jax._src.pallas.mosaic.tpu_info"):
        try:
            _info = importlib.import_module(_name)
        except ImportError:
            continue
        if hasattr(_info, "get_device_kind"):
            _info.get_device_kind = lambda: {kind!r}
            _info.get_num_device_cores = lambda: {cores!r}
            if hasattr(getattr(_info, "get_tpu_info", None), "cache_clear"):
                _info.get_tpu_info.cache_clear()
""".strip("\n")


RUNNER = """
def _checksum(x):
    \"\"\"SHA-256 of the array's bytes (16 hex digits), as pallaslab computes it.\"\"\"
    return hashlib.sha256(np.ascontiguousarray(np.asarray(x)).tobytes()).hexdigest()[:16]


def _as_numbers(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _load_inputs():
    \"\"\"The operands: saved beside this file, else seeded random as pallaslab makes them.\"\"\"
    if SAVED:
        saved = Path(__file__).with_name(SAVED)
        if not saved.exists():
            sys.exit(f"{saved} is missing: it holds the operands this script runs on")
        with np.load(saved) as data:
            arrays = [data[f"input_{k}"] for k in range(len(INPUTS))]
            expected = [data[f"expected_{k}"] for k in range(len(EXPECTED))]
        # bfloat16 and other dtypes NumPy's .npz lacks are stored as their bits.
        arrays = [a.view(jnp.dtype(d)) for a, (_, _, d) in zip(arrays, INPUTS)]
        expected = [a.view(jnp.dtype(e["dtype"])) for a, e in zip(expected, EXPECTED)]
        return [jnp.asarray(a) for a in arrays], expected
    rng = np.random.default_rng(0)
    arrays = []
    for _, shape, dtype in INPUTS:
        dtype = jnp.dtype(dtype)
        if dtype.kind == "f" or dtype.name == "bfloat16":
            value = rng.standard_normal(shape, dtype=np.float32)
        elif dtype.kind in "iu":
            value = rng.integers(0, 4, shape)
        elif dtype.kind == "b":
            value = rng.random(shape) < 0.5
        else:
            value = rng.standard_normal(shape)
        arrays.append(jnp.asarray(value, dtype=dtype))
    return arrays, None


def _lower(args):
    \"\"\"Lowers the call for TARGET and prints the module (Pallas prints the kernel's IR).\"\"\"
    import contextlib

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    context = contextlib.ExitStack()
    if GPU_BACKEND is not None and hasattr(jax.config, "jax_pallas_use_mosaic_gpu"):
        jax.config.update("jax_pallas_use_mosaic_gpu", GPU_BACKEND == "mosaic_gpu")
    if TPU_CHIP is not None and hasattr(jax.sharding, "AbstractDevice"):
        # Lowering for a TPU on a machine without one: an abstract device names the chip.
        device = jax.sharding.AbstractDevice(
            device_kind=TPU_CHIP, num_cores=1, platform="tpu"
        )
        mesh = jax.sharding.AbstractMesh(
            (1,), ("_chip",), (jax.sharding.AxisType.Explicit,), abstract_device=device
        )
        context.enter_context(jax.sharding.use_abstract_mesh(mesh))
    print(f"# lowering for {TARGET} (platform {PLATFORM or jax.default_backend()})")
    with context:
        traced = jax.jit(kernel_call).trace(*specs)
        if PLATFORM:
            lowered = traced.lower(lowering_platforms=(PLATFORM,))
        else:
            lowered = traced.lower()
    if PRINT_MODULE:
        print(lowered.as_text())
    else:
        print(f"# lowered for {TARGET} without error: the kernel's IR is printed above")
    return 0


def _compare(name, got, want, entry):
    \"\"\"One line for an output: equal to pallaslab's bit for bit, close, or not.\"\"\"
    got = np.asarray(got)
    theirs = f"{entry['dtype']}{list(entry['shape'])}"
    if f"{got.dtype.name}{list(got.shape)}" != theirs:
        return f"{name}: {got.dtype.name}{list(got.shape)}, pallaslab's is {theirs}", False
    if _checksum(got) == entry["sha256"]:
        return f"{name}: equal to pallaslab's, bit for bit", True
    rtol, atol = TOLERANCES.get(entry["dtype"], (0.0, 0.0))
    a = _as_numbers(got)
    if want is not None:
        b = _as_numbers(want)
        scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 1.0
        bad = ~np.isclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True)
        if not bad.any():
            return f"{name}: within tolerance of pallaslab's (rtol {rtol:g})", True
        worst = float(np.nanmax(np.abs(a - b)[bad]))
        return f"{name}: DIFFERS at {int(bad.sum())} elements (max |diff| {worst:.6g})", False
    # Only pallaslab's checksum and sum are known: compare the sums.
    finite = a[np.isfinite(a)]
    slack = rtol * (abs(entry["sum"]) + 4 * entry["absmax"] * max(finite.size, 1) ** 0.5)
    if rtol and abs(finite.sum() - entry["sum"]) <= slack:
        return f"{name}: close to pallaslab's (sum {finite.sum():.6g}), not bit for bit", True
    return f"{name}: DIFFERS (checksum {_checksum(got)}, pallaslab's {entry['sha256']})", False


def _main():
    print(f"jax {jax.__version__} on {jax.default_backend()}: {len(INPUTS)} operand(s)")
    args, expected = _load_inputs()
    if TARGET is not None:
        return _lower(args)
    try:
        outputs = jax.tree_util.tree_leaves(jax.block_until_ready(kernel_call(*args)))
    except Exception as error:
        print(f"the kernel call failed: {type(error).__name__}: {error}", file=sys.stderr)
        if EXPECTED_ERROR:
            print(f"(pallaslab's run failed too: {EXPECTED_ERROR})", file=sys.stderr)
        raise
    ok = len(outputs) == len(EXPECTED)
    for k, out in enumerate(outputs):
        out = np.asarray(out)
        values = _as_numbers(out)
        total = complex(values[np.isfinite(values)].sum())
        total_text = f"{total.real:.9g}" if not total.imag else f"{total:.9g}"
        print(f"output {k}: {out.dtype.name}{list(out.shape)} sha256={_checksum(out)}"
              f" sum={total_text}")
        if k < len(EXPECTED):
            want = expected[k] if expected else None
            line, same = _compare(f"output {k}", out, want, EXPECTED[k])
            print("  " + line)
            ok = ok and same
    if EXPECTED_ERROR:
        print(f"pallaslab's run failed ({EXPECTED_ERROR}); this one did not")
        return 1
    print("reproduced pallaslab's result" if ok else "the result DIFFERS from pallaslab's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(_main())
""".strip()

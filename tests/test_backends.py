"""The backend oracle.check runs JAX on (oracle/backends.py) and the
tolerance model's account of its arithmetic (oracle/tolerances.py).

CI has no accelerator, so the arithmetic of one is simulated: an
`Arithmetic` describing the device (an NVIDIA A100, a V100, a TPU) and
JAX's results injected as numpy computes them after rounding the operands
to TF32 / bfloat16 mantissas (np.frexp and np.round / np.trunc, and
ml_dtypes' bfloat16, never the code under test). The oracle must accept
such a result where the backend is entitled to it (DEFAULT precision on a
device that rounds) and reject it where it is not (HIGHEST, or CPU)."""
import os
import pathlib

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import oracle  # noqa: E402
from oracle import backends, checker, properties, tolerances  # noqa: E402
from oracle.backends import Arithmetic  # noqa: E402

A100 = Arithmetic(platform="gpu", device_kind="NVIDIA A100-SXM4-40GB", compute_capability=8.0,
                  deterministic=False)
V100 = Arithmetic(platform="gpu", device_kind="Tesla V100-SXM2-16GB", compute_capability=7.0,
                  deterministic=False)
TPU = Arithmetic(platform="tpu", device_kind="TPU v4")
CPU = Arithmetic()


# --------------------------------------------------------------------------
# reduced precision written out in numpy

def round_mantissa(x, bits: int, truncate: bool = False) -> np.ndarray:
    """x (float32) with `bits` bits of precision (the implicit one
    included), to nearest-even or truncated: m * 2^e with m in [0.5, 1)."""
    m, e = np.frexp(np.asarray(x, np.float64))
    scaled = m * 2.0 ** bits
    return np.ldexp((np.trunc if truncate else np.round)(scaled) / 2.0 ** bits, e)


def tf32(x, truncate=False):
    return round_mantissa(x, 11, truncate)


def bf16(x):
    return np.asarray(np.asarray(x, np.float32).astype(ml_dtypes.bfloat16), np.float64)


def bf16_3x(x):
    hi = bf16(x)
    lo = bf16(np.asarray(x, np.float64) - hi)
    return hi, lo


def reduced_matmul(x, w, rounding):
    """x @ w with both operands rounded by `rounding`, summed in float64,
    the result in float32 (the accumulation's own float32 error is the
    program dtype's, modelled already)."""
    return (rounding(x) @ rounding(w)).astype(np.float32)


def verdict(prog, operands, got, arithmetic) -> bool:
    """Does the oracle's values comparison accept `got` (JAX's outputs) on
    a backend with this arithmetic?"""
    expected, reference, noise = properties.spec_numbers(prog, properties.NUMERIC["values"], operands, 0,
                                                         arithmetic)
    depth = properties._depth(prog)
    return all(tolerances.compare(g, e, r, np.asarray(e).dtype, depth, 1.0, n)[0]
               for g, e, r, n in zip(got, expected, reference, noise))


RNG = np.random.default_rng(7)
X = RNG.standard_normal((8, 64)).astype(np.float32)
W = RNG.standard_normal((64, 16)).astype(np.float32)


def matmul_program(precision=None):
    return oracle.trace_jax(lambda x, w: lax.dot(x, w, precision=precision), X, W)


# --------------------------------------------------------------------------
# the precision table

@pytest.mark.parametrize("arith, precision, config, want", [
    (CPU, None, None, None),
    (CPU, "DEFAULT", None, None),
    (A100, None, None, (2.0 ** -10,) * 2),
    (A100, ("HIGH", "HIGH"), None, (2.0 ** -10,) * 2),
    (A100, ("HIGHEST", "HIGHEST"), None, None),
    (A100, ("DEFAULT", "HIGHEST"), None, (2.0 ** -10, 0.0)),
    (A100, None, "float32", None),              # jax_default_matmul_precision='float32' is HIGHEST
    (A100, None, "tensorfloat32", (2.0 ** -10,) * 2),    # ... 'tensorfloat32' is HIGH
    (V100, None, None, None),                   # compute capability 7.0: no TF32
    (TPU, None, None, (2.0 ** -8,) * 2),
    (TPU, None, "bfloat16", (2.0 ** -8,) * 2),
    (TPU, ("HIGH", "HIGH"), None, (2.0 ** -15,) * 2),
    (TPU, ("HIGHEST", "HIGHEST"), None, None),
    (A100, "TF32_TF32_F32", None, None),        # an explicit preset: tolerances' own table
])
def test_operand_roundoff_of_float32_dots(arith, precision, config, want):
    a = Arithmetic(**{**arith.__dict__, "default_matmul_precision": config})
    assert a.operand_roundoff(precision, np.float32) == want


def test_only_float32_operands_are_rounded():
    assert A100.operand_roundoff(None, np.float64) is None
    assert TPU.operand_roundoff(None, ml_dtypes.bfloat16) is None


def test_nvidia_tf32_override_and_measurement():
    assert Arithmetic(**{**A100.__dict__, "tf32_disabled": True}).operand_roundoff(None, np.float32) is None
    # a device the table does not know, measured rounding to 11 bits
    rocm = Arithmetic(platform="rocm", measured=(("DEFAULT", 2.0 ** -11), ("HIGHEST", 0.0)))
    assert rocm.operand_roundoff(None, np.float32) == (2.0 ** -11,) * 2
    assert rocm.operand_roundoff(("HIGHEST", "HIGHEST"), np.float32) is None


# --------------------------------------------------------------------------
# measuring the rounding of a dot's operands

@pytest.mark.parametrize("rounding, want", [
    (lambda a: np.asarray(a, np.float64), 0.0),
    (tf32, 2.0 ** -11),
    (lambda a: tf32(a, truncate=True), 2.0 ** -10),
    (bf16, 2.0 ** -8),
    # a in [1, 2): |a - hi| <= 2^-8 (half of bf16's ulp 2^-7 there), so lo < 2^-8
    # has an ulp <= 2^-16, and a - hi - lo is at most half of it
    (lambda a: sum(bf16_3x(a)), 2.0 ** -17),
])
def test_roundoff_of_a_simulated_dot(rounding, want):
    def dot(a, eye):
        return rounding(a) @ eye, eye @ rounding(a)
    assert backends.power_of_two_above(backends.roundoff_of(dot)) == want


def test_cpu_dots_round_nothing():
    cpu = jax.devices("cpu")[0]
    for level in backends.LEVELS:
        assert backends.measure_operand_roundoff(cpu, level) == 0.0
    arith = backends.resolve("cpu").arithmetic
    assert arith.operand_roundoff(None, np.float32) is None and arith.deterministic


# --------------------------------------------------------------------------
# the tolerance accepts what the precision allows, and no more

@pytest.mark.parametrize("truncate", [False, True])
def test_tf32_matmul_passes_at_default_and_fails_at_highest(truncate):
    got = [reduced_matmul(X, W, lambda a: tf32(a, truncate))]
    assert verdict(matmul_program(), [X, W], got, A100)
    assert not verdict(matmul_program(lax.Precision.HIGHEST), [X, W], got, A100)
    assert not verdict(matmul_program(), [X, W], got, CPU)
    assert not verdict(matmul_program(), [X, W], got, V100)
    with jax.default_matmul_precision("float32"):     # traced under the config: HIGHEST in the jaxpr
        assert not verdict(matmul_program(), [X, W], got, A100)


def test_bf16_pass_passes_at_default_and_fails_at_high():
    got = [reduced_matmul(X, W, bf16)]
    assert verdict(matmul_program(), [X, W], got, TPU)
    assert not verdict(matmul_program(lax.Precision.HIGH), [X, W], got, TPU)
    assert not verdict(matmul_program(), [X, W], got, V100)       # float32 there


def test_bf16_3x_passes_at_high():
    """Three bf16 passes (TPU's HIGH) are within the HIGH model; at this
    size (K = 64) they are also within float32's accumulation noise, so
    no HIGHEST rejection is claimed."""
    def three_passes(x, w):
        (xh, xl), (wh, wl) = bf16_3x(x), bf16_3x(w)
        return (xh @ wh + xh @ wl + xl @ wh).astype(np.float32)
    got = [three_passes(X, W)]
    assert verdict(matmul_program(lax.Precision.HIGH), [X, W], got, TPU)


def test_tf32_error_propagates_through_a_network():
    """tanh(x @ w1) @ w2, each dot in TF32: the downstream dot's tolerance
    carries the first one's error."""
    w1 = (RNG.standard_normal((64, 32)) / 8).astype(np.float32)
    w2 = (RNG.standard_normal((32, 4)) / 4).astype(np.float32)
    prog = oracle.trace_jax(lambda x, a, b: jnp.tanh(x @ a) @ b, X, w1, w2)
    h = np.tanh(reduced_matmul(X, w1, tf32).astype(np.float64)).astype(np.float32)
    got = [reduced_matmul(h, w2, tf32)]
    assert verdict(prog, [X, w1, w2], got, A100)
    assert not verdict(prog, [X, w1, w2], got, CPU)


def test_a_wrong_answer_still_fails_under_tf32():
    got = [reduced_matmul(X, W, tf32) * np.float32(1.05)]     # 5% off: no rounding does that
    assert not verdict(matmul_program(), [X, W], got, A100)


def test_scatter_add_in_another_order_passes_where_reductions_are_nondeterministic():
    """x.at[i].add(u) with duplicate indices and cancelling updates: added
    in index order (the spec, XLA:CPU) 1e8 - 1e8 + 1 = 1, exact; in another
    order (atomics) 1e8 + 1 - 1e8 = 0 in float32."""
    x = np.zeros(2, np.float32)
    idx = np.array([0, 0, 0, 1])
    upd = np.array([1e8, -1e8, 1.0, 2.0], np.float32)
    prog = oracle.trace_jax(lambda x, u: x.at[idx].add(u), x, upd)
    other_order = (np.float32(1e8) + np.float32(1.0)) + np.float32(-1e8)
    assert other_order == 0.0        # the float32 fact the test rests on
    spec_value = properties.spec_numbers(prog, properties.NUMERIC["values"], [x, upd])[0][0]
    assert spec_value[0] == 1.0      # the spec adds in index order
    got = [np.array([other_order, 2.0], np.float32)]
    assert verdict(prog, [x, upd], got, A100)
    assert not verdict(prog, [x, upd], got, Arithmetic(**{**A100.__dict__, "deterministic": True}))
    assert not verdict(prog, [x, upd], got, CPU)
    assert not verdict(prog, [x, upd], [np.array([5e6, 2.0], np.float32)], A100)


def test_cpu_arithmetic_models_rounding_exactly_as_without_one():
    prog = oracle.trace_jax(lambda x, w: jnp.sum(jnp.tanh(x @ w) ** 2, axis=0), X, W)
    numbers = [properties.spec_numbers(prog, properties.NUMERIC["vjp"], [X, W, np.ones(16, np.float32)], 3, a)
               for a in (None, backends.resolve("cpu").arithmetic)]
    for a, b in zip(*numbers):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


# --------------------------------------------------------------------------
# the backend argument

def mlp(x, w):
    return jnp.sum(jnp.tanh(x @ w))


@pytest.mark.parametrize("name", ["gpu", "tpu", "no-such-backend"])
def test_a_backend_without_devices_is_refused_naming_what_is_available(name):
    if name in backends.available():
        pytest.skip(f"{name} has devices here")      # (CI has CPU only)
    with pytest.raises(oracle.InvalidArgument, match=r"available: .*'cpu'"):
        oracle.check(mlp, None, X, W, backend=name)


@pytest.mark.parametrize("junk", [3, "", ["cpu"]])
def test_a_backend_that_is_no_name_is_refused(junk):
    with pytest.raises(oracle.InvalidArgument, match="platform name"):
        oracle.check(mlp, None, X, W, backend=junk)


def test_the_default_backend_setting_is_validated(monkeypatch):
    monkeypatch.setattr(backends, "DEFAULT_BACKEND", "no-such-backend")
    with pytest.raises(oracle.InvalidArgument, match="no-such-backend"):
        oracle.check(mlp, None, X, W)


def test_cli_refuses_an_unknown_backend(capsys):
    from fuzz import cli
    assert cli.main(["fuzz", "--backend", "no-such-backend", "--examples", "0"]) == 2
    assert "available" in capsys.readouterr().err


def _numbers(report):
    return [(r.property, r.implementation, r.status, r.detail, r.max_abs, r.max_rel) for r in report.results]


def test_backend_cpu_gives_the_default_report():
    policy = jax.checkpoint_policies.dots_saveable
    default = oracle.check(mlp, policy, X, W)
    by_name = oracle.check(mlp, policy, X, W, backend="cpu")
    by_device = oracle.check(mlp, policy, X, W, backend=jax.devices("cpu")[0])
    assert _numbers(default) == _numbers(by_name) == _numbers(by_device)
    assert default.environment == by_name.environment == checker.environment()
    assert all(r.status == "ok" for r in default.results)


def test_the_report_names_a_rounding_backend():
    assert A100.summary() == {"f32_matmul": "DEFAULT:2^-10,HIGH:2^-10,HIGHEST:f32",
                              "reductions": "nondeterministic"}
    assert CPU.summary() == {}


# --------------------------------------------------------------------------
# memory kinds of offloading

def test_offload_kinds_are_the_devices():
    kinds = [m.kind for m in jax.devices()[0].addressable_memories()]
    assert backends.offload_kinds() == (jax.devices()[0].default_memory().kind, "pinned_host")
    assert "pinned_host" in kinds


def test_offloading_to_a_memory_the_device_lacks_is_unsupported():
    cpu = backends.resolve("cpu")
    no_host = backends.Backend("cpu", cpu.device, cpu.arithmetic, ("device",), "device")
    policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")
    case = checker.make_case(mlp, policy, (X, W), {}, backend=no_host)
    with pytest.raises(oracle.Unsupported, match=r"'pinned_host'.*memory kinds: \['device'\]"):
        checker._check_memory_kinds(case)
    checker._check_memory_kinds(checker.make_case(mlp, policy, (X, W), {}, backend=cpu))   # CPU has it


def test_offloading_on_a_device_that_tells_no_memory_kinds_is_unsupported():
    # jax 0.4.25's CPU device: default_memory() raises UNIMPLEMENTED, and
    # device_put to a memory kind raises NotImplementedError
    cpu = backends.resolve("cpu")
    no_memories = backends.Backend("cpu", cpu.device, cpu.arithmetic, (), None)
    policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")
    case = checker.make_case(mlp, policy, (X, W), {}, backend=no_memories)
    with pytest.raises(oracle.Unsupported, match=r"'pinned_host'.*memory kinds: none"):
        checker._check_memory_kinds(case)
    checker._check_memory_kinds(checker.make_case(mlp, None, (X, W), {}, backend=no_memories))  # no offload


MESH_SCRIPT = '''
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import oracle
s = NamedSharding(Mesh(np.array(jax.devices()[:2]), ("x",)), P("x"))
def f(x):
    return jnp.sum(jnp.sin(jax.lax.with_sharding_constraint(jnp.sin(x), s)))
report = oracle.check(f, None, jax.device_put(np.ones((4, 2), np.float32), s), implementations=("remat2",))
print(sorted({r.status for r in report.results}))
'''


def test_a_program_constraining_to_a_mesh_of_two_devices_runs_there():
    """jax's memories_test on a 2-device CPU: a sharding constraint over a
    mesh of two devices. The operands are not committed to the backend's
    one device (jit: "incompatible devices", every compiled property a
    false alarm); jit places them. A subprocess: the device count is fixed
    when jax starts."""
    import subprocess
    import sys
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", MESH_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300, cwd=str(pathlib.Path(__file__).resolve().parents[1]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "['ok']", proc.stdout

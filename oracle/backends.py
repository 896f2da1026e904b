"""The backend `oracle.check` runs JAX on, and what its arithmetic does.

    backend = resolve("gpu")    # None (the default), a platform name, or a jax.Device
    backend.device              # the device JAX runs on (jax.default_device + device_put)
    backend.arithmetic          # plain data for oracle.tolerances: see Arithmetic
    backend.memory_kinds        # the device's memories (device.addressable_memories())

The spec always computes exactly, in numpy; only JAX moves. What moves with
it is the rounding of float32 matrix products and convolutions, which
accelerators do in narrower formats unless asked not to (JAX's
lax.Precision docstring, jax/_src/lax/lax.py:2129-2150 in jax 0.10.2):

  platform  DEFAULT                 HIGH                    HIGHEST
  cpu       float32                 float32                 float32   ("no impact on CPU")
  gpu       TF32 where the device   TF32 where available    float32
            has it (NVIDIA compute
            capability >= 8.0)
  tpu       one bfloat16 pass       three bfloat16 passes   six bfloat16 passes (~float32)

An equation's level is its own `precision` param (lax.canonicalize_precision
already put jax_default_matmul_precision there when the op had none,
lax.py:9555-9565); a None param is read from that config at check time and
is DEFAULT when the config is unset too. The operand roundoff each level
costs (`Arithmetic.operand_roundoff`) is the larger of the table's
prediction and a measurement on the device (`measure_operand_roundoff`:
a float32 matrix times the identity at that precision, compared with the
matrix: the product of exact operands is the rounded operand), so that a
device the table does not know, NVIDIA_TF32_OVERRIDE=0, or an XLA flag
are read from what the device does rather than assumed.

Reduction order: XLA:CPU and TPU add in a fixed order; XLA:GPU may add
with atomics (scatter-add, some reductions), in an order that changes from
run to run, unless XLA_FLAGS has --xla_gpu_deterministic_ops=true
(`Arithmetic.deterministic`). How oracle.tolerances turns these into error
bounds is written there, once.

Memory kinds: an offload policy moves residuals to 'pinned_host' (the only
kind JAX 0.10.2 maps to host memory: jax/_src/core.py:1862,
mem_kind_to_space; any other kind is device memory), from the device's
default memory. `offload_kinds()` gives that (src, dst) pair for a device
that has both, and `check_memory_kinds` refuses a program whose residuals
go to a memory the device does not address.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oracle.errors import InvalidArgument, Unsupported
from oracle.jax_api import internals
from spec.prims_structural import canonicalize_precision

ENV = "REMAT_ORACLE_BACKEND"
# the backend oracle.check uses when given none: pytest --oracle-backend and
# remat-oracle fuzz --backend set it (the latter through the environment, so
# that spawned workers inherit it); None is JAX's default device
DEFAULT_BACKEND: str | None = os.environ.get(ENV) or None

LEVELS = ("DEFAULT", "HIGH", "HIGHEST")
# relative error of rounding one float32 operand (a unit roundoff; eps for
# formats that hardware may truncate to rather than round)
TF32_ROUNDOFF = 2.0 ** -10      # 10 stored mantissa bits: 2^-11 rounded to nearest, 2^-10 truncated
BF16_ROUNDOFF = 2.0 ** -8       # 7 stored bits: round to nearest (TPU's conversion)
BF16_3X_ROUNDOFF = 2.0 ** -15   # a = hi + lo (bf16 each): |a - hi - lo| <= 2^-16|a|, lo*lo dropped
F32_ROUNDOFF = 2.0 ** -24


def _precision_pair(precision, default_matmul_precision):
    """The (lhs, rhs) lax.Precision names an equation runs at, or a preset
    name: its param, else the config's (spec.canonicalize_precision reads
    the same aliases as lax.canonicalize_precision), else DEFAULT."""
    if precision is None:
        precision = canonicalize_precision(default_matmul_precision)
    if precision is None or precision == "DEFAULT":
        return ("DEFAULT", "DEFAULT")
    return precision


@dataclass(frozen=True)
class Arithmetic:
    """What a backend's float arithmetic does, as plain data (no jax), so a
    test can describe a device it does not have."""
    platform: str = "cpu"                         # jax's platform name: cpu, gpu, tpu, ...
    device_kind: str = ""
    compute_capability: float | None = None       # NVIDIA devices
    default_matmul_precision: str | None = None   # jax_default_matmul_precision at check time
    tf32_disabled: bool = False                   # NVIDIA_TF32_OVERRIDE=0
    deterministic: bool = True                    # reductions add in one order, every run
    measured: tuple = ()                          # ((level, operand roundoff), ...) on the device

    def predicted_roundoff(self, level: str) -> float:
        """The table above: the operand roundoff of a float32 dot at `level`
        (0.0: float32 itself, nothing beyond the program's dtype)."""
        if self.platform in ("gpu", "cuda") and level in ("DEFAULT", "HIGH"):
            tf32 = self.compute_capability is not None and self.compute_capability >= 8.0
            return TF32_ROUNDOFF if tf32 and not self.tf32_disabled else 0.0
        if self.platform == "tpu":
            return {"DEFAULT": BF16_ROUNDOFF, "HIGH": BF16_3X_ROUNDOFF}.get(level, 0.0)
        return 0.0

    def level_roundoff(self, level: str) -> float:
        measured = dict(self.measured).get(level, 0.0)
        return max(self.predicted_roundoff(level), measured if measured > F32_ROUNDOFF else 0.0)

    def operand_roundoff(self, precision, dtype) -> tuple[float, float] | None:
        """(lhs, rhs) relative rounding of the operands of a dot_general or
        conv_general_dilated with this `precision` param, in a program of
        `dtype`, where narrower than the dtype; None where the operands are
        used as they are. Only float32 operands are rounded (lax.py:2135:
        'This only has an effect on float32 computations'); explicit
        algorithm presets are modelled by oracle.tolerances itself."""
        if np.dtype(dtype) != np.float32:
            return None
        pair = _precision_pair(precision, self.default_matmul_precision)
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(p in LEVELS for p in pair)):
            return None
        roundoffs = tuple(self.level_roundoff(p) for p in pair)
        return roundoffs if any(roundoffs) else None

    def summary(self) -> dict:
        """What a report shows of it: nothing where it is float32 throughout
        and deterministic (as on CPU), else the rounding of each level."""
        out = {}
        reduced = {lv: self.level_roundoff(lv) for lv in LEVELS}
        if any(reduced.values()):
            out["f32_matmul"] = ",".join(f"{lv}:2^{int(np.log2(u))}" if u else f"{lv}:f32"
                                         for lv, u in reduced.items())
        if not self.deterministic:
            out["reductions"] = "nondeterministic"
        return out


@dataclass(frozen=True)
class Backend:
    """The device JAX runs on and what its arithmetic does."""
    platform: str
    device: Any
    arithmetic: Arithmetic
    memory_kinds: tuple = ()
    default_memory_kind: str | None = None
    environment: dict = field(default_factory=dict)   # added to a Report's environment

    @property
    def lowering_platform(self) -> str:
        """The platform name JAX lowers for (what lax.platform_dependent's
        platform_index reads): 'cuda' or 'rocm' for a 'gpu' device."""
        if self.platform != "gpu":
            return self.platform
        version = str(getattr(getattr(self.device, "client", None), "platform_version", "")).lower()
        return "rocm" if "rocm" in version else "cuda"


# --------------------------------------------------------------------------
# resolving a name to a device

def available() -> dict:
    """platform -> its devices, for every backend JAX initialised here."""
    out = {}
    for name in internals.backends():
        try:
            import jax
            out[name] = jax.devices(name)
        except RuntimeError:
            continue
    return out


def _describe_available() -> str:
    return ", ".join(f"{name!r} ({len(devs)} x {devs[0].device_kind})" for name, devs in available().items())


def _device_of(backend):
    """The device for None, a platform name or a jax Device; InvalidArgument
    naming what is available when there is none."""
    import jax
    if backend is None:
        backend = DEFAULT_BACKEND
    if backend is None:
        configured = jax.config.jax_default_device
        return configured if configured is not None and not isinstance(configured, str) else (
            jax.devices(configured)[0] if isinstance(configured, str) else jax.devices()[0])
    if hasattr(backend, "platform") and hasattr(backend, "addressable_memories"):
        return backend
    if not isinstance(backend, str) or not backend:
        raise InvalidArgument(f"oracle.check: backend= takes a platform name ('cpu', 'gpu', 'tpu', ...) "
                              f"or a jax.Device, got {backend!r}; available: {_describe_available()}")
    try:
        devices = jax.devices(backend)
    except RuntimeError as e:
        raise InvalidArgument(f"oracle.check: backend {backend!r} has no devices here "
                              f"({str(e).splitlines()[0]}); available: {_describe_available()}") from None
    if not devices:
        raise InvalidArgument(f"oracle.check: backend {backend!r} has no devices here; "
                              f"available: {_describe_available()}")
    return devices[0]


def resolve(backend=None) -> Backend:
    """The Backend for oracle.check's backend= argument."""
    device = _device_of(backend)
    return _backend_of(device)


def _deterministic(platform: str) -> bool:
    if platform == "cpu" or platform == "tpu":
        return True
    flags = os.environ.get("XLA_FLAGS", "")
    return "--xla_gpu_deterministic_ops=true" in flags or "--xla_gpu_exclude_nondeterministic_ops=true" in flags


def _compute_capability(device) -> float | None:
    cc = getattr(device, "compute_capability", None)
    try:
        return float(cc) if cc is not None else None
    except (TypeError, ValueError):
        return None


def _backend_of(device) -> Backend:
    import jax
    platform = device.platform
    measured = tuple((lv, measure_operand_roundoff(device, lv)) for lv in LEVELS)
    arithmetic = Arithmetic(platform=platform, device_kind=device.device_kind,
                            compute_capability=_compute_capability(device),
                            default_matmul_precision=jax.config.jax_default_matmul_precision,
                            tf32_disabled=os.environ.get("NVIDIA_TF32_OVERRIDE") == "0",
                            deterministic=_deterministic(platform), measured=measured)
    kinds, default_kind = memory_kinds(device)
    env = {"backend": platform}
    if platform != "cpu":
        env["device"] = device.device_kind
    env.update(arithmetic.summary())
    return Backend(platform, device, arithmetic, kinds, default_kind, env)


def memory_kinds(device) -> tuple[tuple, str | None]:
    """(the kinds of the memories `device` addresses, its default one);
    ((), None) on a release without memories."""
    try:
        kinds = tuple(m.kind for m in device.addressable_memories())
        return kinds, device.default_memory().kind
    except (AttributeError, RuntimeError, NotImplementedError):
        return (), None


# --------------------------------------------------------------------------
# measuring what a dot does to its operands

def roundoff_of(dot, n: int = 128, seed: int = 0) -> float:
    """The largest relative change `dot(a, b) -> (a @ I, I @ a)` makes to a
    float32 matrix a with full 24-bit mantissas (values in [1, 2)): the
    identity and the accumulation of one nonzero term are exact in every
    format, so what changes is the operand's rounding, on each side."""
    a = (1 + np.random.default_rng(seed).random((n, n))).astype(np.float32)
    eye = np.eye(n, dtype=np.float32)
    left, right = (np.asarray(x, np.float64) for x in dot(a, eye))
    a64 = a.astype(np.float64)
    return float(max(np.max(np.abs(left - a64) / a64), np.max(np.abs(right - a64) / a64)))


def power_of_two_above(u: float) -> float:
    """The smallest power of two >= u (0.0 for 0): a measured maximum
    rounding error, as a unit roundoff."""
    return 0.0 if u <= 0 else float(2.0 ** np.ceil(np.log2(u)))


@functools.lru_cache(maxsize=64)
def _measure(device, level: str, config: str | None) -> float:
    import jax
    from jax import lax
    precision = getattr(lax.Precision, level)      # (not subscriptable before jax 0.4.3x)

    def dot(a, eye):
        a, eye = jax.device_put((a, eye), device)
        both = jax.jit(lambda x, i: (lax.dot(x, i, precision=precision), lax.dot(i, x, precision=precision)))
        return jax.device_get(both(a, eye))
    return power_of_two_above(roundoff_of(dot))


def measure_operand_roundoff(device, level: str) -> float:
    """The operand roundoff a float32 dot at lax.Precision `level` has on
    `device`, measured once per process (0.0 where exact)."""
    import jax
    return _measure(device, level, jax.config.jax_default_matmul_precision)


# --------------------------------------------------------------------------
# memory kinds of offload policies

def offload_kinds(backend=None) -> tuple[str, str] | None:
    """(src, dst) memory kinds for offloading residuals to host memory on
    the backend's device: its default memory and 'pinned_host' (the kind
    JAX maps to host memory); None where it has no pinned host memory."""
    kinds, default_kind = memory_kinds(_device_of(backend))
    if "pinned_host" not in kinds or default_kind is None:
        return None
    return default_kind, "pinned_host"


def check_memory_kinds(backend: Backend, spaces) -> None:
    """Unsupported when residuals go to a memory space (a kind other than
    device memory) that the backend's device does not address (none, where
    the device tells no memory kinds: a release without memories)."""
    missing = sorted({s for s in spaces if s is not None and s not in backend.memory_kinds})
    if missing:
        raise Unsupported(f"the checkpoint policy offloads residuals to memory kind {missing[0]!r}, which "
                          f"device {backend.device} ({backend.platform}) does not address; its memory kinds: "
                          f"{list(backend.memory_kinds) or 'none it can tell (the release cannot offload there)'}")

"""Release-specific source text: what the emitter table (oracle/jax_names.py,
written in jax 0.10.2's spelling) needs on the installed release, embedded
in reproducers after the table. Empty on a release that spells every call
as 0.10.2 does."""
from __future__ import annotations

from oracle.jax_api.capabilities import capabilities

_SPELLED = '''
class _Spelled:
    """A module (or primitive) with some attributes in this release's spelling."""
    def __init__(self, base, **spelled):
        self._base, self._spelled = base, spelled

    def __getattr__(self, name):
        return self._spelled[name] if name in self._spelled else getattr(self._base, name)
'''

_UNSUPPORTED = '''
try:
    _Unsupported        # oracle.Unsupported where the oracle runs this table
except NameError:
    _Unsupported = NotImplementedError
'''

_WITHOUT_ACCURACY = '''
def _without_accuracy(fn):
    """fn(x) of a release whose lax.{fn} takes no accuracy= (before jax 0.6)."""
    def call(x, accuracy=None):
        if accuracy is not None:
            raise _Unsupported(f'jax {jax.__version__}: lax.{fn.__name__} takes no accuracy=')
        return fn(x)
    return call
'''

_LAST_AXIS_TOP_K = '''
def _last_axis_top_k(fn):
    """lax.top_k of a release whose top_k works on the last axis only (before jax 0.7)."""
    def call(x, k, axis=-1):
        if axis not in (-1, jnp.ndim(x) - 1):
            raise _Unsupported(f'jax {jax.__version__}: lax.top_k works on the last axis only, not axis={axis}')
        return fn(x, k)
    return call
'''


def emitter_prelude() -> str:
    """Source rebinding `lax` / `lax_internal` so that the emitter table's
    calls mean the same on this release ("" where nothing differs)."""
    from jax import lax
    caps = capabilities()
    accuracy = sorted(n for n in ("sin", "cos", "tan", "tanh", "exp", "exp2", "expm1", "log", "log1p",
                                  "logistic", "sqrt", "rsqrt", "cbrt")
                      if n not in caps.accuracy_ops and hasattr(lax, n))
    internal = [f"{n}=lax_internal._{n}" for n in sorted(caps.private_reductions)]
    if not caps.convert_sharding:      # convert_element_type without a sharding param (0.4.25)
        internal.append("convert_element_type_p=_Spelled(_convert_p, bind=lambda x, sharding=None, **p: "
                        "_convert_p.bind(x, **p))")
    spelled = [f"{n}=_without_accuracy(lax.{n})" for n in accuracy]
    if not caps.top_k_axis:
        spelled.append("top_k=_last_axis_top_k(lax.top_k)")
    if not (spelled or internal):
        return ""
    text = f"\n# jax {caps.version} spells some of these calls differently (oracle/jax_api/source.py)\n"
    text += _SPELLED + _UNSUPPORTED
    if accuracy:
        text += _WITHOUT_ACCURACY
    if not caps.top_k_axis:
        text += _LAST_AXIS_TOP_K
    if spelled:
        text += "lax = _Spelled(lax, " + ", ".join(spelled) + ")\n"
    if not caps.convert_sharding:
        text += "_convert_p = lax_internal.convert_element_type_p\n"
    if internal:
        text += "lax_internal = _Spelled(lax_internal, " + ", ".join(internal) + ")\n"
    return text


def helper_source(name: str) -> str:
    """A reproducer helper in this release's spelling: `cond_params(n)`, the
    params a cond equation needs beyond `branches` (`linear` before 0.4.3x),
    and `wrap_init(fun, args)`, lu.wrap_init with the debug info 0.5+ requires."""
    caps = capabilities()
    if name == "cond_params":
        body = ("{'linear': (False,) * n_operands}" if "linear" in caps.cond_params else "{}")
        return (f"def cond_params(n_operands):\n    \"\"\"The params jax {caps.version}'s cond takes "
                f"beyond branches.\"\"\"\n    return {body}")
    if name == "wrap_init":
        call = ("lu.wrap_init(fun, debug_info=api_util.debug_info('custom_vjp bwd', fun, args, {}))"
                if caps.wrap_init_debug_info else "lu.wrap_init(fun)")
        return (f"def wrap_init(fun, args):\n    \"\"\"lu.wrap_init as jax {caps.version} spells it.\"\"\"\n"
                f"    from jax._src import api_util, linear_util as lu\n    return {call}")
    raise KeyError(name)


# modules JAX moved: (0.10.2's path, where earlier releases have it)
_MODULE_MOVES = (("jax._src.random.threefry2x32", "jax._src.prng"),)   # random became a package in 0.7


def _resolves(path: str) -> bool:
    import importlib
    try:
        importlib.import_module(path)
        return True
    except ImportError:
        return False


def emitter_table_source(table: str) -> str:
    """The emitter table (written in 0.10.2's spelling) as this release
    runs it: moved modules at their older path, then emitter_prelude()."""
    for new, old in _MODULE_MOVES:
        if not _resolves(new) and _resolves(old):
            table = table.replace(new + ".", old + ".")
    return table + emitter_prelude()

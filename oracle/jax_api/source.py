"""Source text that reproducers embed after the emitter table (which is
written in jax 0.10.2's spelling) so that they run on every release from
0.4.25 to 0.10.2: it probes the running release (hasattr, signatures, a
traced equation) and rebinds `lax` / `lax_internal` where the release
spells a call differently. It is a no-op on 0.10.2. The oracle runs the
table with the same text (oracle/jax_names.py emitters)."""
from __future__ import annotations

EMITTER_PRELUDE = '''
# -- the calls above as the running release spells them (0.4.25 .. 0.10.2; oracle/jax_api/source.py)
import inspect as _inspect


class _Spelled:
    """A module (or primitive) with some attributes in this release's spelling."""
    def __init__(self, base, **spelled):
        self._base, self._spelled = base, spelled

    def __getattr__(self, name):
        return self._spelled[name] if name in self._spelled else getattr(self._base, name)


try:
    _Unsupported        # oracle.Unsupported where the oracle runs this table
except NameError:
    _Unsupported = NotImplementedError


def _takes(fn, param):
    return param in _inspect.signature(fn).parameters


def _without_accuracy(fn):
    """fn(x) of a release whose lax.{fn} takes no accuracy= (before jax 0.6)."""
    def call(x, accuracy=None):
        if accuracy is not None:
            raise _Unsupported(f'jax {jax.__version__}: lax.{fn.__name__} takes no accuracy=')
        return fn(x)
    return call


def _last_axis_top_k(fn):
    """lax.top_k of a release whose top_k works on the last axis only (before jax 0.7)."""
    def call(x, k, axis=-1):
        if axis not in (-1, jnp.ndim(x) - 1):
            raise _Unsupported(f'jax {jax.__version__}: lax.top_k works on the last axis only, not axis={axis}')
        return fn(x, k)
    return call


def _binding_without(prim, *names):
    """prim, its bind() dropping params this release's primitive lacks."""
    return _Spelled(prim, bind=lambda *xs, **p: prim.bind(*xs, **{k: v for k, v in p.items() if k not in names}))


def _one(result):
    """One array: psum_p, pmax_p and pmin_p bind with multiple_results (a
    list) in old releases (0.4.25)."""
    return result[0] if isinstance(result, (list, tuple)) else result


def _without_batching_dims(cls):
    """lax.{Gather,Scatter}DimensionNumbers of a release without batching
    dims (before jax 0.4.31): the three fields, where none is batched."""
    def make(*dims):
        if any(dims[3:]):
            raise _Unsupported(f'jax {jax.__version__}: {cls.__name__} takes no batching dims')
        return cls(*dims[:3])
    return make


def _traced_params(fn, name):
    """The params of the `name` equation fn binds on this release (traced
    on a 2x2 matrix)."""
    return next(e.params for e in jax.make_jaxpr(fn)(np.eye(2, dtype=np.float32)).eqns if e.primitive.name == name)


def _linalg_spelled():
    """lax.linalg, its decompositions binding without the params (all at
    their defaults in the emitters) this release's primitive lacks: eigh's
    algorithm (before jax 0.7), svd's (before 0.4.3x), qr's pivoting and
    use_magma (before 0.5). Some releases' abstract evaluation accepts them
    and the lowering does not (eigh on 0.6.2)."""
    lacking = {f'{name}_p': [p for p in params if p not in _traced_params(fn, name)] for name, fn, params in (
        ('eigh', lax.linalg.eigh, ('subset_by_index', 'algorithm')),
        ('svd', lax.linalg.svd, ('subset_by_index', 'algorithm')),
        ('qr', lax.linalg.qr, ('pivoting', 'use_magma')))}
    spelled = {prim: _binding_without(getattr(lax.linalg, prim), *names) for prim, names in lacking.items() if names}
    if _old_diagonal_jvps():
        spelled.update({prim: _Spelled(spelled.get(prim, getattr(lax.linalg, prim)), bind=_unmodelled_jvp(prim))
                        for prim in ('eigh_p', 'svd_p')})
    return _Spelled(lax.linalg, **spelled)


def _old_diagonal_jvps():
    """eigh's and svd's JVP rules are the ones before jax 0.4.36, which read
    the diagonal with jnp.diagonal (a jitted function) and build eye and
    diag with jnp: the spec models 0.4.36's rules (_extract_diagonal)."""
    jaxpr = jax.make_jaxpr(lambda x: jax.jvp(lambda y: lax.linalg.eigh(y)[1], (x,), (x,)))(np.eye(2, dtype=np.float32))
    return any(e.primitive.name == 'pjit' and e.params.get('name') == 'diagonal' for e in jaxpr.eqns)


def _unmodelled_jvp(prim):
    def bind(*xs, **params):
        raise _Unsupported(f'jax {jax.__version__}: the JVP rule of {prim[:-2]} (before jax 0.4.36: jnp.diagonal, '
                           'jnp.eye) is not modelled; the spec has the rule of 0.4.36 on')
    return bind


debugging = _Spelled(debugging, **({} if _takes(debugging.debug_callback_impl, 'partitioned') else   # jax 0.6 on
                                   {'debug_callback_p': _binding_without(debugging.debug_callback_p, 'partitioned')}))
_convert_params = jax.make_jaxpr(lambda x: lax.convert_element_type(x, np.int32))(np.float32(0)).eqns[0].params
lax = _Spelled(lax, **{n: _without_accuracy(getattr(lax, n)) for n in (
    'sin', 'cos', 'tan', 'tanh', 'exp', 'exp2', 'expm1', 'log', 'log1p', 'logistic', 'sqrt', 'rsqrt', 'cbrt')
    if not _takes(getattr(lax, n), 'accuracy')},
    **({} if _takes(lax.top_k, 'axis') else {'top_k': _last_axis_top_k(lax.top_k)}),
    **{n: getattr(lax_internal, '_' + n) for n in ('reduce_and', 'reduce_or')
       if not hasattr(lax, n)},                            # private before jax 0.4.3x
    **{n: _without_batching_dims(getattr(lax, n)) for n in ('GatherDimensionNumbers', 'ScatterDimensionNumbers')
       if len(getattr(lax, n)._fields) == 3},
    **({} if hasattr(lax, 'optimization_barrier') else     # public from jax 0.4.3x
       {'optimization_barrier': __import__('jax._src.ad_checkpoint', fromlist=['_'])._optimization_barrier}),
    **({} if hasattr(lax, 'FftType') else                  # xla_client's enum before jax 0.4.3x
       {'FftType': __import__('jax._src.lib', fromlist=['_']).xla_client.FftType}),
    linalg=_linalg_spelled())
lax_internal = _Spelled(lax_internal, **{n: getattr(lax_internal, '_' + n) for n in (
    'reduce_sum', 'reduce_max', 'reduce_min', 'reduce_prod', 'reduce_and', 'reduce_or')
    if not hasattr(lax_internal, n)},     # private (_reduce_sum, ...) before jax 0.6
    **({} if 'sharding' in _convert_params else     # no sharding param before jax 0.4.3x
       {'convert_element_type_p': _binding_without(lax_internal.convert_element_type_p, 'sharding')}))
'''


def emitter_table_source(table: str) -> str:
    """The emitter table followed by the prelude that makes it mean the same
    on the running release."""
    return table + EMITTER_PRELUDE


HELPERS = {
    "cond_params": '''
def cond_params(n_operands):
    """The params this release's cond equation takes beyond branches (`linear` before 0.4.3x)."""
    closed = jax.make_jaxpr(lambda p, x: jax.lax.cond(p, lambda y: y, lambda y: y, x))(True, 0.0)
    has_linear = 'linear' in closed.eqns[-1].params
    return {'linear': (False,) * n_operands} if has_linear else {}
''',
    "scan_params": '''
def scan_params(n_operands):
    """The params this release's scan equation takes beyond the spec's (`linear`, `_split_transpose`)."""
    closed = jax.make_jaxpr(lambda x: jax.lax.scan(lambda c, y: (c + y, c), x[0], x))(np.zeros(2, np.float32))
    have = closed.eqns[-1].params
    return {**({'linear': (False,) * n_operands} if 'linear' in have else {}),
            **({'_split_transpose': False} if '_split_transpose' in have else {})}
''',
    "wrap_init": '''
def wrap_init(fun, args):
    """lu.wrap_init(fun), with the debug info jax 0.5+ requires."""
    import inspect
    from jax._src import api_util, linear_util as lu
    if 'debug_info' in inspect.signature(lu.wrap_init).parameters:
        return lu.wrap_init(fun, debug_info=api_util.debug_info('custom_vjp bwd', fun, args, {}))
    return lu.wrap_init(fun)
''',
}


def helper_source(name: str) -> str:
    """A reproducer helper that probes the running release: `cond_params`,
    `scan_params`, `wrap_init`."""
    return HELPERS[name].strip("\n")

"""What oracle.check costs on the real models of tests/models, against what
JAX itself spends on them.

    python benchmarks/bench_models.py [MODEL ...] [--policies none,names,...]

For each model and policy it times, in one process, after
jax.clear_caches():

  oracle.check   oracle.check(loss, policy, *args): remat2 and remat3, every
                 property (tracing, the spec, XLA compilations, runs)
  jit(grad)      jax.jit(jax.grad(jax.checkpoint(loss, policy=policy)))(*args):
                 one compilation and one run of the plain training gradient

and prints a table model x policy with both times and their ratio. A model
the spec cannot check yet shows the primitive it stops at (its check
raises oracle.Unsupported at once); a Mismatch is shown as such.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))   # the tests/models package
sys.path.insert(0, os.path.join(HERE, ".."))


def time_oracle(case, policy):
    import jax
    import oracle
    from models.blockers import stops_at
    jax.clear_caches()
    t0 = time.perf_counter()
    try:
        report = oracle.check(case.loss, policy, *case.args, **case.kwargs)
    except oracle.Unsupported as e:
        return time.perf_counter() - t0, f"Unsupported: {stops_at(str(e))}"
    except oracle.Mismatch as e:
        return time.perf_counter() - t0, f"MISMATCH: {str(e).splitlines()[0]}"
    statuses = sorted({r.status for r in report.results})
    return time.perf_counter() - t0, "/".join(statuses)


def time_jit_grad(case, policy):
    import jax
    jax.clear_caches()
    out = jax.eval_shape(case.loss, *case.args, **case.kwargs)
    has_aux = isinstance(out, tuple)
    loss = jax.checkpoint(case.loss, policy=policy) if policy is not None else jax.checkpoint(case.loss)
    grad = jax.jit(jax.grad(loss, has_aux=has_aux))
    t0 = time.perf_counter()
    jax.block_until_ready(grad(*case.args, **case.kwargs))
    return time.perf_counter() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="models to time (default: all)")
    parser.add_argument("--policies", default=None, help="comma-separated policy names (default: all)")
    args = parser.parse_args(argv)
    import jax
    from models import zoo
    models = zoo.load_all()
    names = args.models or list(models)
    policies = args.policies.split(",") if args.policies else list(zoo.POLICIES)
    print(f"jax {jax.__version__}, {os.cpu_count()} CPUs, backend {jax.default_backend()}")
    header = f"{'model':22} {'policy':34} {'oracle.check':>12} {'jit(grad)':>10} {'ratio':>6}  outcome"
    print(header)
    print("-" * len(header))
    total_o = total_g = 0.0
    for name in names:
        m = models[name]
        case = m.build()
        for pn in policies:
            policy = zoo.policy(pn, m)
            to, outcome = time_oracle(case, policy)
            tg = time_jit_grad(case, policy)
            total_o += to
            total_g += tg
            print(f"{name:22} {pn:34} {to:11.2f}s {tg:9.2f}s {to / tg:6.1f}  {outcome}", flush=True)
    print("-" * len(header))
    print(f"{'total':57} {total_o:11.2f}s {total_g:9.2f}s {total_o / max(total_g, 1e-9):6.1f}")


if __name__ == "__main__":
    main()

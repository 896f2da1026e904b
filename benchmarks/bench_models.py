"""What oracle.check costs on the real models of tests/models, against what
JAX itself spends on them.

    python benchmarks/bench_models.py [MODEL ...] [--policies none,names,...]

For each model and policy it times, in one process, after
jax.clear_caches():

  oracle.check   oracle.check(loss, policy, *args): remat2 and remat3, every
                 property (tracing, the spec, XLA compilations, runs)
  jit(grad)      jax.jit(jax.grad(jax.checkpoint(loss, policy=policy)))(*args):
                 one compilation and one run of the plain training gradient

and prints a table model x policy with both times (wall clock, and the
process's CPU time: on a shared machine the wall clock measures the load)
and the ratio of the wall times, and the outcome: the statuses, with the
known divergences by name. A model
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
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        report = oracle.check(case.loss, policy, *case.args, **case.kwargs)
        outcome = "/".join(sorted({r.status for r in report.results}))
        known = sorted({name for name, _, _ in report.known_divergences})
        outcome += f" ({', '.join(known)})" if known else ""
    except oracle.Unsupported as e:
        outcome = f"Unsupported: {stops_at(str(e))}"
    except oracle.Mismatch as e:
        outcome = f"MISMATCH: {str(e).splitlines()[1][:90]}"
    except Exception as e:       # the oracle's own failure (not one of its exceptions)
        outcome = f"ERROR {type(e).__name__}: {str(e)[:80]}"
    return time.perf_counter() - t0, time.process_time() - c0, outcome


def time_jit_grad(case, policy):
    """The gradient of the first output (the loss) with respect to the first
    argument, its arguments bound as oracle.check binds them (an equinox
    Module's non-array leaves static; integer leaves such as an NNX
    module's key counter get float0 gradients)."""
    import jax
    from oracle.conventions import bind
    jax.clear_caches()
    call = bind(case.loss, case.args, case.kwargs)
    args, kwargs = call.dynamic(call.jax_leaves)
    outputs = call.function()

    def loss_and_rest(*a, **k):
        outs = outputs(*a, **k)
        return outs[0], outs[1:]
    grad = jax.jit(jax.grad(jax.checkpoint(loss_and_rest, policy=policy), has_aux=True, allow_int=True))
    t0, c0 = time.perf_counter(), time.process_time()
    jax.block_until_ready(grad(*args, **kwargs))
    return time.perf_counter() - t0, time.process_time() - c0


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
    header = (f"{'model':21} {'policy':33} {'oracle.check':>12} {'(cpu)':>7} {'jit(grad)':>9} {'(cpu)':>6} "
              f"{'ratio':>6}  outcome")
    print(header)
    print("-" * len(header))
    total_o = total_g = cpu_o = cpu_g = 0.0
    for name in names:
        m = models[name]
        case = m.build()
        for pn in policies:
            policy = zoo.policy(pn, m)
            to, co, outcome = time_oracle(case, policy)
            tg, cg = time_jit_grad(case, policy)
            total_o, cpu_o, total_g, cpu_g = total_o + to, cpu_o + co, total_g + tg, cpu_g + cg
            print(f"{name:21} {pn:33} {to:11.2f}s {co:6.1f}s {tg:8.2f}s {cg:5.1f}s {to / tg:6.1f}  {outcome}",
                  flush=True)
    print("-" * len(header))
    print(f"{'total':55} {total_o:11.1f}s {cpu_o:6.0f}s {total_g:8.1f}s {cpu_g:5.0f}s "
          f"{total_o / max(total_g, 1e-9):6.1f}")


if __name__ == "__main__":
    main()

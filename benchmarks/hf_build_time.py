"""Where an `hf:` model's build goes on the CPU: the random initialization, tensor by tensor.

    python benchmarks/hf_build_time.py google/gemma-3-4b-it --layers 1

Builds the model as the collector does (collector/models/hf_source.py: the class from the shipped config,
`cls(config)`, seeded) with torch.Tensor's in-place initializers wrapped: each call's seconds and the
storage it filled. It prints the build's wall time, the seconds in each initializer, and how much of them
filled a tensor that a later initializer filled again (work whose values the model never keeps: the torch
module's own default init, then the library's). `--layers N` builds N decoder layers (a reduced model;
the embedding and head are whole).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

INITS = ("uniform_", "normal_", "zero_", "fill_", "trunc_normal_", "copy_")


def build_split(name: str, layers: int | None) -> dict:
    import torch

    from collector.models import hf_source

    calls: list[tuple[str, int, float]] = []  # (initializer, storage address, seconds)
    originals = {n: getattr(torch.Tensor, n) for n in INITS if hasattr(torch.Tensor, n)}

    def wrap(n, fn):
        def timed(self, *a, **k):
            t0 = time.perf_counter()
            out = fn(self, *a, **k)
            calls.append((n, self.untyped_storage().data_ptr(), time.perf_counter() - t0))
            return out
        return timed

    cls = hf_source.model_class(name)
    config = hf_source.make_config(cls, {"num_hidden_layers": layers} if layers else {}, name)
    torch.manual_seed(0)
    for n, fn in originals.items():
        setattr(torch.Tensor, n, wrap(n, fn))
    try:
        t0 = time.perf_counter()
        cls(config)
        wall = time.perf_counter() - t0
    finally:
        for n, fn in originals.items():
            setattr(torch.Tensor, n, fn)
    by, redone = defaultdict(float), defaultdict(float)
    last_at = {ptr: i for i, (_, ptr, _) in enumerate(calls)}
    for i, (n, ptr, secs) in enumerate(calls):
        by[n] += secs
        if last_at[ptr] > i:  # filled again later: these values were thrown away
            redone[n] += secs
    return {"wall_s": wall, "seconds": dict(by), "overwritten_s": dict(redone), "calls": len(calls)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="an hf: name (a class of PyTorch's list or a shipped hub id)")
    p.add_argument("--layers", type=int, default=None, help="decoder layers to build (default: the config's)")
    args = p.parse_args(argv)
    got = build_split(args.model, args.layers)
    print(f"{args.model} ({args.layers or 'all'} layers): built in {got['wall_s']:.1f} s, {got['calls']} "
          f"initializer calls")
    for n, secs in sorted(got["seconds"].items(), key=lambda kv: -kv[1]):
        print(f"  {n:14s} {secs:7.2f} s, of which {got['overwritten_s'].get(n, 0.0):6.2f} s filled again later")
    return 0


if __name__ == "__main__":
    sys.exit(main())

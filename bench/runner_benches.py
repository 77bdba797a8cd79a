"""The benchmarks bench/runner.py knows (program, mode, default sizes and
iterations of each) and the interleaved order of its runs, rotated
by one configuration each rep."""

import fnmatch
from dataclasses import dataclass

PROGRAMS = ("bench_pt2pt", "bench_rma", "bench_coll")
FAMILIES = ("pt2pt", "rma", "coll")


@dataclass(frozen=True)
class Bench:
    name: str
    program: str
    mode: str
    family: str
    kind: str  # latency | bandwidth | rate (decides the plot's label)
    np: int = 2
    window: int = 0  # 0: the program's -w is not passed
    iters: int = 1000
    warmup: int = 100
    max_size: int = 4 << 20
    single_size: bool = False  # atomics: one row, sizes not passed


BENCHES = {
    b.name: b
    for b in (
        Bench("latency", "bench_pt2pt", "latency", "pt2pt", "latency"),
        Bench("bw", "bench_pt2pt", "bw", "pt2pt", "bandwidth", window=64, iters=100, warmup=10),
        Bench("bibw", "bench_pt2pt", "bibw", "pt2pt", "bandwidth", window=64, iters=100, warmup=10),
        # Large messages over slow links (several NICs, main-job.sh e.): 8
        # in flight, and bench_pt2pt's tenth of the iterations above 8 KiB.
        Bench("bw_large", "bench_pt2pt", "bw", "pt2pt", "bandwidth", window=8, iters=20, warmup=10,
              max_size=16 << 20),
        Bench("msgrate_w64", "bench_pt2pt", "msgrate", "pt2pt", "rate", window=64, iters=100,
              warmup=10),
        Bench("msgrate_w256", "bench_pt2pt", "msgrate", "pt2pt", "rate", window=256, iters=50,
              warmup=5),
        Bench("mpairs", "bench_pt2pt", "mpairs", "pt2pt", "rate", np=4, window=64, iters=100,
              warmup=10),
        # Every even rank streams to every odd rank (several NICs, main-job.sh
        # e.: two ranks per host, so each has two peers on the other host).
        Bench("fanout", "bench_pt2pt", "fanout", "pt2pt", "rate", np=4, window=64, iters=100,
              warmup=10),
        Bench("put_lat", "bench_rma", "put_lat", "rma", "latency"),
        Bench("get_lat", "bench_rma", "get_lat", "rma", "latency"),
        Bench("put_bw", "bench_rma", "put_bw", "rma", "bandwidth", window=64, iters=100,
              warmup=10),
        Bench("get_bw", "bench_rma", "get_bw", "rma", "bandwidth", window=64, iters=100,
              warmup=10),
        Bench("acc_lat", "bench_rma", "acc_lat", "rma", "latency"),
        Bench("fop_lat", "bench_rma", "fop_lat", "rma", "latency", single_size=True),
        Bench("cas_lat", "bench_rma", "cas_lat", "rma", "latency", single_size=True),
        Bench("allreduce", "bench_coll", "allreduce", "coll", "latency", max_size=1 << 20),
        Bench("alltoall", "bench_coll", "alltoall", "coll", "latency", max_size=1 << 20),
    )
}

QUICK_SIZES = (1, 1 << 16, 4)
QUICK_DIVISOR = 2
KIND_LABEL = {
    "latency": "latency (us), lower is better",
    "bandwidth": "bandwidth (MB/s), higher is better",
    "rate": "messages per second, higher is better",
}


def select_benches(spec):
    """Comma list of benchmark names, family names (pt2pt, rma, coll) or 'all'."""
    if not spec or spec == "all":
        return list(BENCHES)
    out = []
    for tok in [t.strip() for t in spec.split(",") if t.strip()]:
        if tok in BENCHES:
            names = [tok]
        elif tok in FAMILIES:
            names = [b.name for b in BENCHES.values() if b.family == tok]
        else:
            names = [n for n in BENCHES if fnmatch.fnmatchcase(n, tok)]
            if not names:
                raise SystemExit(f"runner: unknown benchmark '{tok}' (see --list)")
        out.extend(n for n in names if n not in out)
    return out


# ------------------------------------------------------------------ planning


@dataclass(frozen=True)
class Job:
    rep: int
    bench: str
    config: str


def rotated(items, rep):
    """items started at the (rep - 1)-th, wrapping: rep 1 A B C, rep 2 B C A,
    rep 3 C A B. A fixed order would run the same configuration (the
    anchor, listed last) last in every rep, where a drift within the rep
    (a warming cache, a neighbour's load) always favours or hurts it; turned
    by one each rep, every configuration runs first once per rotation."""
    if not items:
        return []
    k = (rep - 1) % len(items)
    return items[k:] + items[:k]


def plan(configs, benches, reps, families=None):
    """Interleaved order: every repetition runs every benchmark on every
    configuration before the next repetition starts, the configurations of
    each benchmark rotated by one each rep (A B C, B C A, C A B, ...).
    families maps a config name to the benchmark families it takes part in;
    the rotation is over the configurations a benchmark runs on."""
    jobs = []
    for rep in range(1, reps + 1):
        for bench in benches:
            fam = BENCHES[bench].family if bench in BENCHES else None
            takes_part = [cfg for cfg in configs
                          if not (families and fam and fam not in families.get(cfg, FAMILIES))]
            jobs.extend(Job(rep, bench, cfg) for cfg in rotated(takes_part, rep))
    return jobs

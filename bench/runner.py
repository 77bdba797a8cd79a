#!/usr/bin/env python3
"""Run the bench/ programs over several transport configurations side by side.

Configurations (named sets of mpirun/MCA arguments) come from bench/configs.ini.
All selected (configuration, benchmark) pairs are run interleaved, repetition
after repetition, the order turned by one configuration each rep (rep 1:
A B C, rep 2: B C A, rep 3: C A B, ...), so that a noisy machine affects
every configuration alike and none (the anchor, listed last) always runs
last; ratios to an anchor are still taken per rep. Results go to an output
directory:

  results.csv   every data row: config, bench, size, rep, value, unit
  runs.csv      one line per run: status, exit code, seconds, first error line
  summary.md    per benchmark a table of medians with min-max spread per size,
                configurations side by side; failed ones as "failed: <error>"
  plots/*.png   value vs message size, one line per configuration, log-log
  logs/         command, stdout and stderr of every run

Python 3 standard library only. The parts, beside this file:
  runner_benches.py   the benchmarks and the interleaved, rotated order of the runs
  runner_configs.py   the configurations (configs.ini, provider templates)
  runner_launch.py    the command of a run, and running it
  runner_output.py    a run's data rows, and the line that says why it failed
  runner_report.py    the tables (summary.md) and plots
"""

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import sys
import time

# Everything the parts define is also runner.X, as it was when they were
# one file (bench/tests/test_runner.py and bench/callgrind.sh use it so).
from runner_benches import (  # noqa: F401
    BENCHES, FAMILIES, KIND_LABEL, PROGRAMS, QUICK_DIVISOR, QUICK_SIZES, Bench, Job, plan,
    select_benches)
from runner_configs import (  # noqa: F401
    DEFAULT_COMPONENT_DIR, DEFAULT_CONFIG_FILE, Config, default_component_dir,
    efa_provider_available, expand_configs, read_config_file, resolve_providers, select_configs)
from runner_launch import (  # noqa: F401
    RunParams, RunResult, bench_np, build_command, env_args, execute, launch_args,
    placement_note, program_args, run_env, stop_group)
from runner_output import (  # noqa: F401
    LOST_MESSAGE, ROW_RE, ParseError, error_strength, first_error_line, parse_output)
from runner_report import (  # noqa: F401
    collect, fmt_cell, fmt_num, fmt_size, gnuplot_terminal, main_error, make_plots,
    fmt_ratio, markdown_tables, md_escape, rep_ratios, status_cell, summarize, verdicts)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def find_bin_dir(explicit=None):
    candidates = []
    if explicit:
        candidates.append(explicit)
    elif os.environ.get("BENCH_BIN_DIR"):
        candidates.append(os.environ["BENCH_BIN_DIR"])
    else:
        candidates += [os.path.join(HERE, "_build"), HERE, os.path.join(REPO, "_build", "bench"),
                       os.path.join(REPO, "build", "bench")]
    for d in candidates:
        if all(os.access(os.path.join(d, p), os.X_OK) for p in PROGRAMS):
            return os.path.abspath(d)
    return os.path.abspath(candidates[0])


def parse_sizes(text):
    m = re.fullmatch(r"(\d+[kKmM]?):(\d+[kKmM]?)(?::(\d+))?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError("sizes are MIN:MAX or MIN:MAX:FACTOR, e.g. 1:64K:4")

    def num(s):
        mult = {"k": 1 << 10, "m": 1 << 20}.get(s[-1].lower(), 1)
        return int(s.rstrip("kKmM")) * mult

    lo, hi = num(m.group(1)), num(m.group(2))
    fac = int(m.group(3) or 2)
    if lo > hi or fac < 2:
        raise argparse.ArgumentTypeError("need MIN <= MAX and FACTOR >= 2")
    return (lo, hi, fac)


def build_parser():
    p = argparse.ArgumentParser(
        description="Run bench/ programs over transport configurations, interleaved.",
        epilog="Benchmarks: " + ", ".join(BENCHES) + ". Families: " + ", ".join(FAMILIES) + ".")
    p.add_argument("--config-file", default=DEFAULT_CONFIG_FILE,
                   help="configurations file (default bench/configs.ini)")
    p.add_argument("-c", "--configs", default=None,
                   help="comma list of configuration names, globs or families "
                        "(e.g. mtl_efa,ob1_vader,'osc_pt2pt-*'); default all, or with "
                        "--table those of the tables and the anchors")
    p.add_argument("-b", "--benches", default=None,
                   help="comma list of benchmarks or families; default all "
                        "(--quick: latency,bw,msgrate_w64,put_lat,fop_lat)")
    p.add_argument("-p", "--providers", default=None,
                   help="providers for templates: comma list of short names, 'best' "
                        "(efa if fi_info -p efa works, else the stand-ins) or 'all'")
    p.add_argument("-r", "--reps", type=int, default=None, help="repetitions (default 5, quick 3)")
    p.add_argument("-s", "--sizes", type=parse_sizes, default=None,
                   help="MIN:MAX[:FACTOR] message sizes (default 1:4M:2, quick 1:64K:4)")
    p.add_argument("--iters", type=int, default=None, help="timed iterations for every bench")
    p.add_argument("--warmup", type=int, default=None, help="warm-up iterations for every bench")
    p.add_argument("-t", "--timeout", type=float, default=None,
                   help="seconds per run (default 180, quick 60)")
    p.add_argument("-o", "--out", default=None,
                   help="output directory (default bench/results/<timestamp>)")
    p.add_argument("--bin-dir", default=None,
                   help="directory of the bench programs (default $BENCH_BIN_DIR, bench/_build, "
                        "bench/, _build/bench, build/bench)")
    p.add_argument("-q", "--quick", action="store_true",
                   help="few sizes, fewer iterations, 3 reps")
    p.add_argument("--np-coll", type=int, default=2, help="ranks for collectives (default 2)")
    p.add_argument("--np-mpairs", type=int, default=4,
                   help="ranks for the multi-pair message rate (default 4)")
    p.add_argument("--max-timeouts", type=int, default=2,
                   help="after this many timeouts of one configuration, skip its remaining "
                        "runs (default 2; a timed-out benchmark is never re-run)")
    p.add_argument("--launch-args", default="",
                   help="extra mpirun arguments placing the ranks (shell-style quoting), e.g. "
                        "the output of tests/pretend-nodes.sh DIR 1 [core]; ranks are then not "
                        "bound, unless a rankfile binds them (the core placement); the "
                        "summary says which")
    p.add_argument("--env", action="append", default=[], type=parse_env, metavar="VAR=VALUE",
                   help="set VAR for every run's ranks alike (mpirun -x VAR=VALUE, for "
                        "every configuration, anchors included); repeatable")
    p.add_argument("--title", default=None,
                   help="what this comparison is (summary heading and printed tables), e.g. "
                        "'on one node' or 'between pretend nodes'")
    p.add_argument("--table", action="append", default=[], metavar="TITLE=CONFIGS",
                   help="a titled table of these configurations (names, globs or families); "
                        "repeatable, in order; configurations of no table come last")
    p.add_argument("--anchor", action="append", default=[], metavar="[CONFIGS=]ANCHOR",
                   help="show each configuration's ratio to ANCHOR (a name or family matching "
                        "one configuration), for all or for CONFIGS only; repeatable, the "
                        "first that matches a configuration is its anchor")
    p.add_argument("--no-plots", action="store_true", help="do not run gnuplot")
    p.add_argument("--list", action="store_true", help="list configurations and benchmarks")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--show-args", metavar="CONFIG",
                   help="print the mpirun arguments of one configuration, one per line")
    return p


QUICK_BENCHES = "latency,bw,msgrate_w64,put_lat,fop_lat"
# what the run summary says of the order (runner_benches.plan)
ORDER_NOTE = ("order rotated by one configuration each rep (rep r starts at the r-th; "
              "ratios to the anchor per rep)")


def parse_env(text):
    """--env VAR=VALUE, checked: mpirun -x VAR alone would export whatever
    mpirun's own environment holds, which differs from machine to machine."""
    var, sep, _ = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
        raise argparse.ArgumentTypeError(f"--env wants VAR=VALUE, not '{text}'")
    return text


def parse_tables(specs, all_configs):
    """--table TITLE=CONFIGS values -> [(title, [names])]."""
    out = []
    for spec in specs:
        title, sep, pats = spec.rpartition("=")
        if not sep or not title.strip():
            raise SystemExit(f"runner: --table wants TITLE=CONFIGS, not '{spec}'")
        out.append((title.strip(), [c.name for c in select_configs(all_configs, pats)]))
    return out


def parse_anchors(specs, all_configs):
    """--anchor [CONFIGS=]ANCHOR values -> [(names or None for all, anchor)]."""
    out = []
    for spec in specs:
        pats, sep, anchor = spec.rpartition("=")
        hits = select_configs(all_configs, anchor)
        if len(hits) != 1:
            raise SystemExit(f"runner: anchor '{anchor}' must name one configuration, not "
                             f"{', '.join(c.name for c in hits)}")
        names = [c.name for c in select_configs(all_configs, pats)] if sep else None
        out.append((names, hits[0].name))
    return out


def anchor_of(anchor_specs, names):
    """configuration -> its anchor (the first spec that covers it)."""
    out = {}
    for c in names:
        for covered, anchor in anchor_specs:
            if c != anchor and anchor in names and (covered is None or c in covered):
                out[c] = anchor
                break
    return out


def fmt_elapsed(secs):
    secs = int(secs)
    return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def main(argv=None, stdout=None):
    out_stream = stdout or sys.stdout

    def say(msg=""):
        print(msg, file=out_stream, flush=True)

    args = build_parser().parse_args(argv)
    cp = read_config_file(args.config_file)
    providers = resolve_providers(cp, args.providers)
    all_configs = expand_configs(cp, providers)

    if args.show_args:
        cfg = next((c for c in all_configs if c.name == args.show_args), None)
        if cfg is None:
            raise SystemExit(f"runner: no configuration '{args.show_args}' "
                             f"(providers: {','.join(providers)})")
        say("\n".join(cfg.args))
        return 0

    if args.list:
        say(f"providers: {', '.join(providers)}")
        say("configurations:")
        for c in all_configs:
            fams = "" if c.families == FAMILIES else f"  [only {','.join(c.families)}]"
            say(f"  {c.name:28s} {c.command or shlex.join(c.args)}{fams}")
        say("benchmarks:")
        for b in BENCHES.values():
            say(f"  {b.name:14s} {b.family:6s} {b.program} -t {b.mode}"
                + (f" -w {b.window}" if b.window else ""))
        return 0

    table_specs = parse_tables(args.table, all_configs)
    anchor_specs = parse_anchors(args.anchor, all_configs)
    spec = args.configs
    if spec is None and table_specs:
        spec = ",".join(dict.fromkeys([n for _, names in table_specs for n in names]
                                      + [a for _, a in anchor_specs]))
    configs = select_configs(all_configs, spec or "all")
    benches = select_benches(args.benches or (QUICK_BENCHES if args.quick else "all"))
    reps = args.reps if args.reps is not None else (3 if args.quick else 5)
    timeout = args.timeout if args.timeout is not None else (60 if args.quick else 180)
    params = RunParams(sizes=args.sizes, iters=args.iters, warmup=args.warmup, quick=args.quick,
                       np_coll=args.np_coll, np_mpairs=args.np_mpairs,
                       hosts=tuple(shlex.split(args.launch_args)), env=tuple(args.env))
    bin_dir = find_bin_dir(args.bin_dir)
    by_name = {c.name: c for c in configs}
    jobs = plan([c.name for c in configs], benches, reps,
                families={c.name: c.families for c in configs})

    if args.dry_run:
        for j in jobs:
            say(shlex.join(build_command(by_name[j.config], BENCHES[j.bench], params, bin_dir,
                                         j.rep)))
        return 0

    if not any(c.command for c in configs):
        missing = [p for p in PROGRAMS if not os.access(os.path.join(bin_dir, p), os.X_OK)]
        if missing:
            say(f"runner: bench programs not found in {bin_dir}: {', '.join(missing)} "
                "(build them with bench/build-bench.sh, or pass --bin-dir / BENCH_BIN_DIR)")
            return 2

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = os.path.abspath(args.out or os.path.join(HERE, "results", stamp))
    os.makedirs(os.path.join(outdir, "logs"), exist_ok=True)
    meta = {
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "argv": sys.argv if argv is None else ["runner.py"] + list(argv),
        "providers": providers, "reps": reps, "timeout": timeout, "bin_dir": bin_dir,
        "benches": benches, "loadavg_start": _loadavg(),
        "configs": {c.name: c.command or shlex.join(c.args) for c in configs},
        "env": list(params.env),
    }
    say(f"runner: {len(configs)} configurations x {len(benches)} benchmarks x {reps} reps = "
        f"{len(jobs)} runs, timeout {timeout:g} s, output {outdir}")
    say(f"runner: providers {','.join(providers)}; configurations "
        + ", ".join(c.name for c in configs))
    say(f"runner: {ORDER_NOTE}"
        + (f"; every run with {' '.join(params.env)}" if params.env else ""))

    results = []
    timed_out = set()
    t_start = time.monotonic()
    raw_csv = open(os.path.join(outdir, "results.csv"), "w", newline="", encoding="utf-8")
    runs_csv = open(os.path.join(outdir, "runs.csv"), "w", newline="", encoding="utf-8")
    raw = csv.writer(raw_csv)
    runs = csv.writer(runs_csv)
    raw.writerow(["config", "bench", "size", "rep", "value", "unit"])
    runs.writerow(["rep", "config", "bench", "status", "returncode", "seconds", "error",
                   "command"])
    name_w = max(len(c.name) for c in configs)
    bench_w = max(len(b) for b in benches)
    interrupted = False
    try:
        for i, job in enumerate(jobs, 1):
            cfg = by_name[job.config]
            cmd = build_command(cfg, BENCHES[job.bench], params, bin_dir, job.rep)
            n_timeouts = sum(1 for c, _ in timed_out if c == job.config)
            if (job.config, job.bench) in timed_out:
                res = RunResult(job.rep, job.bench, job.config, "failed",
                                error=f"timeout after {timeout:g} s (later reps skipped)",
                                command=cmd)
            elif args.max_timeouts > 0 and n_timeouts >= args.max_timeouts:
                res = RunResult(job.rep, job.bench, job.config, "failed",
                                error=f"skipped: {n_timeouts} timeouts of this configuration",
                                command=cmd)
            else:
                log = os.path.join(outdir, "logs", f"rep{job.rep}_{job.bench}_{job.config}.log")
                res = execute(job, cmd, timeout, log)
                if res.error.startswith("timeout"):
                    timed_out.add((job.config, job.bench))
            results.append(res)
            for size, value in res.rows:
                raw.writerow([res.config, res.bench, size, res.rep, repr(value), res.unit])
            runs.writerow([res.rep, res.config, res.bench, res.status, res.returncode,
                           f"{res.seconds:.2f}", res.error, shlex.join(cmd)])
            raw_csv.flush()
            runs_csv.flush()
            state = "ok" if res.status == "ok" else "FAILED " + res.error[:70]
            say(f"[{i:3d}/{len(jobs)} {fmt_elapsed(time.monotonic() - t_start)}] "
                f"rep {job.rep}/{reps} {job.bench:{bench_w}s} {job.config:{name_w}s} "
                f"{res.seconds:5.1f}s {state}")
    except KeyboardInterrupt:
        interrupted = True
        say("runner: interrupted; writing what was measured so far")
    finally:
        raw_csv.close()
        runs_csv.close()

    names = [c.name for c in configs]
    groups = None
    if table_specs:
        anchors_used = {a for _, a in anchor_specs}
        rest = [n for n in names if n not in anchors_used
                and not any(n in g for _, g in table_specs)]
        groups = table_specs + ([("other configurations", rest)] if rest else [])
    tables = markdown_tables(results, names, benches, anchors=anchor_of(anchor_specs, names),
                             groups=groups)
    verdict = verdicts(results, names, benches, anchors=anchor_of(anchor_specs, names))
    plots = [] if args.no_plots else make_plots(results, names, benches, outdir)
    meta.update({"finished": datetime.datetime.now().isoformat(timespec="seconds"),
                 "seconds": round(time.monotonic() - t_start, 1), "loadavg_end": _loadavg(),
                 "interrupted": interrupted})
    with open(os.path.join(outdir, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
    with open(os.path.join(outdir, "summary.md"), "w", encoding="utf-8") as f:
        heading = f"{args.title} ({stamp})" if args.title else f"Benchmark comparison {stamp}"
        f.write(f"# {heading}\n\n")
        if params.hosts:
            f.write(f"- ranks placed by: {placement_note(params.hosts)}\n")
        if params.env:
            f.write(f"- environment of every run (mpirun -x): `{' '.join(params.env)}`\n")
        f.write(f"- runs: {len(results)} ({len(jobs)} planned), interleaved, {ORDER_NOTE}, "
                f"{reps} reps, {fmt_elapsed(meta['seconds'])}\n")
        f.write(f"- host: {os.uname().nodename}, {os.cpu_count()} cpus, load "
                f"{meta['loadavg_start']} -> {meta['loadavg_end']}\n")
        f.write(f"- providers: {', '.join(providers)}\n")
        f.write("- configurations:\n")
        for c in configs:
            f.write(f"  - `{c.name}`: `{c.command or shlex.join(c.args)}`\n")
        f.write("\n" + tables + "\n")
        if verdict:
            f.write("## Verdicts\n\n" + "".join(f"- {v}\n" for v in verdict) + "\n")
        if plots:
            f.write("## Plots\n\n")
            for p in plots:
                f.write(f"![{os.path.basename(p)}](plots/{os.path.basename(p)})\n")
    say("")
    if args.title:
        say(f"## {args.title}")
        say("")
    say(tables)
    for v in verdict:
        say(f"verdict: {v}")
    say(f"summary: {os.path.join(outdir, 'summary.md')}")
    say(f"csv:     {os.path.join(outdir, 'results.csv')} (runs: runs.csv, logs: logs/)")
    for p in plots:
        say(f"plot:    {p}")
    if interrupted:
        return 130
    # A configuration none of whose runs of a benchmark succeeded has no
    # figure: the comparison is not made, and the caller must hear of it.
    missing = sorted({(r.config, r.bench) for r in results} -
                     {(r.config, r.bench) for r in results if r.status == "ok"})
    for config, bench in missing:
        say(f"runner: no run of {bench} on {config} succeeded (runs.csv, logs/)")
    return 1 if missing else 0


def _loadavg():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())

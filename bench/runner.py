#!/usr/bin/env python3
"""Run the bench/ programs over several transport configurations side by side.

Configurations (named sets of mpirun/MCA arguments) come from bench/configs.ini.
All selected (configuration, benchmark) pairs are run interleaved, repetition
after repetition (rep 1: A B C, rep 2: A B C, ...), so that a noisy machine
affects every configuration alike. Results go to an output directory:

  results.csv   every data row: config, bench, size, rep, value, unit
  runs.csv      one line per run: status, exit code, seconds, first error line
  summary.md    per benchmark a table of medians with min-max spread per size,
                configurations side by side; failed ones as "failed: <error>"
  plots/*.png   value vs message size, one line per configuration, log-log
  logs/         command, stdout and stderr of every run

Python 3 standard library only.
"""

import argparse
import configparser
import csv
import datetime
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_CONFIG_FILE = os.path.join(HERE, "configs.ini")
DEFAULT_COMPONENT_DIR = "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
PROGRAMS = ("bench_pt2pt", "bench_rma", "bench_coll")
FAMILIES = ("pt2pt", "rma", "coll")


# --------------------------------------------------------------- benchmarks


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
        Bench("msgrate_w64", "bench_pt2pt", "msgrate", "pt2pt", "rate", window=64, iters=100,
              warmup=10),
        Bench("msgrate_w256", "bench_pt2pt", "msgrate", "pt2pt", "rate", window=256, iters=50,
              warmup=5),
        Bench("mpairs", "bench_pt2pt", "mpairs", "pt2pt", "rate", np=4, window=64, iters=100,
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


# ------------------------------------------------------------ configurations


@dataclass
class Config:
    name: str
    args: list
    efa: bool = False
    families: tuple = FAMILIES
    command: str = ""  # replaces the whole command when set
    provider: str = ""


def efa_provider_available():
    """True when libfabric offers the real efa provider."""
    if not shutil.which("fi_info"):
        return False
    try:
        p = subprocess.run(["fi_info", "-p", "efa"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and "efa" in p.stdout


_component_dir_cache = []


def default_component_dir():
    """Open MPI's own component directory (pkglibdir), asked from ompi_info."""
    if _component_dir_cache:
        return _component_dir_cache[0]
    found = DEFAULT_COMPONENT_DIR
    if shutil.which("ompi_info"):
        try:
            p = subprocess.run(["ompi_info", "--parsable", "--path", "pkglibdir"],
                               capture_output=True, text=True, timeout=30)
            m = re.search(r"pkglibdir:(\S+)", p.stdout)
            if m:
                found = m.group(1)
        except (OSError, subprocess.TimeoutExpired):
            pass
    _component_dir_cache.append(found)
    return found


def read_config_file(path):
    cp = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",),
                                   inline_comment_prefixes=None, default_section="__none__")
    cp.optionxform = str
    with open(path, encoding="utf-8") as f:
        cp.read_file(f)
    return cp


def resolve_providers(cp, spec, efa_probe=efa_provider_available):
    """Short provider names to expand templates for.

    spec: None/'best' -> efa if it exists, else the stand-ins from [defaults];
    'all' -> every provider of [providers] (efa only when it exists);
    otherwise a comma list of short names.
    """
    known = dict(cp["providers"]) if cp.has_section("providers") else {}
    standins = "rxm shm"
    if cp.has_section("defaults"):
        standins = cp["defaults"].get("standins", standins)
    if spec in (None, "", "best"):
        return ["efa"] if "efa" in known and efa_probe() else standins.split()
    if spec == "all":
        have_efa = efa_probe()
        return [p for p in known if p != "efa" or have_efa]
    out = [p.strip() for p in spec.split(",") if p.strip()]
    for p in out:
        if p not in known:
            raise SystemExit(f"runner: unknown provider '{p}' (known: {', '.join(known)})")
    return out


def expand_configs(cp, providers, env=None):
    """All configurations of the file, templates expanded for the providers."""
    env = os.environ if env is None else env
    known = dict(cp["providers"]) if cp.has_section("providers") else {}
    common = []
    if cp.has_section("defaults"):
        common = shlex.split(cp["defaults"].get("common_args", ""))
    out = []
    for section in cp.sections():
        if section in ("providers", "defaults"):
            continue
        sec = cp[section]
        families = tuple(sec.get("families", " ".join(FAMILIES)).replace(",", " ").split())
        for fam in families:
            if fam not in FAMILIES:
                raise SystemExit(f"runner: [{section}]: unknown family '{fam}'")
        is_efa = sec.get("efa", "no").strip().lower() in ("yes", "true", "1")
        if "{prov}" in section:
            allowed = sec.get("providers", "").split()
            provs = [p for p in providers if not allowed or p in allowed]
        else:
            provs = [None]
        for prov in provs:
            values = {"prov": prov or "", "provider": known.get(prov, "") if prov else ""}
            name = section.replace("{prov}", prov) if prov else section
            args = [tok.format_map(values) for tok in shlex.split(sec.get("args", ""))]
            if is_efa and env.get("EFA_MCA_COMPONENT_PATH"):
                path = default_component_dir() + ":" + env["EFA_MCA_COMPONENT_PATH"]
                args += ["--mca", "mca_base_component_path", path]
            out.append(Config(name=name, args=common + args, efa=is_efa, families=families,
                              command=sec.get("command", ""), provider=values["provider"]))
    return out


def select_configs(all_configs, spec):
    """Comma list of names, globs, or families (prefix before '-<prov>')."""
    if not spec or spec == "all":
        return list(all_configs)
    out = []
    for tok in [t.strip() for t in spec.split(",") if t.strip()]:
        hits = [c for c in all_configs
                if c.name == tok or fnmatch.fnmatchcase(c.name, tok)
                or c.name.startswith(tok + "-")]
        if not hits:
            names = ", ".join(c.name for c in all_configs)
            raise SystemExit(f"runner: no configuration matches '{tok}' (have: {names})")
        out.extend(c for c in hits if c not in out)
    return out


# ------------------------------------------------------------------ planning


@dataclass(frozen=True)
class Job:
    rep: int
    bench: str
    config: str


def plan(configs, benches, reps, families=None):
    """Interleaved order: every repetition runs every benchmark on every
    configuration before the next repetition starts (A B C A B C ...).
    families maps a config name to the benchmark families it takes part in."""
    jobs = []
    for rep in range(1, reps + 1):
        for bench in benches:
            fam = BENCHES[bench].family if bench in BENCHES else None
            for cfg in configs:
                if families and fam and fam not in families.get(cfg, FAMILIES):
                    continue
                jobs.append(Job(rep, bench, cfg))
    return jobs


# ------------------------------------------------------------------ commands


@dataclass
class RunParams:
    sizes: tuple = None  # (min, max, factor) or None for the benchmark's own
    iters: int = None
    warmup: int = None
    quick: bool = False
    np_coll: int = 2
    np_mpairs: int = 4
    cores: int = os.cpu_count() or 1
    # extra mpirun arguments that place the ranks (--launch-args), e.g. the
    # hostfile and ssh stand-in of tests/pretend-nodes.sh; ranks are then
    # not bound (a pretend node has no cores of its own)
    hosts: tuple = ()


def bench_np(bench, params):
    if bench.family == "coll":
        return params.np_coll
    if bench.name == "mpairs":
        return params.np_mpairs
    return bench.np


def program_args(bench, params):
    iters = bench.iters
    warmup = bench.warmup
    if params.quick:
        iters = max(1, iters // QUICK_DIVISOR)
        warmup = warmup // QUICK_DIVISOR
    if params.iters is not None:
        iters = params.iters
    if params.warmup is not None:
        warmup = params.warmup
    args = ["-t", bench.mode, "-i", str(iters), "-x", str(warmup)]
    if not bench.single_size:
        if params.sizes:
            lo, hi, fac = params.sizes
        elif params.quick:
            lo, hi, fac = QUICK_SIZES
        else:
            lo, hi, fac = 1, bench.max_size, 2
        args += ["-m", str(lo), "-M", str(hi), "-f", str(fac)]
    if bench.window:
        args += ["-w", str(bench.window)]
    return args


def launch_args(np, cores, hosts=()):
    if hosts:
        return ["-np", str(np), "--bind-to", "none"] + list(hosts)
    if np <= cores:
        return ["-np", str(np), "--bind-to", "core"]
    return ["-np", str(np), "--oversubscribe", "--bind-to", "none"]


def build_command(cfg, bench, params, bin_dir, rep=1):
    np = bench_np(bench, params)
    prog = os.path.join(bin_dir, bench.program)
    pargs = program_args(bench, params)
    launch = launch_args(np, params.cores, params.hosts)
    if cfg.command:
        scalars = {"np": str(np), "bench": bench.name, "program": prog, "rep": str(rep),
                   "provider": cfg.provider}
        lists = {"{launch}": launch, "{args}": cfg.args, "{program_args}": pargs}
        out = []
        for tok in shlex.split(cfg.command):
            if tok in lists:
                out.extend(lists[tok])
            else:
                out.append(tok.format_map(scalars))
        return out
    return ["mpirun"] + launch + list(cfg.args) + [prog] + pargs


def run_env():
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


# ------------------------------------------------------------------- parsing


class ParseError(Exception):
    pass


ROW_RE = re.compile(r"^\s*(\d+)\s+([-+0-9.eE]+|nan|inf)(\s.*)?$")


def parse_output(text):
    """Parse a benchmark's stdout.

    Returns (header dict, rows [(size, value)]). Header lines look like
    '# bench=latency unit=us ...'; data rows 'size value [more columns]'.
    Other lines (warnings) are ignored. Raises ParseError when there is no
    header, no row, or the program reported a failed verification."""
    header = {}
    rows = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            for m in re.finditer(r"(\w+)=(\S+)", s):
                header.setdefault(m.group(1), m.group(2))
            if "verify=FAILED" in s:
                raise ParseError("verification failed: " + s.lstrip("# "))
            continue
        m = ROW_RE.match(s)
        if m:
            try:
                rows.append((int(m.group(1)), float(m.group(2))))
            except ValueError:
                continue
    if "bench" not in header:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "(no output)")
        raise ParseError("unparsable output: no '# bench=' header: " + first)
    if not rows:
        raise ParseError("unparsable output: no data rows")
    return header, rows


_DECOR_RE = re.compile(r"^(\[[^\[\]]*\]\s*|\[\[[^\]]*\][^\]]*\]\s*)+")  # "[host:pid] [[job,0],0] "
_NOISE = ("show_help.c", "orte_base_help_aggregate", "help message help-", "ORTE_ERROR_LOG")
LOST_MESSAGE = "Open MPI lost the error message (ORTE_ERROR_LOG in show_help.c)"


def _clean_lines(text):
    out = []
    for raw in (text or "").splitlines():
        line = _DECOR_RE.sub("", raw.strip()).strip()
        line = line.lstrip("*").strip()
        if not line or set(line) <= set("-=*_ ") or line.startswith("#"):
            continue
        out.append(re.sub(r"\s+", " ", line))
    return out


def first_error_line(stderr, stdout="", limit=140):
    """One line that says what went wrong.

    Open MPI's messages are recognised in a fixed order of priority, so the
    same failure gives the same line whichever rank printed first; otherwise
    the first line that is not decoration ('[host:pid] ***', rules of dashes)
    or known noise. Returns LOST_MESSAGE when only noise is there."""
    text = (stderr or "") + "\n" + (stdout or "")
    lines = _clean_lines(stderr) + _clean_lines(stdout)
    line = None
    fw = re.search(r"^\s*Framework:\s*(\S+)", text, re.M)
    comp = re.search(r"^\s*Component:\s*(\S+)", text, re.M)
    call = re.search(r"An error occurred in (MPI_\w+)", text)
    code = re.search(r"(MPI_ERR_\w+:[^\n]*)", text)
    init = re.search(r"developer\):\s*\n\s*(\S[^\n]*)\n\s*--> Returned ([^\n]*)", text)
    ours = re.search(r"MPI error in (\S+): ([^\n]*)", text)
    if "component was not found" in text:
        where = f": {fw.group(1)}/{comp.group(1)}" if fw and comp else ""
        line = "requested component not found" + where
    elif re.search(r"verification failed", text):
        line = next(ln for ln in lines if "verification failed" in ln)
    elif ours:
        line = f"{ours.group(1)}: {ours.group(2).strip()}"
    elif call and code:
        line = f"{call.group(1)}: {code.group(1).strip()}"
    elif init:
        returned = init.group(2).split(" instead")[0].strip()
        line = f"MPI_Init failed: {init.group(1).strip()}, returned {returned}"
    elif re.search(r"No components were able to be opened in the \w+ framework", text):
        m = re.search(r"No components were able to be opened in the (\w+) framework", text)
        line = f"no {m.group(1)} component could be opened"
        m2 = re.search(r"PML (\w+) cannot be selected", text)
        if m2:
            line += f" (PML {m2.group(1)} cannot be selected)"
    elif call:
        line = f"error in {call.group(1)}"
    else:
        useful = [ln for ln in lines if not any(n in ln for n in _NOISE)]
        if useful:
            line = useful[0]
        elif lines:
            line = LOST_MESSAGE
        else:
            line = "(no error output)"
    line = re.sub(r"\s+", " ", line).strip()
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return line


_STRONG = ("requested component not found", "verification failed", "MPI_ERR_")
_MEDIUM = ("MPI_Init failed:", "component could be opened")


def error_strength(line):
    """3: names the cause; 2: a consequence that often hides a cause Open
    MPI failed to print ('no pml component could be opened'); 1: only a
    symptom ('PML cm cannot be selected', 'error in MPI_Init', any other
    line); 0: Open MPI lost the message."""
    if line.startswith(LOST_MESSAGE) or line == "(no error output)":
        return 0
    if any(k in line for k in _STRONG):
        return 3
    if any(k in line for k in _MEDIUM):
        return 2
    return 1


# ------------------------------------------------------------------- running


@dataclass
class RunResult:
    rep: int
    bench: str
    config: str
    status: str  # ok | failed
    error: str = ""
    rows: list = field(default_factory=list)
    unit: str = ""
    seconds: float = 0.0
    returncode: object = None
    command: list = field(default_factory=list)


def _run_quiet(cmd, timeout):
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             errors="replace", env=run_env(), start_new_session=True)
    except OSError as e:
        return None, "", str(e)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        stop_group(p)
        out, err = p.communicate()
        return None, out, err


def execute(job, cmd, timeout, log_path=None, diag_retries=3):
    """Run one command; never raises for the command's own failures."""
    t0 = time.monotonic()
    rc = None
    out = err = ""
    error = ""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", env=run_env(), start_new_session=True)
    except OSError as e:
        error = f"cannot start {cmd[0]}: {e.strerror or e}"
    else:
        try:
            out, err = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            stop_group(proc)
            out, err = proc.communicate()
            error = f"timeout after {timeout:g} s"
    secs = time.monotonic() - t0
    res = RunResult(job.rep, job.bench, job.config, "failed", seconds=secs, returncode=rc,
                    command=cmd)
    extra_log = ""
    if not error and rc != 0:
        error = first_error_line(err, out)
        # Open MPI 4.1 often drops the ranks' help text in mpirun; a quick
        # failure is run again (not counted) only to learn what went wrong
        for attempt in range(diag_retries if secs < 30 else 0):
            strength = error_strength(error)
            if strength == 3 or (strength == 2 and attempt >= 1):
                break
            d_rc, d_out, d_err = _run_quiet(cmd, min(timeout, 60))
            extra_log += (f"\n----- diagnosis re-run {attempt + 1}: exit {d_rc}\n"
                          f"{d_out}\n{d_err}")
            if d_rc not in (0, None):
                again = first_error_line(d_err, d_out)
                if error_strength(again) > error_strength(error):
                    error = again
        if error == LOST_MESSAGE:
            error += f", exit code {rc}"
        if error == "(no error output)":
            error = f"exit code {rc}"
    if not error:
        try:
            header, rows = parse_output(out)
            res.status = "ok"
            res.rows = rows
            res.unit = header.get("unit", "")
        except ParseError as e:
            error = str(e)
    res.error = error
    if log_path:
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        with open(log_path, "w", encoding="utf-8") as f:
            f.write("command: " + shlex.join(cmd) + "\n")
            f.write(f"exit: {rc}  seconds: {secs:.2f}  status: {res.status}  {error}\n")
            f.write("----- stdout\n" + out + "\n----- stderr\n" + err + extra_log)
    return res


def stop_group(proc):
    """Stop a timed-out run: its own process group, TERM then KILL."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# ----------------------------------------------------------------- summaries


def summarize(values):
    """(median, min, max) of a non-empty list of numbers."""
    if not values:
        raise ValueError("no values")
    return statistics.median(values), min(values), max(values)


def fmt_num(v):
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v:.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def fmt_cell(values):
    med, lo, hi = summarize(values)
    if len(values) == 1:
        return fmt_num(med)
    return f"{fmt_num(med)} ({fmt_num(lo)}-{fmt_num(hi)})"


def fmt_size(n):
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def md_escape(text):
    return text.replace("|", "\\|")


def collect(results):
    """bench -> config -> {'values': {size: [v...]}, 'ok': n, 'failed': n,
    'errors': [..], 'unit': str}"""
    table = {}
    for r in results:
        d = table.setdefault(r.bench, {}).setdefault(
            r.config, {"values": {}, "ok": 0, "failed": 0, "errors": [], "unit": ""})
        if r.status == "ok":
            d["ok"] += 1
            d["unit"] = d["unit"] or r.unit
            for size, value in r.rows:
                d["values"].setdefault(size, []).append(value)
        else:
            d["failed"] += 1
            d["errors"].append(r.error)
    return table


def main_error(errors):
    """The most frequent error of a list (the earliest among equals)."""
    counts = {}
    for e in errors:
        counts[e] = counts.get(e, 0) + 1
    return max(errors, key=lambda e: (counts[e], -errors.index(e)))


def status_cell(d):
    if d["failed"] == 0:
        return f"ok {d['ok']}/{d['ok']}"
    err = md_escape(main_error(d["errors"]))
    if d["ok"] == 0:
        return f"failed: {err}"
    return f"ok {d['ok']}/{d['ok'] + d['failed']}; failed: {err}"


def markdown_tables(results, configs, benches):
    """One table per benchmark: a status row, then one row per size."""
    table = collect(results)
    out = []
    for bench in benches:
        per_cfg = table.get(bench)
        if not per_cfg:
            continue
        cols = [c for c in configs if c in per_cfg]
        b = BENCHES.get(bench)
        unit = next((per_cfg[c]["unit"] for c in cols if per_cfg[c]["unit"]), "")
        label = KIND_LABEL.get(b.kind, "") if b else ""
        reps = max(per_cfg[c]["ok"] + per_cfg[c]["failed"] for c in cols)
        out.append(f"### {bench}" + (f" [{unit}]" if unit else "")
                   + (f" - {label}" if label else "")
                   + f"; median (min-max) of {reps} rep{'s' if reps != 1 else ''}")
        out.append("")
        out.append("| size | " + " | ".join(cols) + " |")
        out.append("|---:|" + "---|" * len(cols))
        out.append("| status | " + " | ".join(status_cell(per_cfg[c]) for c in cols) + " |")
        sizes = sorted({s for c in cols for s in per_cfg[c]["values"]})
        for size in sizes:
            cells = []
            for c in cols:
                vals = per_cfg[c]["values"].get(size)
                if vals:
                    cells.append(fmt_cell(vals))
                elif per_cfg[c]["ok"] == 0:
                    cells.append("failed")
                else:
                    cells.append("-")
            out.append(f"| {fmt_size(size)} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------- plots


def gnuplot_terminal():
    """'pngcairo' if this gnuplot has it, else 'png', else None."""
    if not shutil.which("gnuplot"):
        return None
    for term in ("pngcairo", "png"):
        p = subprocess.run(["gnuplot", "-e", f"set terminal {term}"], capture_output=True,
                           text=True)
        if p.returncode == 0 and "unknown" not in p.stderr.lower():
            return term
    return None


def make_plots(results, configs, benches, outdir):
    """One PNG per benchmark with more than one size; returns the paths."""
    term = gnuplot_terminal()
    if term is None:
        print("runner: gnuplot with png support not found; no plots", file=sys.stderr)
        return []
    table = collect(results)
    pdir = os.path.join(outdir, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = []
    for bench in benches:
        per_cfg = table.get(bench, {})
        cols = [c for c in configs if c in per_cfg]
        good = [c for c in cols if len([s for s in per_cfg[c]["values"] if s > 0]) > 1]
        if not good:
            continue
        failed = [c for c in cols if per_cfg[c]["ok"] == 0]
        b = BENCHES.get(bench)
        unit = next((per_cfg[c]["unit"] for c in good if per_cfg[c]["unit"]), "")
        ylabel = {"latency": f"latency ({unit or 'us'})", "bandwidth": f"bandwidth ({unit})",
                  "rate": f"message rate ({unit})"}.get(b.kind if b else "", unit)
        plots = []
        for c in good:
            dat = os.path.join(pdir, f"{bench}__{c}.dat")
            with open(dat, "w", encoding="utf-8") as f:
                f.write("# size median min max\n")
                for size in sorted(per_cfg[c]["values"]):
                    if size <= 0:
                        continue
                    med, lo, hi = summarize(per_cfg[c]["values"][size])
                    f.write(f"{size} {med:.6g} {lo:.6g} {hi:.6g}\n")
            plots.append(f"'{os.path.basename(dat)}' using 1:2:3:4 with yerrorlines "
                         f"title '{c}'")
        png = os.path.join(pdir, f"{bench}.png")
        reps = max(per_cfg[c]["ok"] + per_cfg[c]["failed"] for c in cols)
        lines = [
            f"set terminal {term} size 1000,650 noenhanced" + (" font ',10'" if term ==
                                                              "pngcairo" else ""),
            f"set output '{os.path.basename(png)}'",
            f"set title '{bench}: median of {reps} reps, bars = min..max'",
            "set logscale xy",
            "set xlabel 'message size (bytes)'",
            f"set ylabel '{ylabel}'",
            "set grid",
            "set key outside right top",
        ]
        sizes = sorted({s for c in good for s in per_cfg[c]["values"] if s > 0})
        step = max(1, (len(sizes) + 11) // 12)  # at most about 12 labels
        tics = ", ".join(f"'{fmt_size(s)}' {s}" for s in sizes[::step])
        lines.append(f"set xtics ({tics})")
        if failed:
            lines.append("set bmargin 6")
            lines.append("set label 1 'failed (not drawn): " + ", ".join(failed)
                         + "' at screen 0.01, screen 0.025")
        lines.append("plot " + ", \\\n     ".join(plots))
        gp = os.path.join(pdir, f"{bench}.gp")
        with open(gp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        p = subprocess.run(["gnuplot", os.path.basename(gp)], cwd=pdir, capture_output=True,
                           text=True)
        if p.returncode == 0 and os.path.exists(png):
            made.append(png)
        else:
            print(f"runner: gnuplot failed for {bench}: {first_error_line(p.stderr)}",
                  file=sys.stderr)
    return made


# ---------------------------------------------------------------------- main


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
    p.add_argument("-c", "--configs", default="all",
                   help="comma list of configuration names, globs or families "
                        "(e.g. mtl_efa,ob1_vader,'osc_pt2pt-*'); default all")
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
                        "the output of tests/pretend-nodes.sh DIR 1; ranks are then not bound")
    p.add_argument("--title", default=None,
                   help="what this comparison is (summary heading and printed tables), e.g. "
                        "'on one node' or 'between pretend nodes'")
    p.add_argument("--no-plots", action="store_true", help="do not run gnuplot")
    p.add_argument("--list", action="store_true", help="list configurations and benchmarks")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--show-args", metavar="CONFIG",
                   help="print the mpirun arguments of one configuration, one per line")
    return p


QUICK_BENCHES = "latency,bw,msgrate_w64,put_lat,fop_lat"


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

    configs = select_configs(all_configs, args.configs)
    benches = select_benches(args.benches or (QUICK_BENCHES if args.quick else "all"))
    reps = args.reps if args.reps is not None else (3 if args.quick else 5)
    timeout = args.timeout if args.timeout is not None else (60 if args.quick else 180)
    params = RunParams(sizes=args.sizes, iters=args.iters, warmup=args.warmup, quick=args.quick,
                       np_coll=args.np_coll, np_mpairs=args.np_mpairs,
                       hosts=tuple(shlex.split(args.launch_args)))
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
    }
    say(f"runner: {len(configs)} configurations x {len(benches)} benchmarks x {reps} reps = "
        f"{len(jobs)} runs, timeout {timeout:g} s, output {outdir}")
    say(f"runner: providers {','.join(providers)}; configurations "
        + ", ".join(c.name for c in configs))

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
    tables = markdown_tables(results, names, benches)
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
            f.write(f"- ranks placed by: `{shlex.join(params.hosts)}` (not bound)\n")
        f.write(f"- runs: {len(results)} ({len(jobs)} planned), interleaved, {reps} reps, "
                f"{fmt_elapsed(meta['seconds'])}\n")
        f.write(f"- host: {os.uname().nodename}, {os.cpu_count()} cpus, load "
                f"{meta['loadavg_start']} -> {meta['loadavg_end']}\n")
        f.write(f"- providers: {', '.join(providers)}\n")
        f.write("- configurations:\n")
        for c in configs:
            f.write(f"  - `{c.name}`: `{c.command or shlex.join(c.args)}`\n")
        f.write("\n" + tables + "\n")
        if plots:
            f.write("## Plots\n\n")
            for p in plots:
                f.write(f"![{os.path.basename(p)}](plots/{os.path.basename(p)})\n")
    say("")
    if args.title:
        say(f"## {args.title}")
        say("")
    say(tables)
    say(f"summary: {os.path.join(outdir, 'summary.md')}")
    say(f"csv:     {os.path.join(outdir, 'results.csv')} (runs: runs.csv, logs: logs/)")
    for p in plots:
        say(f"plot:    {p}")
    return 130 if interrupted else 0


def _loadavg():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())

"""Making bench/runner.py's runs: the mpirun command of a (configuration,
benchmark) pair, and running it with a timeout into a result and a log."""

import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field

from runner_benches import QUICK_DIVISOR, QUICK_SIZES
from runner_output import LOST_MESSAGE, ParseError, error_strength, first_error_line, parse_output


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
    # not bound (a pretend node has no cores of its own) unless a rankfile
    # binds them (pretend-nodes.sh's core placement)
    hosts: tuple = ()
    # VAR=VALUE settings (--env) every configuration's ranks get alike, by
    # mpirun's -x: on pretend or real nodes a variable of mpirun's own
    # environment need not reach the ranks of another node
    env: tuple = ()


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


def places_by_rankfile(hosts):
    # tests/pretend-nodes.sh DIR N core: a rankfile binds each rank (Open
    # MPI 4.1's --rankfile, 5.0's --map-by rankfile:file=...), which
    # --bind-to none would undo on 5.0
    return any(h == "--rankfile" or h.startswith("rankfile:") for h in hosts)


def launch_args(np, cores, hosts=()):
    if hosts and places_by_rankfile(hosts):
        return ["-np", str(np)] + list(hosts)
    if hosts:
        return ["-np", str(np), "--bind-to", "none"] + list(hosts)
    if np <= cores:
        return ["-np", str(np), "--bind-to", "core"]
    return ["-np", str(np), "--oversubscribe", "--bind-to", "none"]


def env_args(env):
    """mpirun's -x VAR=VALUE for each setting of --env."""
    out = []
    for setting in env:
        out += ["-x", setting]
    return out


def placement_note(hosts):
    """What the summary says of --launch-args: the ranks are bound only
    where a rankfile places them (launch_args adds --bind-to none else)."""
    how = "each rank bound by the rankfile" if places_by_rankfile(hosts) else "not bound"
    return f"`{shlex.join(hosts)}` ({how})"


def build_command(cfg, bench, params, bin_dir, rep=1):
    np = bench_np(bench, params)
    prog = os.path.join(bin_dir, bench.program)
    pargs = program_args(bench, params)
    launch = launch_args(np, params.cores, params.hosts) + env_args(params.env)
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

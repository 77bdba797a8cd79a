"""bench/runner.py's results side by side: per benchmark a markdown table of
medians with min-max spread per size (failed configurations as a column
that says why), with each configuration's ratio to its anchor, split into
titled tables of chosen configurations; and gnuplot plots of value against
message size."""

import os
import shutil
import statistics
import subprocess
import sys

from runner_benches import BENCHES, KIND_LABEL
from runner_output import first_error_line


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
    """bench -> config -> {'values': {size: [v...]}, 'by_rep': {size: {rep: v}},
    'ok': n, 'failed': n, 'errors': [..], 'unit': str}"""
    table = {}
    for r in results:
        d = table.setdefault(r.bench, {}).setdefault(
            r.config, {"values": {}, "by_rep": {}, "ok": 0, "failed": 0, "errors": [],
                       "unit": ""})
        if r.status == "ok":
            d["ok"] += 1
            d["unit"] = d["unit"] or r.unit
            for size, value in r.rows:
                d["values"].setdefault(size, []).append(value)
                d["by_rep"].setdefault(size, {})[r.rep] = value
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


def rep_ratios(d, a, size):
    """Per rep, the configuration's value over the anchor's in the same rep
    (interleaved: the two runs were next to each other in time)."""
    mine = d["by_rep"].get(size, {})
    theirs = a["by_rep"].get(size, {})
    return [mine[r] / theirs[r] for r in sorted(mine) if theirs.get(r)]


def fmt_ratio(ratios):
    if not ratios:
        return "-"
    med, lo, hi = summarize(ratios)
    if len(ratios) == 1:
        return f"{med:.2f}"
    return f"{med:.2f} ({lo:.2f}-{hi:.2f})"


def _columns(cols, anchors, present):
    """(header, kind, config, anchor) per column: each configuration, then
    its ratio to its anchor when it has one here; the anchors come last."""
    out = []
    used = []
    for c in cols:
        a = anchors.get(c)
        if c in anchors.values() or c not in present:
            continue
        out.append((c, "value", c, None))
        if a and a in present:
            out.append((f"{c} / {a}", "ratio", c, a))
            used += [a] if a not in used else []
    for c in cols:
        if c in present and c in anchors.values() and c not in used:
            used.append(c)
    for a in used:
        out.append((a, "value", a, None))
    return out


def _bench_table(bench, per_cfg, cols, anchors, title):
    present = [c for c in cols if c in per_cfg]
    columns = _columns(cols, anchors, present)
    if not columns:
        return []
    b = BENCHES.get(bench)
    unit = next((per_cfg[c]["unit"] for c in present if per_cfg[c]["unit"]), "")
    label = KIND_LABEL.get(b.kind, "") if b else ""
    reps = max(per_cfg[c]["ok"] + per_cfg[c]["failed"] for c in present)
    ratio = "; ratio to the anchor per rep, median (min-max)" if any(
        k == "ratio" for _, k, _, _ in columns) else ""
    out = [(f"### {title}: {bench}" if title else f"### {bench}")
           + (f" [{unit}]" if unit else "") + (f" - {label}" if label else "")
           + f"; median (min-max) of {reps} rep{'s' if reps != 1 else ''}" + ratio, ""]
    out.append("| size | " + " | ".join(h for h, _, _, _ in columns) + " |")
    out.append("|---:|" + "---|" * len(columns))
    out.append("| status | " + " | ".join(
        status_cell(per_cfg[c]) if k == "value" else "" for _, k, c, _ in columns) + " |")
    sizes = sorted({s for c in present for s in per_cfg[c]["values"]})
    for size in sizes:
        cells = []
        for _, kind, c, a in columns:
            vals = per_cfg[c]["values"].get(size)
            if kind == "ratio":
                cells.append(fmt_ratio(rep_ratios(per_cfg[c], per_cfg[a], size)))
            elif vals:
                cells.append(fmt_cell(vals))
            elif per_cfg[c]["ok"] == 0:
                cells.append("failed")
            else:
                cells.append("-")
        out.append(f"| {fmt_size(size)} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def markdown_tables(results, configs, benches, anchors=None, groups=None):
    """Per group of configurations (title, names; default: one untitled
    group of all), one table per benchmark: a status row, then one row per
    size. anchors: configuration -> the configuration its ratio is taken
    against; an anchor is shown as the last column of every table where a
    configuration refers to it."""
    table = collect(results)
    anchors = anchors or {}
    out = []
    for title, names in groups or [("", configs)]:
        cols = [c for c in configs if c in names]
        cols += [a for a in dict.fromkeys(anchors.get(c) for c in cols) if a and a not in cols]
        for bench in benches:
            if table.get(bench):
                out += _bench_table(bench, table[bench], cols, anchors, title)
    return "\n".join(out)


def verdicts(results, configs, benches, anchors=None):
    """One line per configuration with an anchor and per benchmark: at how
    many of the sizes both measured its median ratio to the anchor is on
    the better side (at most 1 for a latency, at least 1 for a bandwidth or
    a rate), and the range of those medians."""
    table = collect(results)
    anchors = anchors or {}
    lines = []
    for c in configs:
        a = anchors.get(c)
        if not a:
            continue
        for bench in benches:
            per_cfg = table.get(bench, {})
            if c not in per_cfg or a not in per_cfg:
                continue
            b = BENCHES.get(bench)
            lower_better = b is not None and b.kind == "latency"
            medians = []
            for size in sorted(per_cfg[c]["values"]):
                ratios = rep_ratios(per_cfg[c], per_cfg[a], size)
                if ratios:
                    medians.append(summarize(ratios)[0])
            if not medians:
                lines.append(f"{c} against {a}, {bench}: no size measured by both")
                continue
            better = sum(1 for m in medians if (m <= 1.0 if lower_better else m >= 1.0))
            word = ("at or below" if lower_better else "at or above") + " the anchor"
            lines.append(f"{c} against {a}, {bench}: {word} at {better} of {len(medians)} "
                         f"size{'s' if len(medians) != 1 else ''}, median ratios "
                         f"{min(medians):.2f}-{max(medians):.2f}")
    return lines


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

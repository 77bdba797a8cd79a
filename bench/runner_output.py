"""Reading what a bench/runner.py run printed: the data rows of a benchmark's
stdout, and the one line that says why a failed run failed."""

import re


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

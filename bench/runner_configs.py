"""bench/runner.py's transport configurations: named sets of mpirun/MCA
arguments read from bench/configs.ini, templates expanded for the chosen
providers, and selected by name, glob or family."""

import configparser
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass

from runner_benches import FAMILIES

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG_FILE = os.path.join(HERE, "configs.ini")
DEFAULT_COMPONENT_DIR = "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"


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

#!/usr/bin/env python3
"""Checks of the packaging recipes that need neither Spack nor rpmbuild.

- contrib/spack/packages/ompi-efa/package.py compiles (py_compile), imports
  under a stub of Spack's API (spack.package) that records its directives,
  declares the expected dependencies and variants, and its configure_args()
  and setup_run_environment() give the expected flags and settings for a
  fake spec, and for an external Open MPI in /usr (Debian's layout);
- where ompi_info is on PATH, the run environment's component path leaves
  every component of that Open MPI visible;
- flake8 passes on it in Spack's style (line length 99; the star import
  from spack.package allowed), when flake8 is installed (Debian:
  python3-flake8), else that check says it is skipped;
- contrib/rpm/ompi-efa.spec's Version is configure.ac's AC_INIT release.

Prints "PASS name" or "FAIL name: why" per check, then "N passed, M failed";
exits 1 on a failure.
    tests/package/check-spack-recipe.py
"""
import contextlib
import importlib.util
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
import types

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RECIPE = os.path.join(TOP, "contrib", "spack", "packages", "ompi-efa", "package.py")
SPEC = os.path.join(TOP, "contrib", "rpm", "ompi-efa.spec")
results = {"passed": 0, "failed": 0}


def check(name, ok, why=""):
    results["passed" if ok else "failed"] += 1
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")


# ---- a stub of the part of Spack's package API the recipe uses ----------
recorded = {"version": [], "variant": [], "depends_on": [], "conflicts": [], "license": []}
when_stack = []


def _directive(kind):
    def record(*args, **kwargs):
        if when_stack and "when" not in kwargs:  # inside `with when(...)`
            kwargs["when"] = " ".join(when_stack)
        recorded[kind].append((args, kwargs))

    return record


@contextlib.contextmanager
def when(condition):
    when_stack.append(condition)
    yield
    when_stack.pop()


class Prefix(str):
    """Like Spack's Prefix: an attribute is a subdirectory."""

    def __getattr__(self, name):
        return Prefix(os.path.join(self, name))


class AutotoolsPackage:
    def __init__(self, spec, prefix):
        self.spec, self.prefix = spec, Prefix(prefix)


class FakeSpec:
    def __init__(self, prefixes):
        self.prefixes = prefixes

    def __getitem__(self, name):
        return types.SimpleNamespace(prefix=Prefix(self.prefixes[name]))


class FakeEnv:
    def __init__(self):
        self.calls = []

    def __getattr__(self, method):
        return lambda *args, **kwargs: self.calls.append((method, args))


made = []


def make_stub(*args, **kwargs):
    made.append(args)


def install_stub():
    package = types.ModuleType("spack.package")
    names = dict(
        AutotoolsPackage=AutotoolsPackage, when=when, join_path=os.path.join,
        Executable=None, make=make_stub, maintainers=_directive("maintainers"),
        **{kind: _directive(kind) for kind in recorded})
    package.__dict__.update(names)
    package.__all__ = list(names)
    spack = types.ModuleType("spack")
    spack.package = package
    sys.modules.update({"spack": spack, "spack.package": package})


def deps():
    """(spec string, when, type) of each depends_on."""
    return [(a[0], k.get("when"), k.get("type")) for a, k in recorded["depends_on"]]


def check_recipe(recipe):
    names = {n for n in dir(recipe) if not n.startswith("_")}
    cls = getattr(recipe, "OmpiEfa", None)
    check("spack/class", cls is not None and issubclass(cls, AutotoolsPackage),
          f"no class OmpiEfa(AutotoolsPackage) in package.py (names: {sorted(names)})")
    if cls is None:
        return
    check("spack/git-and-homepage", bool(getattr(cls, "git", "")) and bool(cls.homepage),
          "homepage and git must be set")
    versions = {a[0]: k for a, k in recorded["version"]}
    check("spack/version-main", versions.get("main") == {"branch": "main"},
          f"version('main', branch='main') expected, got {versions}")
    released = [v for v, k in versions.items() if v != "main"]
    check("spack/release-versions-checksummed",
          all("sha256" in versions[v] for v in released) and
          (not released or getattr(cls, "url", None)),
          f"release versions {released} need a url and a sha256")
    variants = {a[0]: k for a, k in recorded["variant"]}
    check("spack/variant-stand_ins", variants.get("stand_ins", {}).get("default") is False,
          f"variant('stand_ins', default=False) expected, got {variants}")
    check("spack/no-cuda-variant", "cuda" not in variants,
          "the build needs no CUDA (device memory comes through Open MPI's accelerator)")
    got = deps()
    expected = [
        ("openmpi@4.1:5.0", None, None),
        ("libfabric@1.14: fabrics=efa", None, None),
        ("libfabric fabrics=tcp,udp,rxm,rxd,shm", "+stand_ins", None),
        ("hwloc@2:", None, None),
        ("pkgconfig", None, "build"),
        ("autoconf@2.69:", "@main", "build"),
        ("automake", "@main", "build"),
        ("libtool", "@main", "build"),
    ]
    for dep in expected:
        check(f"spack/depends_on {dep[0]}" + (f" when {dep[1]}" if dep[1] else ""),
              dep in got, f"not declared so; depends_on: {got}")

    spec = FakeSpec({"openmpi": "/spack/openmpi", "libfabric": "/spack/libfabric",
                     "hwloc": "/spack/hwloc"})
    pkg = cls(spec, "/spack/ompi-efa")
    args = pkg.configure_args()
    want = ["--with-ompi=/spack/openmpi", "--with-libfabric=/spack/libfabric",
            "--with-hwloc=/spack/hwloc", "--with-ompi-component-dir=/spack/ompi-efa/lib/openmpi"]
    check("spack/configure_args", args == want, f"{args} != {want}")
    want_path = "SYS_DEFAULT:/spack/ompi-efa/lib/openmpi:USER_DEFAULT"
    want_env = [("set", ("OMPI_MCA_mca_base_component_path", want_path))]
    check("spack/run-environment component path", run_env(pkg) == want_env,
          f"{run_env(pkg)} != {want_env}")
    # An external Open MPI in /usr, as Debian's: its components are in
    # /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3, not PREFIX/lib/openmpi,
    # so the value must name no directory derived from its prefix.
    debian = cls(FakeSpec({"openmpi": "/usr", "libfabric": "/usr", "hwloc": "/usr"}),
                 "/spack/ompi-efa")
    check("spack/run-environment component path, Open MPI in /usr",
          run_env(debian) == want_env, f"{run_env(debian)} != {want_env}")
    check_component_path_live(want_path)
    # spack install --test: before the install, so the unit tests alone
    # (the top-level make check needs the components installed).
    made.clear()
    pkg.check()
    check("spack/check runs the unit tests, nothing installed needed",
          made == [("-C", "tests/unit", "check")], f"{made}")


def run_env(pkg):
    env = FakeEnv()
    pkg.setup_run_environment(env)
    return env.calls


def check_component_path_live(value):
    """With the Open MPI on this machine (Debian's in /usr where it is that
    one), the run environment's component path must leave every component
    of Open MPI's own directory visible, the package's directory missing
    or empty (here an empty one)."""
    ompi_info = shutil.which("ompi_info")
    if not ompi_info:
        print("SKIP spack/run-environment keeps Open MPI's components: no ompi_info on PATH")
        return

    def components(path):
        env = {k: v for k, v in os.environ.items() if k != "OMPI_MCA_mca_base_component_path"}
        if path is not None:
            env["OMPI_MCA_mca_base_component_path"] = path
        out = subprocess.run([ompi_info, "--parsable"], env=env, capture_output=True,
                             text=True, timeout=120)
        return {line.split(":version")[0] for line in out.stdout.splitlines()
                if line.startswith("mca:")}

    pkglibdir = subprocess.run([ompi_info, "--path", "pkglibdir", "--parsable"],
                               capture_output=True, text=True, timeout=120).stdout
    pkglibdir = pkglibdir.strip().removeprefix("path:pkglibdir:")
    with tempfile.TemporaryDirectory() as own:
        default, ours = components(None), components(value.replace("/spack/ompi-efa/lib/openmpi",
                                                                   own))
    check(f"spack/run-environment keeps Open MPI's components ({pkglibdir})",
          bool(default) and default == ours,
          f"{len(default)} components by default, {len(ours)} with the recipe's path; "
          f"missing: {sorted(default - ours)[:5]}")


def check_flake8():
    # Spack's style for packages: line length 99; the star import from
    # spack.package (F403) and the names it brings (F405, F821) allowed.
    opts = ["--max-line-length=99", "--extend-ignore=F403,F405,F821", RECIPE]
    runners = [[shutil.which("flake8")]] if shutil.which("flake8") else []
    runners += [[py, "-m", "flake8"] for py in (sys.executable, "/usr/bin/python3")
                if os.path.exists(py)]
    for runner in runners:
        probe = subprocess.run(runner + ["--version"], capture_output=True, text=True)
        if probe.returncode == 0:
            out = subprocess.run(runner + opts, capture_output=True, text=True)
            check("spack/flake8", out.returncode == 0, out.stdout + out.stderr)
            return
    print("SKIP spack/flake8: flake8 is not installed (Debian: python3-flake8)")


def check_versions():
    with open(os.path.join(TOP, "configure.ac")) as f:
        ac = re.search(r"^AC_INIT\(\[[^]]*\],\s*\[([^]]+)\]", f.read(), re.M)
    with open(SPEC) as f:
        rpm = re.search(r"^Version:\s*(\S+)", f.read(), re.M)
    ac, rpm = ac and ac.group(1), rpm and rpm.group(1)
    check("rpm/version-is-AC_INIT", bool(ac) and ac == rpm,
          f"contrib/rpm/ompi-efa.spec has Version {rpm}, configure.ac's AC_INIT {ac}")


def main():
    with tempfile.TemporaryDirectory() as tmp:  # no __pycache__ in the tree
        try:
            py_compile.compile(RECIPE, cfile=os.path.join(tmp, "package.pyc"), doraise=True)
            check("spack/py_compile", True)
        except py_compile.PyCompileError as e:
            check("spack/py_compile", False, str(e))
    install_stub()
    try:
        module_spec = importlib.util.spec_from_file_location("ompi_efa_recipe", RECIPE)
        recipe = importlib.util.module_from_spec(module_spec)
        sys.dont_write_bytecode = True
        module_spec.loader.exec_module(recipe)
        check("spack/import", True)
        check_recipe(recipe)
    except Exception as e:  # the recipe failed to load or to run: say what
        check("spack/import", False, f"{type(e).__name__}: {e}")
    check_flake8()
    check_versions()
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

# Spack recipe of the Open MPI components for AWS EFA (docs/PACKAGES.md).
# tests/package/check-spack-recipe.py checks it against a stub of Spack's
# API; no real Spack has built it yet.

from spack.package import *


class OmpiEfa(AutotoolsPackage):
    """Open MPI components for the AWS Elastic Fabric Adapter: mtl_efa
    (point-to-point MPI under pml cm) and btl_efa (one-sided MPI under osc
    rdma, whole jobs under pml ob1) over one shared core on libfabric, and
    efa-mpi-info, which says what a node offers and what they would choose."""

    # Placeholders: no public repository or release URL exists yet, so the
    # only version is the branch.  A release version needs the URL of its
    # `make dist` tarball and that tarball's sha256.
    homepage = "https://github.com/example/ompi-efa"
    git = "https://github.com/example/ompi-efa.git"

    license("BSD-3-Clause")

    version("main", branch="main")

    # No CUDA variant: the components build the same with or without CUDA.
    # Device memory reaches them through Open MPI's accelerator component
    # (an Open MPI built with CUDA), and the CUDA calls they make go to the
    # driver library that component loaded, opened at run time (dlopen),
    # never linked.
    variant(
        "stand_ins",
        default=False,
        description="Also build libfabric's tcp, udp, rxm, rxd and shm providers, the "
        "stand-ins the project's test suites run on where there is no EFA device",
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("pkgconfig", type="build")
    # A checkout has no configure script: autoreconf makes it.
    with when("@main"):
        depends_on("autoconf@2.69:", type="build")
        depends_on("automake", type="build")
        depends_on("libtool", type="build")
        depends_on("m4", type="build")

    # The MTL 2.0.0 and BTL 3.1.0/3.3.0 interfaces of the 4.1 and 5.0 series.
    # The components compile against Open MPI's internal headers, which only
    # an Open MPI configured --with-devel-headers installs; Spack's openmpi
    # recipe does not pass it, so use an external Open MPI that has them
    # (packages.yaml); configure names what is missing otherwise.
    depends_on("openmpi@4.1:5.0")
    depends_on("libfabric@1.14: fabrics=efa")
    depends_on("libfabric fabrics=tcp,udp,rxm,rxd,shm", when="+stand_ins")
    depends_on("hwloc@2:")

    # The core is C++20.
    conflicts("%gcc@:11", msg="the core is C++20: g++ 12 or newer")

    def configure_args(self):
        spec = self.spec
        return [
            f"--with-ompi={spec['openmpi'].prefix}",
            f"--with-libfabric={spec['libfabric'].prefix}",
            f"--with-hwloc={spec['hwloc'].prefix}",
            # In this package's own prefix, not in Open MPI's.
            f"--with-ompi-component-dir={self.prefix.lib.openmpi}",
        ]

    def check(self):
        # spack install --test runs this before the install: the unit tests
        # of the core, which need nothing installed.  (The top-level make
        # check runs the MPI suites against the installed components.)
        make("-C", "tests/unit", "check")

    def setup_run_environment(self, env):
        # Setting mca_base_component_path replaces Open MPI's default path,
        # so the value names that default first.  SYS_DEFAULT is Open MPI's
        # own component directory as the running Open MPI resolves it (4.1
        # and 5.0 accept the keyword), right for any layout: Debian's /usr
        # (lib/x86_64-linux-gnu/openmpi/lib/openmpi3), lib64, a relocated
        # prefix.  Open MPI stops at the first directory of the list it
        # cannot open, so this package's comes before USER_DEFAULT
        # (~/.openmpi/components, the rest of the default, often absent).
        env.set(
            "OMPI_MCA_mca_base_component_path",
            ":".join(["SYS_DEFAULT", self.prefix.lib.openmpi, "USER_DEFAULT"]),
        )

    def test_efa_mpi_info(self):
        """efa-mpi-info runs and names itself"""
        efa_mpi_info = Executable(join_path(self.prefix.bin, "efa-mpi-info"))
        out = efa_mpi_info("--version", output=str, error=str)
        assert "efa-mpi-info" in out

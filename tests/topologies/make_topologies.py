#!/usr/bin/env python3
"""Write the hwloc 2.x XML topologies used by the NIC-selection unit tests.

The files are generated rather than captured from real instances so that they
are small, reproducible and carry no host-specific details.  Core counts are
shrunk; what matters for NIC selection is the shape of the tree: which CPUs
sit on which package, and under which package every PCIe switch (and so every
EFA device) hangs.

Usage: make_topologies.py [output_dir]   (default: directory of this script)

Layouts
-------
p4d.xml  (p4d.24xlarge-like)
  2 packages x 8 cores x 2 hardware threads, one NUMA node per package.
  Each package has 2 root buses, each carrying 2 A100 GPUs and 1 EFA
  device with no bridge above them, as lspci shows on the instance
  (aws/aws-ofi-nccl issue 64): each root bus is a host bridge of its own.
    package 0: buses 0x10, 0x20     package 1: buses 0x90, 0xa0
    EFA at bb:1b.0 (named rdmap<bus>s27), GPUs at bb:1c.0 and bb:1d.0.

p5.48xlarge.xml  (p5.48xlarge-like)
  2 packages x 16 cores x 2 hardware threads, one NUMA node per package.
  Each package has 4 PCIe switches at upstream bus B (package 0: B = 0x10,
  0x20, 0x30, 0x40; package 1: B = 0x90, 0xa0, 0xb0, 0xc0).  Each switch has
  5 downstream ports on bus B+1; port i leads to bus B+2+i, holding one device
  at (B+2+i):00.0: the H100 GPU on port 0, EFA devices on ports 1-4 (named
  rdmap<bus>s0).

p5en.48xlarge.xml  (p5en.48xlarge-like: 8 H200 GPUs, 16 EFA devices)
  As p5.48xlarge.xml, with 3 downstream ports per switch: the GPU on port 0,
  EFA devices on ports 1-2 (2 per GPU).

trn1.32xlarge.xml  (trn1.32xlarge-like: 16 Trainium chips, 8 EFA devices)
  As p5.48xlarge.xml, with 3 downstream ports per switch: Trainium chips
  on ports 0-1, one EFA device on port 2.  The instance documentation gives
  the counts; the grouping of chips and NICs by switch is assumed.

shared-switch.xml  (no instance: 2 GPUs and 8 EFA devices under one switch)
  2 packages x 8 cores x 2 hardware threads, one PCIe switch per package
  laid out as p5.48xlarge.xml's (package 0: B = 0x10, package 1: B =
  0x90) with 10 downstream ports: H100 GPUs on ports 0-1, EFA devices on
  ports 2-9.  Each GPU has an NVML OS device (nvml<i>) with its
  NVIDIAUUID, GPU-0a1b2c3d-0000-4000-8000-0000000000<bus>, as hwloc built
  with NVML shows it.

CPU numbering follows Linux: hardware thread t of core c on package p is PU
t * (packages * cores) + p * cores + c, so the two threads of a core are not
adjacent in the OS numbering (but they are in hwloc's logical order).
"""

import os
import sys
from xml.sax.saxutils import quoteattr

AMAZON = 0x1D0F
NVIDIA = 0x10DE
BROADCOM = 0x1000  # PCIe switch vendor; cosmetic

CLASS_ETHERNET = 0x0200
CLASS_3D = 0x0302
CLASS_PCI_BRIDGE = 0x0604

# hwloc OS device types: GPU (NVML's nvml<i>), OpenFabrics (verbs: EFA).
OSDEV_GPU = 1
OSDEV_OPENFABRICS = 3


def bitmap(bits):
    """Format a set of bit indexes the way hwloc writes bitmaps in XML:
    comma-separated 32-bit hex words, most significant word first."""
    if not bits:
        return "0x0"
    words = [0] * (max(bits) // 32 + 1)
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    return ",".join("0x%08x" % w for w in reversed(words))


class Writer:
    """Emits nested <object> elements with consistent indentation and
    unique gp_index values."""

    def __init__(self):
        self.lines = []
        self.depth = 0
        self.gp = 0

    def _attrs(self, attrs):
        self.gp += 1
        attrs = dict(attrs)
        attrs["gp_index"] = str(self.gp)
        return " ".join("%s=%s" % (k, quoteattr(v)) for k, v in attrs.items())

    def open(self, obj_type, **attrs):
        self.lines.append("  " * self.depth + '<object type="%s" %s>' % (obj_type, self._attrs(attrs)))
        self.depth += 1

    def close(self):
        self.depth -= 1
        self.lines.append("  " * self.depth + "</object>")

    def leaf(self, obj_type, **attrs):
        self.lines.append("  " * self.depth + '<object type="%s" %s/>' % (obj_type, self._attrs(attrs)))

    def info(self, name, value):
        self.lines.append("  " * self.depth + "<info name=%s value=%s/>" % (quoteattr(name), quoteattr(value)))

    def raw(self, text):
        self.lines.append("  " * self.depth + text)


def cpu_attrs(cpus, nodes, root=False):
    attrs = {
        "cpuset": bitmap(cpus),
        "complete_cpuset": bitmap(cpus),
    }
    if root:
        attrs["allowed_cpuset"] = bitmap(cpus)
    attrs["nodeset"] = bitmap(nodes)
    attrs["complete_nodeset"] = bitmap(nodes)
    if root:
        attrs["allowed_nodeset"] = bitmap(nodes)
    return attrs


def pci_type(cls, vendor, device, rev=0):
    # "class [vendor:device] [subvendor:subdevice] revision"
    return "%04x [%04x:%04x] [%04x:%04x] %02x" % (cls, vendor, device, vendor, device, rev)


def busid(bus, dev=0, func=0):
    return "0000:%02x:%02x.%x" % (bus, dev, func)


def bus_range(first, last):
    return "0000:[%02x-%02x]" % (first, last)


def pcidev(w, bus, dev, cls, vendor, device, osdev_name=None, osdev_type=OSDEV_OPENFABRICS,
           infos=()):
    attrs = {"pci_busid": busid(bus, dev), "pci_type": pci_type(cls, vendor, device),
             "pci_link_speed": "0.000000"}
    if osdev_name is None:
        w.leaf("PCIDev", **attrs)
        return
    w.open("PCIDev", **attrs)
    if infos:
        w.open("OSDev", name=osdev_name, osdev_type=str(osdev_type))
        for name, value in infos:
            w.info(name, value)
        w.close()
    else:
        w.leaf("OSDev", name=osdev_name, osdev_type=str(osdev_type))
    w.close()


def open_host_bridge(w, first_bus, last_bus):
    w.open("Bridge", bridge_type="0-1", depth="0", bridge_pci=bus_range(first_bus, last_bus))


def open_pci_bridge(w, at_bus, at_dev, secondary, subordinate, depth):
    w.open("Bridge", pci_busid=busid(at_bus, at_dev),
           pci_type=pci_type(CLASS_PCI_BRIDGE, BROADCOM, 0xC010),
           pci_link_speed="0.000000", bridge_type="1-1", depth=str(depth),
           bridge_pci=bus_range(secondary, subordinate))


def machine(name, packages, cores, io_for_package):
    """Build a whole machine; io_for_package(writer, package) adds the
    package's PCI hierarchy."""
    threads = 2
    ncpu = packages * cores * threads
    w = Writer()
    w.raw('<?xml version="1.0" encoding="UTF-8"?>')
    w.raw('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.raw('<topology version="2.0">')
    w.depth += 1
    w.open("Machine", os_index="0", **cpu_attrs(range(ncpu), range(packages), root=True))
    w.info("OSName", "Linux")
    w.info("Architecture", "x86_64")
    w.info("HostName", name)
    w.info("GeneratedBy", "tests/topologies/make_topologies.py")
    for p in range(packages):
        def pu(c, t):
            return t * packages * cores + p * cores + c

        pkg_cpus = sorted(pu(c, t) for c in range(cores) for t in range(threads))
        w.open("Package", os_index=str(p), **cpu_attrs(pkg_cpus, [p]))
        w.info("CPUVendor", "GenuineIntel")
        # NUMA nodes are memory children of the package in hwloc 2.x; I/O
        # cannot hang below them, so PCIe sits under the package itself.
        w.open("NUMANode", os_index=str(p), local_memory=str(512 << 30),
               **cpu_attrs(pkg_cpus, [p]))
        w.raw('<page_type size="4096" count="%d"/>' % ((512 << 30) // 4096))
        w.close()
        for c in range(cores):
            w.open("Core", os_index=str(c), **cpu_attrs([pu(c, t) for t in range(threads)], [p]))
            for t in range(threads):
                w.leaf("PU", os_index=str(pu(c, t)), **cpu_attrs([pu(c, t)], [p]))
            w.close()
        io_for_package(w, p)
        w.close()
    w.close()
    w.depth -= 1
    w.raw("</topology>")
    return "\n".join(w.lines) + "\n"


def p4d_io(w, package):
    # No root port or switch: the devices sit on the root bus, which hwloc
    # shows as a host bridge of its own.
    for bus in ((0x10, 0x20), (0x90, 0xA0))[package]:
        open_host_bridge(w, bus, bus)
        pcidev(w, bus, 0x1B, CLASS_ETHERNET, AMAZON, 0xEFA1, "rdmap%ds27" % bus)
        pcidev(w, bus, 0x1C, CLASS_3D, NVIDIA, 0x20B0)
        pcidev(w, bus, 0x1D, CLASS_3D, NVIDIA, 0x20B0)
        w.close()


def p5_io(w, package):
    for j in range(4):
        up = (0x10, 0x90)[package] + 0x10 * j
        last = up + 2 + 4
        open_host_bridge(w, up, last)
        open_pci_bridge(w, up, 0, up + 1, last, depth=1)
        for port in range(5):
            bus = up + 2 + port
            open_pci_bridge(w, up + 1, port, bus, bus, depth=2)
            if port == 0:
                pcidev(w, bus, 0, CLASS_3D, NVIDIA, 0x2330)
            else:
                pcidev(w, bus, 0, CLASS_ETHERNET, AMAZON, 0xEFA2, "rdmap%ds0" % bus)
            w.close()
        w.close()
        w.close()


def switched_io(accelerator, nics_per_switch, accelerators_per_switch=1, efa_device=0xEFA3,
                switches=4, nvml=False):
    """`switches` PCIe switches per package laid out as p5_io's: upstream
    bus B (package 0: 0x10, 0x20, ..., package 1: 0x90, 0xa0, ...), one
    downstream port per device on bus B+1, device i alone on bus B+2+i; the
    accelerators first, then the EFA devices (named rdmap<bus>s0).  nvml:
    each accelerator with an NVML OS device and its NVIDIAUUID."""
    cls, vendor, device = accelerator
    ports = accelerators_per_switch + nics_per_switch
    gpus = []

    def accelerator_at(w, bus):
        if not nvml:
            pcidev(w, bus, 0, cls, vendor, device)
            return
        uuid = "GPU-0a1b2c3d-0000-4000-8000-0000000000%02x" % bus
        pcidev(w, bus, 0, cls, vendor, device, "nvml%d" % len(gpus), OSDEV_GPU,
               [("Backend", "NVML"), ("NVIDIAUUID", uuid)])
        gpus.append(bus)

    def io(w, package):
        for j in range(switches):
            up = (0x10, 0x90)[package] + 0x10 * j
            last = up + 2 + ports - 1
            open_host_bridge(w, up, last)
            open_pci_bridge(w, up, 0, up + 1, last, depth=1)
            for port in range(ports):
                bus = up + 2 + port
                open_pci_bridge(w, up + 1, port, bus, bus, depth=2)
                if port < accelerators_per_switch:
                    accelerator_at(w, bus)
                else:
                    pcidev(w, bus, 0, CLASS_ETHERNET, AMAZON, efa_device, "rdmap%ds0" % bus)
                w.close()
            w.close()
            w.close()

    return io


CLASS_ACCELERATOR = 0x1200  # processing accelerator (Trainium)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    files = {
        "p4d.xml": machine("p4d-synthetic", 2, 8, p4d_io),
        "p5.48xlarge.xml": machine("p5-synthetic", 2, 16, p5_io),
        "p5en.48xlarge.xml": machine("p5en-synthetic", 2, 16,
                                     switched_io((CLASS_3D, NVIDIA, 0x2335), 2)),
        "trn1.32xlarge.xml": machine("trn1-synthetic", 2, 16,
                                     switched_io((CLASS_ACCELERATOR, AMAZON, 0x7164), 1,
                                                 accelerators_per_switch=2, efa_device=0xEFA1)),
        "shared-switch.xml": machine("shared-switch-synthetic", 2, 8,
                                     switched_io((CLASS_3D, NVIDIA, 0x2330), 8,
                                                 accelerators_per_switch=2, switches=1,
                                                 nvml=True)),
    }
    for name, text in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()

// efa-mpi-info's command line (info_options.hpp): the usage, the
// components' MCA parameters read as the defaults, and the options over them.
#include "info_options.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "efa_params.hpp"
#include "info_params.hpp"

namespace efa::info {

// The components' release this command was built with (configure's AC_INIT).
#ifndef EFA_RELEASE_MAJOR
#error "EFA_RELEASE_MAJOR is not defined: configure passes it (EFA_RELEASE_CPPFLAGS)"
#endif
#define EFA_STR2(x) #x
#define EFA_STR(x) EFA_STR2(x)
const char *const kRelease =
    EFA_STR(EFA_RELEASE_MAJOR) "." EFA_STR(EFA_RELEASE_MINOR) "." EFA_STR(EFA_RELEASE_PATCH);

namespace {

[[noreturn]] void usage(int code) {
    std::fprintf(
        code ? stderr : stdout,
        "usage: efa-mpi-info [--provider LIST | --provider-exclude LIST]\n"
        "                    [--direct-mode | --no-direct-mode]\n"
        "                    [--nic-include LIST | --nic-exclude LIST]\n"
        "                    [--local-size N] [--map-by slot|core|package]\n"
        "                    [--nics-per-proc N] [--gpu GPU]\n"
        "                    [--topology FILE.xml]\n"
        "                    [--one-node] [--json]\n"
        "       efa-mpi-info --version | --help\n"
        "  --provider, --provider-exclude, --direct-mode, --nic-include, --nic-exclude\n"
        "                 as common_efa_provider_include / _exclude, _force_direct_mode,\n"
        "                 _nic_include / _exclude (default: their MCA parameters, by their\n"
        "                 common_efa_, mtl_efa_ or btl_efa_ names; else efa); the two of\n"
        "                 a pair cannot be given together; --no-direct-mode: _force_direct_mode\n"
        "                 off whatever the parameters say\n"
        "  --local-size   processes per node for the NIC sets (1 to 1024, default 1),\n"
        "                 each bound to an equal share of the cores (by default)\n"
        "  --map-by       slot (default: the shares above, in order); core: process r\n"
        "                 bound to core r (Open MPI's default for 1 or 2 processes); or\n"
        "                 package: process r bound to the whole package r mod P, P the\n"
        "                 packages (Open MPI 4.1's default above 2 processes; 5.0: the\n"
        "                 NUMA domain); every process's binding known to all, as mpirun\n"
        "                 registers them\n"
        "  --nics-per-proc  as common_efa_nics_per_proc: at most N NICs in each set\n"
        "                 (0 to 64; default its MCA parameter, else 0: the whole share)\n"
        "  --gpu          as common_efa_gpu: auto (process r of N takes accelerator r\n"
        "                 where N is their number and every process is bound near\n"
        "                 its own), none, an index or a PCI address;\n"
        "                 a process with a GPU takes the NICs of its PCIe switch\n"
        "                 (default: its MCA parameter, e.g. OMPI_MCA_common_efa_gpu,\n"
        "                 else auto)\n"
        "  --topology     the NIC sets on this hwloc XML and its EFA devices instead\n"
        "                 (the NIC lists and --gpu then apply to its devices; this\n"
        "                 machine's sections are for reference only)\n"
        "  --one-node     for a job within this node (default: one spanning nodes, which\n"
        "                 needs FI_REMOTE_COMM: shm does not qualify)\n"
        "  --json         one JSON object instead of text\n"
        "  --version      the components' release\n"
        "  --help, -h     this text, on standard output\n"
        "MCA parameters are read as Open MPI 4.1 reads them: the OMPI_MCA_ environment\n"
        "over ~/.openmpi/mca-params.conf over Open MPI's openmpi-mca-params.conf (or\n"
        "the files of OMPI_MCA_mca_base_param_files; name = value lines, # comments);\n"
        "the report says where each value came from.  Besides those above:\n"
        "common_efa_stripe_min; hmem_vmm and provider_cuda_calls (auto, on or off);\n"
        "force_efa_options and dmabuf (booleans: an integer, true|t|yes|y|enabled or\n"
        "false|f|no|n|disabled); the core's num_contexts, tx_size, rx_size,\n"
        "mr_cache_size, progress_batch, rnr_retry, peer_timeout, rail_retry,\n"
        "net_poll_interval(_max), direct_mode_mtu and force_emulated, checked as the\n"
        "components check them.  Integers as Open MPI reads them: decimal, 0x hex or\n"
        "0 octal, with an optional k, m or g (1024, 1024^2, 1024^3).  Not read: the\n"
        "override file, mpirun's --mca and aggregate parameter sets.\n"
        "Exit status: 0, the components would run here (with --topology: the NIC sets\n"
        "of the recorded topology were found, whatever this machine offers); 3, they\n"
        "would not (the reasons are printed); 1, the topology cannot be read,\n"
        "holds no EFA device, or the NIC lists do not fit its devices; 2, bad\n"
        "arguments or parameters (a --gpu that names no accelerator included), said\n"
        "with no report.\n");
    std::exit(code);
}

// The components' MCA parameters from the environment and the parameter
// files (efa::info::ParamSources), each value taken kept in the options'
// settings with where it came from.
class Params {
  public:
    explicit Params(Options *o) : src_(efa::info::ParamSources::load()), o_(o) {
        o_->param_files = src_.files();
    }
    std::string text(const char *name) {
        const efa::info::ParamValue v = src_.get(name);
        if (!v.value.empty()) {
            o_->settings.push_back({std::string("common_efa_") + name, v.value, v.source, ""});
        }
        return v.value;
    }
    // Open MPI refuses a boolean it cannot read, so the tool does too.
    bool boolean(const char *name, bool default_value) {
        const std::string v = text(name);
        bool b = default_value;
        if (!v.empty() && !efa::info::parse_mca_bool(v, &b)) {
            std::fprintf(
                stderr, "efa-mpi-info: common_efa_%s must be a boolean (%s), not '%s' (from %s)\n",
                name, efa::info::kMcaBoolValues, v.c_str(), o_->settings.back().source.c_str());
            std::exit(2);
        }
        return b;
    }
    // Open MPI refuses an integer it cannot read (or beyond an int); text
    // it would read as 0 is refused here too (parse_mca_int).
    void integer(const char *name, int *into) {
        const std::string v = text(name);
        if (!v.empty() && !efa::info::parse_mca_int(v, into)) {
            std::fprintf(stderr, "efa-mpi-info: common_efa_%s must be %s, not '%s' (from %s)\n",
                         name, efa::info::kMcaIntForms, v.c_str(),
                         o_->settings.back().source.c_str());
            std::exit(2);
        }
    }
    // An option given stands for the parameter: its value is not used.
    void overridden(const char *name, const std::string &option) {
        for (Setting &s : o_->settings) {
            if (s.name == std::string("common_efa_") + name) {
                s.overridden_by = option;
            }
        }
    }

  private:
    efa::info::ParamSources src_;
    Options *o_;
};

// Two options that stand for exclusive parameters (the synopsis' "|").
void refuse_pair(bool both, const char *a, const char *b) {
    if (both) {
        std::fprintf(stderr, "efa-mpi-info: %s and %s cannot be given together\n", a, b);
        usage(2);
    }
}

// --help and --version answer whatever the parameters hold (a bad value
// in a parameter file is refused only where the report needs it).
void answer_help_or_version(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--version") {
            std::printf("efa-mpi-info (ompi-efa) %s\n", kRelease);
            std::exit(0);
        }
        if (a == "--help" || a == "-h") {
            usage(0);
        }
    }
}

} // namespace

Options parse_options(int argc, char **argv) {
    answer_help_or_version(argc, argv);
    Options o;
    Params params(&o);
    o.provider = params.text("provider_include");
    o.provider_exclude = params.text("provider_exclude");
    o.nic_include = params.text("nic_include");
    o.nic_exclude = params.text("nic_exclude");
    o.direct_mode = params.boolean("force_direct_mode", false);
    auto number = [](const std::string &opt, const std::string &v, long lo, long hi) {
        char *end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < lo || n > hi) {
            std::fprintf(stderr, "efa-mpi-info: %s must be %ld to %ld, not '%s'\n", opt.c_str(), lo,
                         hi, v.c_str());
            usage(2);
        }
        return static_cast<int>(n);
    };
    // auto, on or off, as the glue's table allows; anything else is an error
    auto switch_value = [](const char *name, const std::string &v) {
        if (v.empty() || v == "auto") {
            return int(EFA_SWITCH_AUTO);
        }
        if (v == "on") {
            return int(EFA_SWITCH_ON);
        }
        if (v == "off") {
            return int(EFA_SWITCH_OFF);
        }
        std::fprintf(stderr, "efa-mpi-info: common_efa_%s must be auto, on or off, not '%s'\n",
                     name, v.c_str());
        usage(2);
    };
    o.hmem_vmm = switch_value("hmem_vmm", params.text("hmem_vmm"));
    o.provider_cuda_calls = switch_value("provider_cuda_calls", params.text("provider_cuda_calls"));
    o.force_efa_options = params.boolean("force_efa_options", false);
    o.dmabuf = params.boolean("dmabuf", true);
    params.integer("num_contexts", &o.num_contexts);
    params.integer("tx_size", &o.tx_size);
    params.integer("rx_size", &o.rx_size);
    params.integer("mr_cache_size", &o.mr_cache_size);
    params.integer("progress_batch", &o.progress_batch);
    params.integer("rnr_retry", &o.rnr_retry);
    params.integer("peer_timeout", &o.peer_timeout);
    params.integer("rail_retry", &o.rail_retry);
    params.integer("net_poll_interval", &o.net_poll_interval_us);
    params.integer("net_poll_interval_max", &o.net_poll_interval_max_us);
    params.integer("direct_mode_mtu", &o.direct_mode_mtu);
    o.force_emulated = params.text("force_emulated");
    bool nics_given = false, gpu_given = false, direct_on = false, direct_off = false;
    // the options given, by the parameter each stands for
    std::map<std::string, std::string> given;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "efa-mpi-info: %s needs a value\n", a.c_str());
                usage(2);
            }
            return argv[++i];
        };
        if (a == "--provider") {
            o.provider = value();
            given["provider_include"] = a;
        } else if (a == "--provider-exclude") {
            o.provider_exclude = value();
            given["provider_exclude"] = a;
        } else if (a == "--direct-mode" || a == "--no-direct-mode") {
            o.direct_mode = a == "--direct-mode";
            (o.direct_mode ? direct_on : direct_off) = true;
            given["force_direct_mode"] = a;
        } else if (a == "--nic-include") {
            o.nic_include = value();
            given["nic_include"] = a;
        } else if (a == "--nic-exclude") {
            o.nic_exclude = value();
            given["nic_exclude"] = a;
        } else if (a == "--local-size") {
            o.local_size = number(a, value(), 1, 1024);
        } else if (a == "--map-by") {
            const std::string how = value();
            if (how != "slot" && how != "package" && how != "core") {
                std::fprintf(stderr,
                             "efa-mpi-info: --map-by takes slot, core or package, not '%s'\n",
                             how.c_str());
                std::exit(2);
            }
            o.map_by_package = how == "package";
            o.map_by_core = how == "core";
        } else if (a == "--nics-per-proc") {
            o.nics_per_proc = number(a, value(), 0, efa::ParamLimits::kMaxNicsPerProc);
            nics_given = true;
        } else if (a == "--gpu") {
            o.gpu = value();
            gpu_given = true;
        } else if (a == "--topology") {
            o.topology = value();
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--one-node") {
            o.one_node = true;
        } else if (a == "--version") {
            std::printf("efa-mpi-info (ompi-efa) %s\n", kRelease);
            std::exit(0);
        } else if (a == "--help" || a == "-h") {
            usage(0);
        } else {
            std::fprintf(stderr, "efa-mpi-info: unknown argument '%s'\n", a.c_str());
            usage(2);
        }
    }
    refuse_pair(given.count("provider_include") && given.count("provider_exclude"), "--provider",
                "--provider-exclude");
    refuse_pair(given.count("nic_include") && given.count("nic_exclude"), "--nic-include",
                "--nic-exclude");
    refuse_pair(direct_on && direct_off, "--direct-mode", "--no-direct-mode");
    for (const auto &[name, option] : given) {
        params.overridden(name.c_str(), option);
    }
    // The parameter's value only where the option did not say (and only
    // then is a bad one an error).
    if (const std::string v = gpu_given ? "" : params.text("gpu"); !v.empty()) {
        o.gpu = v;
    }
    if (!nics_given) {
        params.integer("nics_per_proc", &o.nics_per_proc);
    }
    params.integer("stripe_min", &o.stripe_min);
    return o;
}

// (info_options.hpp)
efa_core_params_t core_params(const Options &o) {
    efa_core_params_t p{};
    p.provider_include = o.provider.c_str();
    p.provider_exclude = o.provider_exclude.c_str();
    p.nic_include = o.topology.empty() ? o.nic_include.c_str() : "";
    p.gpu = o.topology.empty() ? o.gpu.c_str() : "auto";
    p.nic_exclude = o.topology.empty() ? o.nic_exclude.c_str() : "";
    p.num_contexts = o.num_contexts;
    p.tx_size = o.tx_size;
    p.rx_size = o.rx_size;
    p.mr_cache_size = o.mr_cache_size;
    p.progress_batch = o.progress_batch;
    p.rnr_retry = o.rnr_retry;
    p.force_emulated = o.force_emulated.c_str();
    p.need_remote_comm = !o.one_node;
    p.force_direct_mode = o.direct_mode;
    p.hmem_vmm = o.hmem_vmm;
    p.provider_cuda_calls = o.provider_cuda_calls;
    p.force_efa_options = o.force_efa_options;
    p.peer_timeout = o.peer_timeout;
    p.rail_retry = o.rail_retry;
    p.net_poll_interval_us = o.net_poll_interval_us;
    p.net_poll_interval_max_us = o.net_poll_interval_max_us;
    p.direct_mode_mtu = o.direct_mode_mtu;
    p.nics_per_proc = o.nics_per_proc;
    p.stripe_min = o.stripe_min;
    p.dmabuf = o.dmabuf;
    p.local_rank = 0;
    p.local_size = o.local_size;
    return p;
}

// (the GPU: --gpu's own error, with the topology it names)
bool params_fit(const Options &o, efa_core_params_t p) {
    p.gpu = "auto";
    bool fit = true;
    for (const efa::ParamProblem &x : efa::validate_params(p)) {
        std::string from;
        for (const Setting &s : o.settings) {
            if (s.name == "common_efa_" + x.name) {
                from = " (from " + s.source + ")";
            }
        }
        std::fprintf(stderr, "efa-mpi-info: common_efa_%s must be %s, not '%s'%s\n", x.name.c_str(),
                     x.allowed.c_str(), x.value.c_str(), from.c_str());
        fit = false;
    }
    return fit;
}

} // namespace efa::info

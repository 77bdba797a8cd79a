// Provider selection: ask libfabric for reliable-datagram endpoints with
// what the components need, keep the providers the filter admits, and
// offer the NICs (domains) of the first admitted fabric as candidates.
#pragma once

#include <string>
#include <vector>

#include "efa_core.h"
#include "fi_handles.hpp"
#include "provider_filter.hpp"

namespace efa {

struct Reporter {
    efa_core_show_help_fn show_help = nullptr;
    efa_core_verbose_fn verbose = nullptr;
    int verbosity = 0;
    bool explain = true; // show_help on failures (false: only verbose output)

    void help(const char *topic, const std::string &a1 = "", const std::string &a2 = "",
              const std::string &a3 = "") const;
    void say(int level, const std::string &msg) const;
};

struct Selection {
    InfoPtr list;                // what fi_getinfo returned (owns the entries below)
    std::vector<fi_info *> nics; // one admitted entry per domain, same fabric
    // Socket-addressed providers (the stand-ins: a fabric per subnet): the
    // interfaces on other subnets, one entry per domain, opened as extra
    // rails beside the set (never a process's first NIC: peers' first NICs
    // must share a subnet).
    std::vector<fi_info *> extra_nics;
    uint64_t caps = 0;        // the capability set that was granted
    bool mr_local = false;    // FI_MR_LOCAL in effect (required or forced)
    bool source = false;      // FI_SOURCE asked for and granted (fi_cq_readfrom says who sent)
    bool hmem = false;        // FI_HMEM asked for and granted (device buffers registered)
    uint32_t api_version = 0; // what fi_getinfo was asked with
};

// The oldest libfabric API the code needs (FI_OPT_* it uses, fi_context2,
// FI_MR_ENDPOINT): 1.14.  Below 1.18 the efa provider uses the device's RDMA
// only on some newer hardware, so a newer API is asked for where both the
// headers we were built with and the library loaded at run time have it.
constexpr uint32_t kMinApiVersion = FI_VERSION(1, 14);
// min(header, library), never below kMinApiVersion.
uint32_t negotiate_api_version(uint32_t header, uint32_t library);
// For this build and the library loaded now.
uint32_t api_version();
std::string version_string(uint32_t v); // "1.17"

// Fabrics the components take: every one but efa's "efa-direct" (libfabric
// 2.x), which offers no tag matching or ordering, unless the direct mode
// (force_direct_mode: untagged messages only) is on; *why says so when not.
bool prefer_fabric(const fi_info *info, bool direct_mode, std::string *why);

// Returns 0, -FI_EINVAL (bad lists/params: reported), or -FI_ENODATA (no
// provider: reported when rep.explain).
int select_provider(const efa_core_params_t &params, const Reporter &rep, Selection *out);

// The fi_getinfo hints for one capability set (caps) and memory mode.
InfoPtr make_hints(const efa_core_params_t &p, uint64_t caps, bool mr_local, bool hmem);

// The largest message in the direct mode: direct_mode_mtu (its default
// where 0), never more than the endpoint's max_msg_size nor, on
// efa-direct, the device's MTU (its link MTU: once efa-direct grants
// FI_RMA its max_msg_size is the RDMA limit).
size_t direct_max_msg_size(const fi_info *ni, int direct_mode_mtu);

// Why a provider's FI_SOURCE cannot be believed, or nullptr when it can:
// udp;ofi_rxd (libfabric 1.17) reports its own index of the sending peer,
// which is the AV entry only while both were inserted in the same order
// (a process that inserted itself first saw its peer's messages "come
// from" itself).  The sender check is then off (efa_core_source_ok).
const char *source_unreliable(const char *prov_name);

// Is this NIC a loopback interface (127/8, ::1, or "lo")?  Such a NIC is
// left out of the set unless a NIC list names it (named_in: one item of
// the comma-separated list equals name).
bool is_loopback(const fi_info *info);
bool named_in(const char *list, const char *name);

// Names of every provider libfabric knows on this machine (any endpoint type).
std::vector<std::string> known_provider_names();

} // namespace efa

// The few lines a user on EFA reads first (verbose 1): what libfabric, API,
// provider and fabric are in use, the NIC of each rank and why, MR mode,
// device RDMA, the provider's shared memory, and what each component chose
// (on-node path, single copy, one-sided paths).  The core writes its part
// when it opens, the components add theirs, and the first add_procs says it
// all once: node-wide lines from local rank 0, the NIC line from every rank.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "provider_select.hpp"

struct efa_core;

namespace efa {

class CoreReport {
  public:
    void add_core_lines(const efa_core &core);
    // A component's line ("mtl_efa: on-node channel: ...").  Replaces an
    // earlier line of the same component on the same topic (note_topic),
    // which says a choice revised; lines on other topics stay.
    void note(const std::string &who, const std::string &text);
    // Says the report once per process (later calls do nothing).
    void say_once(const Reporter &rep, bool node_leader);

  private:
    std::mutex lock_;
    std::vector<std::string> node_lines_;
    std::string rank_line_;
    struct Note {
        std::string who, topic, text;
    };
    std::vector<Note> notes_;
    bool said_ = false;
};

// What a report line is about: its lead before ": " ("matching",
// "on-node channel", "device buffers"), or the whole line where it has
// none (a line without a lead is replaced only by itself).
std::string note_topic(const std::string &text);

// "FI_MR_LOCAL|FI_MR_VIRT_ADDR|..." for a domain's mr_mode.
std::string mr_mode_string(uint64_t mode);
// "by the device", "emulated by the provider", "unknown"
const char *rma_by_string(efa_rma_by_t by);

} // namespace efa

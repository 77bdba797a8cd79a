// Who sent it: the check of a message's claimed sender against the source
// address the provider reports (efa_core_source_ok in efa_core.h).
//
// Every owner's messages name their sender themselves (btl_efa's header,
// the matching engine's vpid, a probe's or withdrawal's id), and the owner
// acts on that name: credits, ordering streams, a message withdrawn on the
// sender's behalf.  Where the provider grants FI_SOURCE, each receive's
// completion carries the AV entry of the endpoint it came from; the owner
// compares it with the address it knows for the claimed process.  That
// compare is all the hot path pays.  Here is what follows when it fails:
// the sender may be the claimed process on another of its contexts (the
// address table says whose entry the source is), and otherwise the message
// is forged or misrouted: counted, said once, and dropped by the owner.
#include <string>

#include "core.hpp"

namespace {

// "rank 2 on host-3 (AV entry 5)", or the entry alone for a process that
// is not (or no longer) a peer here.  Under peers_lock.
std::string describe(const efa_core *core, fi_addr_t addr, const efa_peer_t *owner) {
    std::string entry = "AV entry " + std::to_string(static_cast<unsigned long long>(addr));
    if (!owner) {
        return entry + ", not a peer of this process";
    }
    auto it = core->peer_names.find(const_cast<efa_peer_t *>(owner));
    return it == core->peer_names.end() ? entry : it->second + " (" + entry + ")";
}

} // namespace

namespace efa {

// A receive came from an address not in the AV although the provider
// reports sources: its claim cannot be checked.  Out of line: the
// progress loop calls it only then.
__attribute__((noinline)) void source_unchecked(efa_core *core) {
    if (core->source_unchecked.fetch_add(1, std::memory_order_relaxed) == 0) {
        core->rep.say(1, "sender check: a message came from an address this process has not "
                         "inserted in its address vector; its claimed sender cannot be checked "
                         "(said once; efa_core_source_unchecked counts them)");
    }
}

} // namespace efa

extern "C" {

bool efa_core_source_differs(efa_core_t *core, fi_addr_t src, fi_addr_t claimed, const char *what) {
    std::string from, named;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        auto s = core->addr_owner.find(src);
        auto c = core->addr_owner.find(claimed);
        const efa_peer_t *src_owner = s == core->addr_owner.end() ? nullptr : s->second;
        const efa_peer_t *claimed_owner = c == core->addr_owner.end() ? nullptr : c->second;
        if (!claimed_owner || src_owner == claimed_owner) {
            // Another context of the claimed process; or a claimed address
            // that is no peer's entry (released meanwhile): nothing to
            // compare with.
            return false;
        }
        from = describe(core, src, src_owner);
        named = describe(core, claimed, claimed_owner);
    }
    core->source_forged.fetch_add(1, std::memory_order_relaxed);
    if (!core->source_forged_said.exchange(true, std::memory_order_relaxed)) {
        core->rep.help("forged-sender", what ? what : "a message", named, from);
    } else {
        core->rep.say(10, std::string("sender check: ") + (what ? what : "a message") + " naming " +
                              named + " came from " + from + ": dropped");
    }
    return true;
}

uint64_t efa_core_source_forged(const efa_core_t *core) {
    return core->source_forged.load(std::memory_order_relaxed);
}

uint64_t efa_core_source_unchecked(const efa_core_t *core) {
    return core->source_unchecked.load(std::memory_order_relaxed);
}

} // extern "C"

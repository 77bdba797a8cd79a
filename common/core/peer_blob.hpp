// The modex blob a process publishes for its peers: a small header, the
// endpoint names of every context of every NIC it opened, then one fabric
// id per NIC.  The bytes come from another process (through the runtime's
// key-value store), so reading them is a pure function of its own, which
// tests/fuzz/fuzz_peer_blob.cpp feeds with arbitrary bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace efa {

struct BlobHeader {
    uint32_t magic;
    uint16_t version;
    uint16_t num_nics;
    uint16_t num_contexts;
    uint16_t addr_len;
};
constexpr uint32_t kBlobMagic = 0xefa0c0de;
constexpr uint16_t kBlobVersion = 2;
// The most NICs a process opens (its rails): aws-ofi-nccl's limit, and
// the width of the registration handle's key array (efa_rma.h).
constexpr int kMaxRails = 4;

// Which network a NIC is on, as a number both sides compute alike: a hash
// of the libfabric fabric name.  On EFA every NIC is on the one "efa"
// fabric and reaches every NIC of the peer; the tcp and udp stand-ins name
// a fabric after the interface's subnet, and only NICs of one subnet reach
// each other.
uint32_t fabric_id(const char *fabric_name);

// This process's blob: names holds num_nics * num_contexts names of
// addr_len bytes, NIC by NIC; fabric_ids one per NIC.
std::vector<uint8_t> make_peer_blob(uint16_t num_contexts, uint16_t addr_len,
                                    const std::vector<uint8_t> &names,
                                    const std::vector<uint32_t> &fabric_ids);
// One NIC on fabric 0 (tests).
std::vector<uint8_t> make_peer_blob(uint16_t num_contexts, uint16_t addr_len,
                                    const std::vector<uint8_t> &names);

struct PeerBlob {
    BlobHeader header{};              // as received (zero where the blob is too short)
    const uint8_t *names = nullptr;   // num_nics * num_contexts names of addr_len bytes
    std::vector<uint32_t> fabric_ids; // one per NIC
    // The names of NIC n, context 0.
    const uint8_t *nic_names(int n) const {
        return names + static_cast<size_t>(n) * header.num_contexts * header.addr_len;
    }
};

enum class PeerBlobStatus {
    kOk,
    kMalformed,       // not a blob of ours, or too short for what it announces
    kContextMismatch, // well formed, but the peer runs another number of contexts
};

// Checks a peer's blob against this process's address length and context
// count.  On kOk, out->names points into 'blob'; otherwise *why (optional)
// says what was wrong, for the message that makes the peer unreachable.
PeerBlobStatus parse_peer_blob(const void *blob, size_t len, size_t our_addr_len,
                               int our_num_contexts, PeerBlob *out, std::string *why);

// Rail pairing: for each of our NICs (by index), the peer's NIC it talks
// to, or -1 where the peer has none on that NIC's fabric.  Our NIC i takes
// the (k mod m)-th of the peer's m NICs on its fabric, k being how many of
// our NICs before i share that fabric: on one fabric our NIC i meets the
// peer's NIC i mod R, so both ends of a job spread over every NIC, and on
// the stand-ins each interface meets the peer's interface on its subnet.
std::vector<int> pair_rails(const std::vector<uint32_t> &ours, const std::vector<uint32_t> &peers);

} // namespace efa

// The modex blob a process publishes for its peers: a small header, then
// the endpoint names of every context.  The bytes come from another process
// (through the runtime's key-value store), so reading them is a pure
// function of its own, which tests/fuzz/fuzz_peer_blob.cpp feeds with
// arbitrary bytes.
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
constexpr uint16_t kBlobVersion = 1;

// This process's blob: names holds num_contexts names of addr_len bytes.
std::vector<uint8_t> make_peer_blob(uint16_t num_contexts, uint16_t addr_len,
                                    const std::vector<uint8_t> &names);

struct PeerBlob {
    BlobHeader header{};            // as received (zero where the blob is too short)
    const uint8_t *names = nullptr; // num_contexts names of addr_len bytes, inside the blob
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

} // namespace efa

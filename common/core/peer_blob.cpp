#include "peer_blob.hpp"

#include <cstdio>
#include <cstring>

namespace efa {

std::vector<uint8_t> make_peer_blob(uint16_t num_contexts, uint16_t addr_len,
                                    const std::vector<uint8_t> &names) {
    BlobHeader h{kBlobMagic, kBlobVersion, 1, num_contexts, addr_len};
    // One allocation, two copies (vector::insert here draws a false
    // -Warray-bounds from g++ 12).
    std::vector<uint8_t> blob(sizeof(h) + names.size());
    memcpy(blob.data(), &h, sizeof(h));
    if (!names.empty()) {
        memcpy(blob.data() + sizeof(h), names.data(), names.size());
    }
    return blob;
}

PeerBlobStatus parse_peer_blob(const void *blob, size_t len, size_t our_addr_len,
                               int our_num_contexts, PeerBlob *out, std::string *why) {
    BlobHeader &h = out->header;
    h = BlobHeader{};
    out->names = nullptr;
    if (blob && len >= sizeof(h)) {
        memcpy(&h, blob, sizeof(h));
    }
    // The names are read as our_addr_len bytes each: a peer announcing
    // another length (another provider) or fewer bytes than it announces
    // would have the address vector read past the blob.
    if (!blob || len < sizeof(h) || h.magic != kBlobMagic || h.version != kBlobVersion ||
        h.num_nics < 1 || h.addr_len != our_addr_len ||
        len < sizeof(h) + static_cast<size_t>(h.num_contexts) * h.addr_len) {
        if (why) {
            char text[160];
            snprintf(text, sizeof(text),
                     "a peer's address entry was refused: %zu bytes, magic %#x, version %u, "
                     "%u NIC(s), %u context(s) of %u-byte addresses (ours: %zu-byte)",
                     len, h.magic, h.version, h.num_nics, h.num_contexts, h.addr_len, our_addr_len);
            *why = text;
        }
        return PeerBlobStatus::kMalformed;
    }
    // Peers must agree on contexts: a communicator maps to the same context
    // index on both sides.
    if (h.num_contexts != our_num_contexts) {
        return PeerBlobStatus::kContextMismatch;
    }
    out->names = static_cast<const uint8_t *>(blob) + sizeof(h);
    return PeerBlobStatus::kOk;
}

} // namespace efa

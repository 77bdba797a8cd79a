#include "peer_blob.hpp"

#include <cstdio>
#include <cstring>

namespace efa {

uint32_t fabric_id(const char *fabric_name) {
    uint32_t h = 2166136261u; // FNV-1a
    for (const char *p = fabric_name ? fabric_name : ""; *p; ++p) {
        h = (h ^ static_cast<uint8_t>(*p)) * 16777619u;
    }
    return h;
}

std::vector<uint8_t> make_peer_blob(uint16_t num_contexts, uint16_t addr_len,
                                    const std::vector<uint8_t> &names,
                                    const std::vector<uint32_t> &fabric_ids) {
    BlobHeader h{kBlobMagic, kBlobVersion, static_cast<uint16_t>(fabric_ids.size()), num_contexts,
                 addr_len};
    const size_t ids = fabric_ids.size() * sizeof(uint32_t);
    // One allocation, plain copies (vector::insert here draws a false
    // -Warray-bounds from g++ 12).
    std::vector<uint8_t> blob(sizeof(h) + names.size() + ids);
    memcpy(blob.data(), &h, sizeof(h));
    if (!names.empty()) {
        memcpy(blob.data() + sizeof(h), names.data(), names.size());
    }
    if (ids) {
        memcpy(blob.data() + sizeof(h) + names.size(), fabric_ids.data(), ids);
    }
    return blob;
}

std::vector<uint8_t> make_peer_blob(uint16_t num_contexts, uint16_t addr_len,
                                    const std::vector<uint8_t> &names) {
    return make_peer_blob(num_contexts, addr_len, names, std::vector<uint32_t>{0});
}

PeerBlobStatus parse_peer_blob(const void *blob, size_t len, size_t our_addr_len,
                               int our_num_contexts, PeerBlob *out, std::string *why) {
    BlobHeader &h = out->header;
    h = BlobHeader{};
    out->names = nullptr;
    out->fabric_ids.clear();
    if (blob && len >= sizeof(h)) {
        memcpy(&h, blob, sizeof(h));
    }
    const size_t names_len = static_cast<size_t>(h.num_nics) * h.num_contexts * h.addr_len;
    const size_t need = sizeof(h) + names_len + static_cast<size_t>(h.num_nics) * sizeof(uint32_t);
    // The names are read as our_addr_len bytes each: a peer announcing
    // another length (another provider) or fewer bytes than it announces
    // would have the address vector read past the blob.
    if (!blob || len < sizeof(h) || h.magic != kBlobMagic || h.version != kBlobVersion ||
        h.num_nics < 1 || h.num_nics > kMaxRails || h.addr_len != our_addr_len || len < need) {
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
    out->fabric_ids.resize(h.num_nics);
    memcpy(out->fabric_ids.data(), out->names + names_len, h.num_nics * sizeof(uint32_t));
    return PeerBlobStatus::kOk;
}

std::vector<int> pair_rails(const std::vector<uint32_t> &ours, const std::vector<uint32_t> &peers) {
    std::vector<int> pair(ours.size(), -1);
    for (size_t i = 0; i < ours.size(); ++i) {
        size_t before = 0; // our NICs before i on the same fabric
        for (size_t j = 0; j < i; ++j) {
            before += ours[j] == ours[i];
        }
        std::vector<int> theirs;
        for (size_t p = 0; p < peers.size(); ++p) {
            if (peers[p] == ours[i]) {
                theirs.push_back(static_cast<int>(p));
            }
        }
        if (!theirs.empty()) {
            pair[i] = theirs[before % theirs.size()];
        }
    }
    return pair;
}

} // namespace efa

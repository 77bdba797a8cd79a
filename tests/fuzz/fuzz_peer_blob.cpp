// The modex blob of a peer (common/peer_blob.cpp): bytes published by
// another process.  A blob is accepted only when every address it
// announces lies inside it, and then its names are exactly ours in size
// and count; a blob this process made itself is always accepted.
#include "fuzz_input.hpp"
#include "peer_blob.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    const size_t our_addr_len = in.take<uint8_t>() % 64 + 1;
    const int our_contexts = in.take<uint8_t>() % 17;
    const std::vector<uint8_t> blob = in.rest();

    efa::PeerBlob pb;
    std::string why;
    // A copy of exactly the blob's size, so that ASan sees any read past it.
    auto *copy = static_cast<uint8_t *>(malloc(blob.size() ? blob.size() : 1));
    if (!blob.empty()) {
        memcpy(copy, blob.data(), blob.size());
    }
    const auto st = efa::parse_peer_blob(copy, blob.size(), our_addr_len, our_contexts, &pb, &why);
    if (st == efa::PeerBlobStatus::kOk) {
        FUZZ_CHECK(pb.names == copy + sizeof(efa::BlobHeader));
        FUZZ_CHECK(pb.header.addr_len == our_addr_len);
        FUZZ_CHECK(pb.header.num_contexts == our_contexts);
        const size_t nics = pb.header.num_nics;
        FUZZ_CHECK(nics >= 1 && nics <= static_cast<size_t>(efa::kMaxRails));
        FUZZ_CHECK(pb.fabric_ids.size() == nics);
        const size_t need =
            sizeof(efa::BlobHeader) + nics * our_addr_len * our_contexts + nics * sizeof(uint32_t);
        FUZZ_CHECK(blob.size() >= need);
        // What the address vectors read: every name of every NIC, byte by byte.
        unsigned sum = 0;
        for (size_t i = 0; i < nics * our_addr_len * our_contexts; ++i) {
            sum += pb.names[i];
        }
        (void)sum;
        // Any pairing names one of the peer's NICs or none.
        for (int p : efa::pair_rails({1, 2, 1, 3}, pb.fabric_ids)) {
            FUZZ_CHECK(p >= -1 && p < static_cast<int>(nics));
        }
    } else {
        FUZZ_CHECK(pb.names == nullptr);
        FUZZ_CHECK(st == efa::PeerBlobStatus::kContextMismatch || !why.empty());
    }
    free(copy);

    // Our own blob round-trips.
    std::vector<uint8_t> names(our_addr_len * our_contexts, 0xab);
    const auto own = efa::make_peer_blob(static_cast<uint16_t>(our_contexts),
                                         static_cast<uint16_t>(our_addr_len), names);
    FUZZ_CHECK(efa::parse_peer_blob(own.data(), own.size(), our_addr_len, our_contexts, &pb,
                                    nullptr) == efa::PeerBlobStatus::kOk);
    return 0;
}

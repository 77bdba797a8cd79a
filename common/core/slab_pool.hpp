// The pool of efa_pool.h: slabs of owner structs, each slab's buffers in
// one aligned block, registered as one where the provider wants it.
#pragma once

#include <vector>

#include "efa_pool.h"
#include "registered_block.hpp"

namespace efa {

// The C head is the base, so the seam's efa_pool_t * converts back.
class SlabPool : public efa_pool_t {
  public:
    explicit SlabPool(const efa_pool_desc_t &desc)
        : efa_pool_t{nullptr, desc.link_off}, desc_(desc) {}
    ~SlabPool();
    SlabPool(const SlabPool &) = delete;
    SlabPool &operator=(const SlabPool &) = delete;

    efa_pool_t *head() { return this; }
    static SlabPool *of(efa_pool_t *head) { return static_cast<SlabPool *>(head); }
    static const SlabPool *of(const efa_pool_t *head) {
        return static_cast<const SlabPool *>(head);
    }

    int grow();
    size_t elems() const { return slabs_.size() * desc_.per_slab; }
    size_t slabs() const { return slabs_.size(); }
    size_t retire(bool (*busy)(void *arg, void *elem), void *arg);
    // Frees the slabs left; with release_mr their registrations too.
    void free_slabs(bool release_mr);
    // efa_pool_destroy: deletes the pool unless slabs are left to the provider.
    static size_t destroy(SlabPool *p, bool core_closed);

  private:
    struct Slab {
        char *elems;
        RegisteredBlock bufs; // none where buf_size is 0
    };
    void free_slab(Slab &s, bool release_mr);

    efa_pool_desc_t desc_;
    std::vector<Slab> slabs_;
};

} // namespace efa

// The slab pool (common/core/slab_pool.cpp) both btl_efa pools use: what
// an element comes with (its buffer, its descriptor where registered),
// the free list through the owner's own field, growth by slabs, and the
// finalize that keeps a slab the provider still holds an element of.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "efa_pool.h"

namespace {

// An owner's struct: the link is not first, as in btl_efa's.
struct Item {
    uint64_t cookie;
    Item *next;
    void *buf;
    void *desc;
    bool posted;
    int inits;
    efa_mr_t *mr; // the slab's registration (efa_pool_desc_t.mr_off)
};

void init_item(void *arg, void *elem, void *buf, void *desc) {
    auto *it = static_cast<Item *>(elem);
    it->cookie = reinterpret_cast<uintptr_t>(arg);
    it->buf = buf;
    it->desc = desc;
    it->inits++;
}

efa_pool_desc_t desc_of(size_t buf_size, unsigned per_slab) {
    efa_pool_desc_t d{};
    d.elem_size = sizeof(Item);
    d.link_off = offsetof(Item, next);
    d.buf_size = buf_size;
    d.buf_align = 64;
    d.per_slab = per_slab;
    d.init = init_item;
    d.arg = reinterpret_cast<void *>(uintptr_t{0xfeed});
    return d;
}

TEST(SlabPool, ElementsComeWithTheirBuffersAndGrowBySlabs) {
    const efa_pool_desc_t d = desc_of(128, 4);
    int err = -1;
    efa_pool_t *pool = efa_pool_create(&d, &err);
    ASSERT_NE(nullptr, pool);
    EXPECT_EQ(0, err);
    EXPECT_EQ(1u, efa_pool_slabs(pool));
    EXPECT_EQ(4u, efa_pool_elems(pool));
    std::vector<Item *> out;
    std::set<uintptr_t> bufs;
    for (int i = 0; i < 10; ++i) { // 10 of 4 per slab: two more slabs
        auto *it = static_cast<Item *>(efa_pool_get(pool));
        ASSERT_NE(nullptr, it);
        EXPECT_EQ(nullptr, it->next); // the link is cleared for the owner
        EXPECT_EQ(0xfeedu, it->cookie);
        EXPECT_EQ(1, it->inits);
        EXPECT_EQ(nullptr, it->desc); // not registered
        EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(it->buf) % 64);
        bufs.insert(reinterpret_cast<uintptr_t>(it->buf));
        static_cast<char *>(it->buf)[127] = 1; // the whole buffer is its own (ASan)
        out.push_back(it);
    }
    EXPECT_EQ(10u, bufs.size());
    EXPECT_EQ(3u, efa_pool_slabs(pool));
    EXPECT_EQ(12u, efa_pool_elems(pool));
    // back and out again: the same elements, no new slab, no second init
    for (Item *it : out) {
        efa_pool_put(pool, it);
    }
    for (int i = 0; i < 12; ++i) {
        auto *it = static_cast<Item *>(efa_pool_get(pool));
        ASSERT_NE(nullptr, it);
        EXPECT_EQ(1, it->inits);
    }
    EXPECT_EQ(3u, efa_pool_slabs(pool));
    EXPECT_EQ(0u, efa_pool_retire(
                      pool, [](void *, void *) { return false; }, nullptr));
    EXPECT_EQ(0u, efa_pool_destroy(pool, false));
}

TEST(SlabPool, RetireKeepsOnlySlabsWithABusyElement) {
    const efa_pool_desc_t d = desc_of(32, 2);
    int err = 0;
    efa_pool_t *pool = efa_pool_create(&d, &err);
    ASSERT_NE(nullptr, pool);
    std::vector<Item *> items;
    for (int i = 0; i < 6; ++i) { // three slabs
        items.push_back(static_cast<Item *>(efa_pool_get(pool)));
    }
    ASSERT_EQ(3u, efa_pool_slabs(pool));
    items[3]->posted = true; // one element of the second slab, say
    int asked = 0;
    struct Ctx {
        int *asked;
    } ctx{&asked};
    const size_t kept = efa_pool_retire(
        pool,
        [](void *arg, void *elem) {
            ++*static_cast<Ctx *>(arg)->asked;
            return static_cast<Item *>(elem)->posted;
        },
        &ctx);
    EXPECT_EQ(6, asked); // every element is asked (the owner repoints each busy one)
    EXPECT_EQ(1u, kept);
    EXPECT_EQ(1u, efa_pool_slabs(pool));
    EXPECT_EQ(items[3]->cookie, 0xfeedu); // its slab is alive (ASan would see otherwise)
    // the core still open: the slab is left to the provider
    EXPECT_EQ(1u, efa_pool_destroy(pool, false));
    // the core closed: nothing can complete, the slab goes
    EXPECT_EQ(0u, efa_pool_destroy(pool, true));
}

TEST(SlabPool, ElementsWithoutBuffers) {
    const efa_pool_desc_t d = desc_of(0, 3);
    int err = 0;
    efa_pool_t *pool = efa_pool_create(&d, &err);
    ASSERT_NE(nullptr, pool);
    auto *it = static_cast<Item *>(efa_pool_get(pool));
    ASSERT_NE(nullptr, it);
    EXPECT_EQ(nullptr, it->buf);
    efa_pool_put(pool, it);
    EXPECT_EQ(0u, efa_pool_destroy(pool, true));
}

TEST(SlabPool, RegisteredSlabsGiveDescriptors) {
    efa_core_params_t p = core_test_params("tcp;ofi_rxm");
    p.force_mr_local = true; // as EFA requires: descriptors for every local buffer
    CoreWithSelf opened;
    ASSERT_TRUE(opened.open(p));
    efa_pool_desc_t d = desc_of(256, 4);
    d.core = opened.core();
    d.mr_access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    d.mr_off = offsetof(Item, mr);
    int err = 0;
    efa_pool_t *pool = efa_pool_create(&d, &err);
    ASSERT_NE(nullptr, pool) << fi_strerror(-err);
    std::set<void *> descs;
    std::set<efa_mr_t *> mrs;
    for (int i = 0; i < 8; ++i) { // two slabs, one registration each
        auto *it = static_cast<Item *>(efa_pool_get(pool));
        ASSERT_NE(nullptr, it);
        ASSERT_NE(nullptr, it->desc);
        ASSERT_NE(nullptr, it->mr);
        EXPECT_EQ(it->desc, efa_mr_rail_desc(it->mr, 0)); // the same registration
        descs.insert(it->desc);
        mrs.insert(it->mr);
    }
    EXPECT_EQ(2u, descs.size());
    EXPECT_EQ(2u, mrs.size());
    EXPECT_EQ(0u, efa_pool_retire(
                      pool, [](void *, void *) { return false; }, nullptr));
    EXPECT_EQ(0u, efa_pool_destroy(pool, false));
}

} // namespace

// Operations in flight answered by id, with claims (efa_inflight.h has
// the contract): the one place that decides who completes an operation
// when its answers and its expiry race.
//
// Every emulated one-sided operation passes through here three times (add,
// the answer's claim, the last release), so the table is laid out for that
// path: one open-addressed array of entries, probed linearly from the id's
// low bits, with no allocation per operation (ids are consecutive, so they
// rarely share a home slot), and a spin lock instead of a mutex (each
// critical section is a few loads and stores and never calls out; only a
// growth allocates, and that happens while the table warms up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "spin_mutex.hpp"

namespace efa {

class Inflight {
  public:
    // 0, -EEXIST (id in the table, or op NULL) or -ENOMEM.
    int add(uint64_t id, void *op, double now);
    // now < 0: the idle time left as it is (efa_inflight_claim).
    void *claim(uint64_t id, double now);
    void touch(uint64_t id, double now);
    bool release(uint64_t id, bool over);
    // Is id in the table and not over (claimed or not)?
    bool live(uint64_t id);
    size_t expire(double now, double limit, void **out, size_t max);
    // Nobody could answer for 'seconds' (this process was away from
    // progress): every operation's idle time leaves them out.
    void pause(double seconds, double now);
    size_t size();

  private:
    struct Entry {
        uint64_t id;
        void *op;    // nullptr: the slot is free
        double last; // when it was started or last claimed
        int claims;  // callers that may touch op now
        bool over;   // no claim finds it; the last release completes it
    };
    Entry *find(uint64_t id);
    void erase(Entry *e);
    bool grow();

    SpinMutex lock_;
    std::vector<Entry> slots_; // a power of two long, at most half full
    size_t used_ = 0;
};

} // namespace efa

struct efa_inflight {
    efa::Inflight table;
};

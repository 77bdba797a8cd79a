// Operations in flight answered by id, with claims (efa_inflight.h has
// the contract): the one place that decides who completes an operation
// when its answers and its expiry race.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace efa {

class Inflight {
  public:
    bool add(uint64_t id, void *op, double now);
    void *claim(uint64_t id, double now);
    bool release(uint64_t id, bool over);
    size_t expire(double now, double limit, void **out, size_t max);
    size_t size();

  private:
    struct Entry {
        void *op;
        double last; // when it was started or last claimed
        int claims;  // callers that may touch op now
        bool over;   // no claim finds it; the last release completes it
    };
    std::mutex mu_;
    std::unordered_map<uint64_t, Entry> ops_;
};

} // namespace efa

struct efa_inflight {
    efa::Inflight table;
};

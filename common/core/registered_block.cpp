// RegisteredBlock (registered_block.hpp).
#include "registered_block.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"

namespace efa {

void RegisteredBlock::keep_for_provider() const {
    static std::mutex lock;
    static auto *kept = new std::vector<char *>(); // (never destroyed: read at exit)
    std::lock_guard<std::mutex> guard(lock);
    kept->push_back(data);
}

int RegisteredBlock::make(efa_core_t *core, size_t len, size_t align, uint64_t access) {
    void *p = nullptr;
    if (0 != posix_memalign(&p, align, len)) {
        return -FI_ENOMEM;
    }
    if (access) {
        int err = 0;
        mr = core->mr_cache->acquire(p, len, access, &err);
        if (!mr) {
            core->failures.report(core->rep, "fi_mr_reg", err);
            std::free(p);
            return err ? err : -FI_ENOMEM;
        }
    }
    data = static_cast<char *>(p);
    return 0;
}

void *RegisteredBlock::desc() const {
    return mr ? mr->reg.desc : nullptr;
}

void *RegisteredBlock::desc(int rail) const {
    return mr ? efa_mr_rail_desc(reinterpret_cast<const efa_mr_t *>(mr), rail) : nullptr;
}

int RegisteredBlock::rails() const {
    return mr ? efa_mr_rails(reinterpret_cast<const efa_mr_t *>(mr)) : 1;
}

void RegisteredBlock::release(efa_core_t *core, bool release_mr) {
    if (mr && release_mr) {
        core->mr_cache->release(mr);
    }
    std::free(data);
    data = nullptr;
    mr = nullptr;
}

void RegisteredBlock::unregister(efa_core_t *core) {
    if (mr) {
        core->mr_cache->release(mr);
        mr = nullptr;
    }
}

} // namespace efa

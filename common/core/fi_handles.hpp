// RAII ownership of libfabric objects: every fid is closed exactly once,
// in reverse order of opening, whatever path an error takes.
#pragma once

#include <memory>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

namespace efa {

template <typename T> struct FidCloser {
    void operator()(T *obj) const {
        if (obj) {
            fi_close(&obj->fid);
        }
    }
};
template <typename T> using FidPtr = std::unique_ptr<T, FidCloser<T>>;

using FabricPtr = FidPtr<fid_fabric>;
using DomainPtr = FidPtr<fid_domain>;
using AvPtr = FidPtr<fid_av>;
using CqPtr = FidPtr<fid_cq>;
using EpPtr = FidPtr<fid_ep>;
using MrPtr = FidPtr<fid_mr>;

struct InfoFree {
    void operator()(fi_info *info) const { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoFree>;

// fi_dupinfo of a single entry (without its list successors).
inline InfoPtr dup_one(const fi_info *info) {
    fi_info copy = *info;
    copy.next = nullptr;
    return InfoPtr(fi_dupinfo(&copy));
}

} // namespace efa

/*
 * Provider errors that say the path to a peer failed, not the operation:
 * the core takes them as the peer deadline's verdict at once (a rail out
 * for the peer, or the peer lost: core_deadline.cpp), and btl_efa moves a
 * put or get piece that failed with one over another NIC before the core
 * has heard of it (btl_efa_native.c).  One list, so the two agree.
 */
#ifndef EFA_PATH_ERROR_H
#define EFA_PATH_ERROR_H

#include <stdbool.h>

#include <rdma/fi_errno.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline bool efa_path_error(int err) {
    switch (-err) {
    case FI_EHOSTUNREACH:
    case FI_ETIMEDOUT:
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
        return true;
    default:
        return false;
    }
}

#ifdef __cplusplus
}
#endif

#endif

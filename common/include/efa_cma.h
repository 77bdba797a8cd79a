/*
 * Single copy between processes of one node by Linux cross-memory attach
 * (process_vm_readv / process_vm_writev): the one copy loop and the one
 * cookie check that mtl_efa's matching engine and btl_efa share
 * (common/node/cma.cpp).
 *
 * A peer's pid is only trusted once a read of its cookie, at the address
 * it published, returns the value it published: a pid of another pid
 * namespace, a recycled pid or a kernel that refuses (Yama's ptrace_scope,
 * seccomp, another uid) all fail there.
 */
#ifndef EFA_CMA_H
#define EFA_CMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The build has process_vm_readv/writev (else every call returns ENOSYS). */
bool efa_cma_built(void);

/* Move len bytes between local and remote in process pid (write: local to
 * remote), over partial transfers.  0 or the errno that stopped it (EFAULT:
 * nothing mapped there any more); *moved (may be NULL) says how far. */
int efa_cma_copy(uint32_t pid, bool write, void *local, uint64_t remote, size_t len, size_t *moved);

/* Can this process read pid's memory, and is pid the process that
 * published (cookie_addr, cookie)?  0, an errno of the read, or
 * EFA_CMA_OTHER_PROCESS. */
#define EFA_CMA_OTHER_PROCESS (-1)
int efa_cma_verify(uint32_t pid, uint64_t cookie_addr, uint64_t cookie);

/* This process's cookie (made at the first call, never 0) and where it
 * lives, to publish. */
uint64_t efa_cma_cookie(uint64_t *addr);

#ifdef __cplusplus
}
#endif
#endif /* EFA_CMA_H */

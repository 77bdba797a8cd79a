/*
 * Single copy between processes of one node by Linux cross-memory attach
 * (process_vm_readv / process_vm_writev): the one copy loop and the one
 * cookie check that mtl_efa's matching engine and btl_efa share
 * (common/node/cma.cpp).
 *
 * A peer's pid is only trusted once a read of its cookie, at the address
 * it published, returns the value it published: a pid of another pid
 * namespace, a recycled pid or a kernel that refuses (Yama's ptrace_scope,
 * seccomp, another uid) all fail there.  The same proof lets a peer's
 * exit be watched (efa_cma_exit_watch): only a proven pid is judged.
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

/* A watch on the exit of a process of this node: a descriptor of it
 * (pidfd_open, immune to the pid's reuse), taken only where pid is proven
 * to be the process that published (cookie_addr, cookie): after the
 * descriptor is open, its cookie is read (efa_cma_verify) and the process
 * is checked to be still there, so the read was of that very process.  A
 * pid of another pid namespace, a kernel or policy that refuses the read,
 * a process gone already: -1, nothing watched; also without pidfd_open
 * (ENOSYS: before Linux 5.3), never a guess by the bare pid.  Take it
 * while the peer is surely alive (its first use). */
int efa_cma_exit_watch(uint32_t pid, uint64_t cookie_addr, uint64_t cookie);
/* Has the process of watch fd exited (a zombie included)?  Asks the
 * kernel without waiting; false for -1. */
bool efa_cma_exited(int fd);
/* Close a watch (nothing for -1). */
void efa_cma_exit_unwatch(int fd);
/* Why a process of this node that exited is lost, as the core's
 * peer-unreachable message says it (efa_core_peer_lost). */
#define EFA_CMA_EXITED_WHY "its process on this node exited without ending in order (MPI_Finalize)"

/* Yama's ptrace_scope 1 (Ubuntu's default) lets a process read the memory
 * of its own descendants only: the ranks of a node, siblings under the
 * launcher, would refuse each other's single copy, descriptor copy
 * (pidfd_getfd) and cookie proof.  Opening this process to every process
 * allowed by the other checks (its user, its pid namespace), by
 * prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), is what Open MPI's own
 * shared-memory transport does.  Called where a component offers single
 * copy or its on-node rings (the watch on a peer's exit proves the peer's
 * pid by the same read); once per process, the first answer kept.
 * *scope (may be NULL): the scope read, -1 without Yama. */
typedef enum {
    EFA_CMA_OPEN_NOT_NEEDED, /* no Yama, or scope 0: siblings may already */
    EFA_CMA_OPEN_DONE,       /* scope 1: opened */
    EFA_CMA_OPEN_REFUSED     /* scope 2-3 (administrators only, or nobody), or prctl failed */
} efa_cma_open_t;
efa_cma_open_t efa_cma_open_to_node(int *scope, int *err);
/* The same from the scope file at path, every call (the tests' seam). */
efa_cma_open_t efa_cma_open_to_node_at(const char *path, int *scope, int *err);
/* One line for the report: what efa_cma_open_to_node did, and why. */
const char *efa_cma_open_said(efa_cma_open_t how, int scope);

#ifdef __cplusplus
}
#endif
#endif /* EFA_CMA_H */

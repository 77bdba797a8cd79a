/*
 * Memory registration through the core's caches (efa_core.h's efa_mr_t):
 * host memory for the provider's descriptors and keys, and, where the
 * provider granted FI_HMEM, device allocations registered with their
 * interface and device.  Same conventions as efa_core.h.
 */
#ifndef EFA_MR_H
#define EFA_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* (struct names: efa_core.h, which includes this, gives them their
 * typedefs efa_core_t and efa_mr_t) */
struct efa_core;
struct efa_mr;

#ifdef __cplusplus
extern "C" {
#endif

/* Host memory, through the cache (efa_core_mem_release drops what was freed). */
struct efa_mr *efa_core_mr_acquire(struct efa_core *core, const void *addr, size_t len,
                                   uint64_t access, int *err);
/* A device buffer (efa_device.h) where info.hmem: the whole allocation
 * that holds it, registered with its interface and device on the first
 * NIC (and, for RMA access, on the rails too) and cached; a registration
 * of an allocation freed since (its id changed) is replaced.  NULL with
 * *err where the provider or the device backend cannot, or common_efa_hmem_vmm
 * keeps the allocation from the provider (the caller copies through the
 * host instead).  Released with efa_core_mr_release. */
struct efa_mr *efa_core_mr_acquire_device(struct efa_core *core, const void *addr, size_t len,
                                          uint64_t access, int *err);
/* Device registrations replaced because their allocation was freed. */
uint64_t efa_core_mr_device_stale(const struct efa_core *core);
/* Are device allocations without synchronous memory operations (CUDA VMM
 * and pool memory: efa_device_hmem_t's no_sync_memops) handed to the
 * provider, under common_efa_hmem_vmm 'sw' (EFA_SWITCH_*) on libfabric
 * fabric 'fabric'?  "auto" keeps them from libfabric's efa fabric: its RDM
 * endpoint sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on every CUDA buffer it is
 * handed and fails the post (-FI_EINVAL) where the driver refuses it
 * (libfabric issue 12853), so they are copied through the host there,
 * unless the endpoint runs without CUDA calls (provider_cuda_calls
 * EFA_SWITCH_OFF: FI_OPT_CUDA_API_PERMITTED taken as false) on a libfabric
 * ('lib_version': fi_version()) of 1.20 or later, which skips that
 * attribute (1.18 to 1.19.0 set it at registration regardless; 1.19
 * counts whole, as fi_version() has no patch level).  *why: the
 * reason, for reports (static text). */
bool efa_core_hmem_vmm_allowed(int sw, const char *fabric, int provider_cuda_calls,
                               uint32_t lib_version, const char **why);
/* Device buffers refused because their allocation has no synchronous
 * memory operations (CUDA VMM or pool memory) and common_efa_hmem_vmm
 * keeps such memory from this provider: copied through the host. */
uint64_t efa_core_mr_device_vmm_staged(const struct efa_core *core);
/* A post of mr, a device registration, failed with rc (negative fi
 * errno), in the call or in its completion; call names it for the message
 * ("mtl_efa fi_tsend").  Where rc says the provider refused the memory
 * (-FI_EINVAL, -FI_EOPNOTSUPP and the like; not a full queue, a lost peer
 * or a cancel), memory of its kind is copied through the host from now on
 * (efa_core_mr_acquire_device refuses it): memory without synchronous
 * memory operations (CUDA VMM, pool memory) where mr is such memory, all
 * device memory otherwise.  Said once per kind (help message
 * device-post-refused).  The caller then copies this buffer through the
 * host and posts again. */
typedef enum {
    EFA_DEVICE_POST_NOT_REFUSED = 0,
    EFA_DEVICE_POST_REFUSED_VMM = 1,
    EFA_DEVICE_POST_REFUSED_ALL = 2
} efa_device_post_refusal_t;
efa_device_post_refusal_t efa_core_mr_device_post_refused(struct efa_core *core, struct efa_mr *mr,
                                                          const char *call, int rc);
/* Called by the owner of an operation refused so from the backlog (in its
 * completion) once it has gone another way (through the host): the
 * backlog then says no failure of the post.  An owner whose other way
 * fails does not call it. */
void efa_core_device_refusal_taken(void);
/* Posts refused so, and device buffers copied through the host since
 * because all device memory is (memory without synchronous memory
 * operations is counted by efa_core_mr_device_vmm_staged). */
void efa_core_mr_device_refusals(const struct efa_core *core, uint64_t *posts, uint64_t *after);
/* Device registrations made through a dmabuf (FI_MR_DMABUF), and whether
 * the next one will try (common_efa_dmabuf, libfabric 1.20+, and no
 * refusal by the provider so far). */
uint64_t efa_core_mr_device_dmabuf(const struct efa_core *core);
bool efa_core_mr_dmabuf_on(const struct efa_core *core);
/* Device registrations over several allocations side by side (a CUDA VMM
 * buffer that runs from one physical allocation into the next). */
uint64_t efa_core_mr_device_spans(const struct efa_core *core);
/* libfabric, as built with and loaded, takes dmabuf registrations (1.20+). */
bool efa_core_dmabuf_in_libfabric(void);
void efa_core_mr_release(struct efa_core *core, struct efa_mr *mr);
void *efa_mr_desc(const struct efa_mr *mr);
uint64_t efa_mr_key(const struct efa_mr *mr);
uintptr_t efa_mr_base(const struct efa_mr *mr);
/* The registration on every rail: how many rails it covers (1: NIC 0
 * alone), and its key and descriptor on rail r < that. */
int efa_mr_rails(const struct efa_mr *mr);
uint64_t efa_mr_rail_key(const struct efa_mr *mr, int rail);
void *efa_mr_rail_desc(const struct efa_mr *mr, int rail);
size_t efa_mr_len(const struct efa_mr *mr);
/* Memory was released (free/munmap hook): drop cached registrations. */
void efa_core_mem_release(void *addr, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* EFA_MR_H */

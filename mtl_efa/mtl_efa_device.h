/*
 * Device (GPU) buffers in mtl_efa (mtl_efa_device.c): copied through the
 * host where this MTL sees them, before any path (rings, single copy,
 * engine, provider) reads or writes them.  Included where receives end,
 * beside Open MPI's mtl_base_datatype.h.
 */
#ifndef MTL_EFA_DEVICE_H
#define MTL_EFA_DEVICE_H

#include "mtl_efa.h"
#include "ompi/mca/mtl/base/mtl_base_datatype.h"
#include "efa_stage.h"

/* At init, with the core acquired: who copies device buffers (sets
 * ompi_mtl_efa.device_staging, says so at verbose 1); whether pml/cm is
 * told that this MTL takes device buffers (Open MPI 5: it then hands them
 * on uncopied). */
bool ompi_mtl_efa_device_init(void);
void ompi_mtl_efa_device_fini(void);
/* What the engine did with device messages, said at verbose 1. */
struct efa_engine_stats;
void ompi_mtl_efa_device_say_stats(const struct efa_engine_stats *s);

/* A send's buffer (after packing): device memory is replaced by a host
 * copy (free_buffer set).  OMPI_SUCCESS, or an error with nothing left
 * allocated (Open MPI's packed device copy given back). */
int ompi_mtl_efa_device_stage_send(struct opal_convertor_t *convertor, void **buffer, size_t length,
                                   bool *free_buffer);
/* The same for a buffer known to be device memory (contiguous, or Open
 * MPI's packed device copy, given back): its host copy by the device's
 * copy, without asking the convertor. */
int ompi_mtl_efa_device_stage_copy(void **buffer, size_t length, bool *free_buffer);
/* Does this send go uncopied to the engine, which carries its device
 * buffer to process dest of this node by the device's IPC? */
bool ompi_mtl_efa_device_by_ipc(struct ompi_communicator_t *comm, int dest,
                                struct opal_convertor_t *convertor, const void *buffer,
                                size_t length, bool free_buffer);
/* A send's buffer as it leaves pml/cm: device memory goes to the engine
 * uncopied (*engine_device: to a process of this node by the device's
 * IPC, *hmem_mr NULL; or, under own matching, to a process on another node
 * that reads it from *hmem_mr, its registration), to the provider
 * uncopied (*hmem_mr: its registration, FI_HMEM; the peer is reached
 * through the provider), or is replaced by a host copy (stage_send).
 * OMPI_SUCCESS, or an error with nothing left allocated. */
int ompi_mtl_efa_device_send_prepare(struct ompi_communicator_t *comm, int dest,
                                     struct opal_convertor_t *convertor, void **buffer,
                                     size_t length, bool *free_buffer, bool *engine_device,
                                     efa_mr_t **hmem_mr);
/* A receive's buffer: device memory gets a host buffer in its place
 * (req->device_buf).  OMPI_SUCCESS, or an error with nothing left
 * allocated. */
int ompi_mtl_efa_device_stage_recv(mca_mtl_efa_request_t *req);
/* A receive only the provider can match (no ring, no engine): a device
 * buffer is registered (req->mr) and handed to the provider as it is
 * where FI_HMEM was granted; else staged as above. */
int ompi_mtl_efa_device_provider_recv(mca_mtl_efa_request_t *req);
/* A provider send or receive of req failed with rc (a negative fi errno)
 * in 'call', at the post or in its completion: where req->mr is a device
 * registration the provider refused (efa_core_mr_device_post_refused),
 * the registration goes, the buffer is copied through the host instead
 * (stage_send, stage_recv) and true is returned: the caller posts req
 * again.  False: the failure stands. */
bool ompi_mtl_efa_device_post_refused(mca_mtl_efa_request_t *req, const char *call, int rc);
/* A staged receive ends (ompi_mtl_efa_recv_buffer_done; held: it failed,
 * and the provider may still write into its staging buffer). */
void ompi_mtl_efa_device_recv_done(mca_mtl_efa_request_t *req, size_t len, bool deliver, bool held);

/* A receive's buffer is done with: deliver: len bytes arrived (unpacked or
 * copied to the device); else nothing did (cancelled, failed) and only
 * what was allocated goes. */
static inline void ompi_mtl_efa_recv_buffer_done(mca_mtl_efa_request_t *req, size_t len,
                                                 bool deliver) {
    if (OPAL_UNLIKELY(NULL != req->device_buf)) {
        ompi_mtl_efa_device_recv_done(req, len, deliver, false);
    } else if (deliver && len > 0) {
        ompi_mtl_datatype_unpack(req->convertor, req->buffer, len); /* frees a packing one */
    } else if (req->free_buffer) {
        free(req->buffer);
    }
}

/* A receive failed (not cancelled, not truncated): nothing is delivered,
 * and a buffer of the component's own is dropped, never used again
 * (efa_stage_drop): the provider may still write into it (a receive or a
 * read the peer deadline gave up on). */
static inline void ompi_mtl_efa_recv_buffer_failed(mca_mtl_efa_request_t *req) {
    if (OPAL_UNLIKELY(NULL != req->device_buf)) {
        ompi_mtl_efa_device_recv_done(req, 0, false, true); /* (drops its staging buffer) */
    } else if (req->free_buffer) {
        efa_stage_drop(req->buffer);
    }
}

#endif

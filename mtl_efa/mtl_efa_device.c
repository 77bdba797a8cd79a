/*
 * Device (GPU) buffers in mtl_efa: copied through the host with the
 * device's own copy (common/include/efa_device.h), at the MTL's entry, so
 * that no path behind it (the rings, the single copy, the engine's eager
 * copies, a provider without FI_HMEM) ever touches device memory.
 *
 * Who copies (mtl_efa_device_buffers):
 *   open-mpi  Open MPI 5's pml/cm does (its convertor packs device
 *             buffers into host memory for an MTL that says it takes no
 *             device memory).
 *   own       this MTL does, through the core's device seam with Open
 *             MPI's accelerator as the backend: pml/cm is told that the
 *             MTL takes device buffers.
 *   auto      (default) open-mpi.
 * Whatever the setting: the core's fake device of the tests is copied
 * here (Open MPI does not know its memory), and under Open MPI 4.1 built
 * with CUDA, whose convertor copies receives and non-contiguous sends but
 * hands a contiguous device buffer on as it is, this MTL packs such a
 * send through that convertor.  Where Open MPI has no accelerator (4.1
 * without CUDA; 5.0 on a node without a GPU driver) and no fake, verbose
 * 1 says that device buffers are not supported here.  Sends: one device
 * copy into a host buffer before the send; receives: a host buffer,
 * copied to the device when the message is in (host buffers of 64 KiB and
 * more kept for the next message: efa_stage.h).  Where this MTL copies, two paths
 * take device buffers uncopied: to processes of this node the engine's
 * IPC (mtl_efa_device_ipc), and to and from peers the provider carries a
 * provider that granted FI_HMEM (common_efa_hmem), the buffer registered
 * with its device (under own matching: a rendezvous read from a device
 * send, and one into a device receive, whose host buffer still takes
 * what comes as DATA frames).
 */
#include <string.h>

#include "mtl_efa_device.h"
#include "ompi/proc/proc.h"
#include "efa_device.h"
#include "efa_engine.h"
#include "opal/util/output.h"

static void device_ipc_init(void);
static void device_hmem_init(void);

bool ompi_mtl_efa_device_init(void) {
    const mtl_efa_params_t *p = &ompi_mtl_efa_params;
    const bool want_own = 0 == strcmp(ompi_mtl_efa_choice(p->device_buffers), "own");
    const char *backend = efa_device_name(); /* installed by the core or the glue */
    bool accelerator_support = false;
    ompi_mtl_efa.device_staging = false;
    if (NULL != backend && 0 == strcmp(backend, "fake")) {
        /* The fake device (a test setting): Open MPI does not know its
         * memory, so this MTL copies whatever the setting. */
        ompi_mtl_efa.device_staging = !p->test.device_blind;
        ompi_mtl_efa.device_how = MTL_EFA_DEVICE_FAKE;
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices", "device buffers: %s",
                                  p->test.device_blind
                                      ? "handed on uncopied (mtl_efa_debug_device_blind, a test "
                                        "setting)"
                                      : "copied through the host by mtl_efa (the core's fake "
                                        "device)");
    } else if (NULL != backend && want_own) {
        ompi_mtl_efa.device_staging = true;
        ompi_mtl_efa.device_how = MTL_EFA_DEVICE_OWN;
        accelerator_support = true;
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices",
                                  "device buffers: copied through the host by mtl_efa with Open "
                                  "MPI's %s accelerator (mtl_efa_device_buffers own)",
                                  backend);
    } else if (NULL != backend) {
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices",
                                  "device buffers: copied through the host by Open MPI's pml/cm "
                                  "with its %s accelerator (mtl_efa_device_buffers own: by "
                                  "mtl_efa)",
                                  backend);
    } else if (MTL_EFA_CONVERTOR_COPIES_CUDA) {
        /* 4.1 with CUDA: its convertor copies all but contiguous sends,
         * which this MTL packs through the same convertor. */
        ompi_mtl_efa.device_staging = true;
        ompi_mtl_efa.device_how = MTL_EFA_DEVICE_CUDA41;
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices",
                                  "device buffers: copied through the host by Open MPI's "
                                  "convertor with its CUDA support%s",
                                  want_own ? "; mtl_efa_device_buffers own needs Open MPI 5" : "");
    } else {
        /* Open MPI 4.1 without CUDA, or 5.0 with no accelerator component
         * loaded. */
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices",
                                  "device buffers: not supported here (Open MPI has no "
                                  "accelerator component loaded%s)",
                                  want_own ? "; mtl_efa_device_buffers own needs one" : "");
    }
    device_ipc_init();
    device_hmem_init();
    return accelerator_support;
}

void ompi_mtl_efa_device_fini(void) {
    if (ompi_mtl_efa.device_staging) {
        efa_stage_counts_t n;
        efa_stage_get_counts(&n);
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: host buffers of 64 KiB or more for device bytes: %llu, %llu "
                            "of them kept from an earlier message; %llu pinned for the device's "
                            "copies",
                            (unsigned long long)n.pooled, (unsigned long long)n.reused,
                            (unsigned long long)n.pinned);
        efa_stage_trim();
    }
    if (ompi_mtl_efa.device_hmem) {
        uint64_t refused, after;
        efa_core_mr_device_refusals(ompi_mtl_efa.core, &refused, &after);
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: device buffers handed to the provider as they are "
                            "(FI_HMEM): %llu sends, %llu receives; %llu registrations of freed "
                            "device memory replaced; %llu registrations through a dmabuf; "
                            "%llu buffers without synchronous memory operations (CUDA VMM, pool "
                            "memory) copied through the host (common_efa_hmem_vmm); %llu posts "
                            "refused by the provider and copied through the host, %llu device "
                            "buffers copied since; %llu registrations over several CUDA VMM "
                            "allocations side by side",
                            (unsigned long long)ompi_mtl_efa.device_hmem_sent,
                            (unsigned long long)ompi_mtl_efa.device_hmem_received,
                            (unsigned long long)efa_core_mr_device_stale(ompi_mtl_efa.core),
                            (unsigned long long)efa_core_mr_device_dmabuf(ompi_mtl_efa.core),
                            (unsigned long long)efa_core_mr_device_vmm_staged(ompi_mtl_efa.core),
                            (unsigned long long)refused, (unsigned long long)after,
                            (unsigned long long)efa_core_mr_device_spans(ompi_mtl_efa.core));
    }
    ompi_mtl_efa.device_staging = false;
    ompi_mtl_efa.device_ipc = false;
    ompi_mtl_efa.device_hmem = false;
    ompi_mtl_efa.device_read = false;
}

/* Device buffers to peers reached through the provider: as they are
 * where it granted FI_HMEM (asked for by the core where device buffers may
 * come, common_efa_hmem) and the backend describes its memory. */
static void device_hmem_init(void) {
    const bool copies =
        ompi_mtl_efa.device_staging && MTL_EFA_DEVICE_CUDA41 != ompi_mtl_efa.device_how;
    const bool granted = efa_core_get_info(ompi_mtl_efa.core)->hmem;
    ompi_mtl_efa.device_hmem = copies && granted && efa_device_hmem_on();
    ompi_mtl_efa.device_hmem_sent = ompi_mtl_efa.device_hmem_received = 0;
    /* Under own matching, the engine's read rendezvous to other nodes
     * reads a device send from its registration (the provider's RMA). */
    ompi_mtl_efa.device_read = ompi_mtl_efa.device_hmem && ompi_mtl_efa.own_matching &&
                               efa_core_get_info(ompi_mtl_efa.core)->has_rma &&
                               0 != ompi_mtl_efa_params.net_read_min;
    if (!copies) {
        return;
    }
    if (ompi_mtl_efa.device_read) {
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices",
                                  "device sends to other nodes (own matching): from %zu bytes "
                                  "read by the receiver from their registration (FI_HMEM, "
                                  "striped over the NICs it is registered on), smaller ones "
                                  "through the host",
                                  ompi_mtl_efa_params.net_read_min);
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices",
                                  "device receives from other nodes (own matching): read straight "
                                  "into their registration (FI_HMEM) where the sender offers a "
                                  "read, else through the host piece by piece");
    }
    mca_common_efa_say_choice(
        "mtl:efa", "mtl_efa devices",
        "device buffers to processes reached through the provider: %s",
        ompi_mtl_efa.device_hmem ? "handed to it as they are (FI_HMEM), registered"
        : !granted               ? "through the host (the provider has no FI_HMEM, or "
                                   "common_efa_hmem is off)"
                                 : "through the host (the device backend cannot describe its "
                                   "memory for registration)");
}

/* The registration of a device buffer the provider takes as it is, or
 * NULL (staged instead: said once). */
static efa_mr_t *hmem_register(const void *buf, size_t len, uint64_t access) {
    int err = 0;
    efa_mr_t *mr = efa_core_mr_acquire_device(ompi_mtl_efa.core, buf, len, access, &err);
    if (NULL == mr) {
        static bool said = false;
        if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
            opal_output_verbose(1, mca_common_efa_output,
                                "mtl:efa: a device buffer of %zu bytes could not be registered "
                                "with the provider (%s): copied through the host instead",
                                len, fi_strerror(-err));
        }
    }
    return mr;
}

/* Device sends to processes of this node by the device's IPC: where this
 * MTL copies device buffers itself and the device shares its memory. */
static void device_ipc_init(void) {
    const bool copies =
        ompi_mtl_efa.device_staging && MTL_EFA_DEVICE_CUDA41 != ompi_mtl_efa.device_how;
    ompi_mtl_efa.device_ipc = copies && ompi_mtl_efa_params.device_ipc && efa_device_ipc_on();
    if (!copies) {
        return;
    }
    mca_common_efa_say_choice(
        "mtl:efa", "mtl_efa devices", "device buffers to processes of this node: %s",
        ompi_mtl_efa.device_ipc           ? "device to device by the device's IPC"
        : !ompi_mtl_efa_params.device_ipc ? "through the host (mtl_efa_device_ipc false)"
                                          : "through the host (the device backend has no IPC)");
}

static void copy_failed(const char *what, size_t len);
static bool on_device(const struct opal_convertor_t *convertor, const void *buf, size_t len);

/* A device buffer posted: the posting thread's context (Open MPI's check
 * made the buffer's current where it had none) is remembered, so that a
 * thread without one that completes the message later, with memory that
 * names no context (VMM, pool) or none at hand (an import), takes that
 * device's (efa_cuda_context.h).  One driver call, no change of context. */
static inline void note_context(const void *buf) {
    mca_common_efa_cuda_context_here(buf, NULL);
}

bool ompi_mtl_efa_device_by_ipc(struct ompi_communicator_t *comm, int dest,
                                struct opal_convertor_t *convertor, const void *buffer,
                                size_t length, bool free_buffer) {
    /* (Open MPI's packed copy of a non-contiguous buffer: a new allocation
     * each time, which a peer would import each time; staged instead) */
    /* (to itself too, through its own ring, where the channel is up: the
     * engine names the buffer itself, no handle) */
    /* (a message the slots hold goes eager through the host: by IPC it
     * would be a rendezvous, waiting for its receive, and a program that
     * sends small messages before it receives would hang where host
     * buffers do not; so do all where the slots cannot hold the RTS) */
    return ompi_mtl_efa.device_ipc && !free_buffer && NULL != ompi_mtl_efa.peer_onnode &&
           ompi_mtl_efa_use_engine(comm, dest) && ompi_mtl_efa_ring_peer(comm, dest) &&
           length >= efa_engine_node_device_min(ompi_mtl_efa.engine) &&
           on_device(convertor, buffer, length);
}

/* Is a request's buffer device memory?  The fake's memory is asked of
 * the fake; otherwise Open MPI asked its accelerator when it prepared the
 * convertor (no driver call per message here). */
static bool on_device(const struct opal_convertor_t *convertor, const void *buf, size_t len) {
    if (MTL_EFA_DEVICE_FAKE == ompi_mtl_efa.device_how) {
        return efa_device_check(buf, len);
    }
    return MTL_EFA_CONVERTOR_ON_DEVICE(convertor);
}

/* Is Open MPI's packed copy of a buffer (free_buffer) device memory?
 * Under own copying (Open MPI told of accelerator support) Open MPI packs
 * a non-contiguous device buffer into a device allocation of its own,
 * also for managed memory, which on_device counts as host memory. */
static bool temp_on_device(const struct opal_convertor_t *convertor, bool free_buffer) {
    return free_buffer && MTL_EFA_DEVICE_OWN == ompi_mtl_efa.device_how &&
           MTL_EFA_CONVERTOR_TEMP_ON_DEVICE(convertor);
}

/* 4.1 with CUDA: a contiguous device buffer the convertor handed on as it
 * is, packed into host memory by that convertor (its CUDA copy). */
static int pack_cuda41(struct opal_convertor_t *convertor, void **buffer, size_t length,
                       bool *free_buffer) {
    struct iovec iov = {efa_stage_get(length), length};
    uint32_t count = 1;
    size_t packed = length;
    if (NULL == iov.iov_base) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (opal_convertor_pack(convertor, &iov, &count, &packed) < 0 || packed != length) {
        copy_failed("a send's buffer to the host", length);
        efa_stage_free(iov.iov_base);
        return OMPI_ERROR;
    }
    *buffer = iov.iov_base;
    *free_buffer = true;
    return OMPI_SUCCESS;
}

#if OMPI_MAJOR_VERSION < 5
/* 4.1.0 to 4.1.5's pml/cm fills the convertor of a contiguous send by
 * hand, never asking whether its buffer is device memory (4.1.6 prepares
 * it): such a convertor was never prepared (no CONVERTOR_SEND), and its
 * CONVERTOR_CUDA flag says nothing.  One prepared here from its datatype
 * asks (Open MPI's CUDA check), and packs a device buffer through the
 * host with Open MPI's CUDA copy; a host buffer is left as it is. */
static int stage_cuda41_unprepared(struct opal_convertor_t *convertor, void **buffer, size_t length,
                                   bool *free_buffer) {
    opal_convertor_t prepared;
    OBJ_CONSTRUCT(&prepared, opal_convertor_t);
    const unsigned char *user = convertor->pBaseBuf - convertor->pDesc->true_lb;
    int rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, convertor->pDesc,
                                                      convertor->count, user, 0, &prepared);
    if (OPAL_SUCCESS == rc && MTL_EFA_CONVERTOR_ON_DEVICE(&prepared)) {
        rc = pack_cuda41(&prepared, buffer, length, free_buffer);
    }
    OBJ_DESTRUCT(&prepared);
    return OPAL_SUCCESS == rc ? OMPI_SUCCESS : rc;
}
#endif

/* Said once: a device copy failed (the device's error is in its own
 * report). */
static void copy_failed(const char *what, size_t len) {
    static bool said = false;
    if (!said) {
        said = true;
        mca_common_efa_show_help("help-mtl-efa.txt", "device-copy-failed", false,
                                 opal_process_info.nodename, what, len, efa_device_name());
    }
}

int ompi_mtl_efa_device_send_prepare(struct ompi_communicator_t *comm, int dest,
                                     struct opal_convertor_t *convertor, void **buffer,
                                     size_t length, bool *free_buffer, bool *engine_device,
                                     efa_mr_t **hmem_mr) {
    *engine_device =
        ompi_mtl_efa_device_by_ipc(comm, dest, convertor, *buffer, length, *free_buffer);
    if (*engine_device) {
        note_context(*buffer);
        return OMPI_SUCCESS;
    }
    /* Own matching, a process on another node, a read's size: the
     * receiver reads the device buffer from its registration. */
    if (ompi_mtl_efa.device_read && !*free_buffer && length >= ompi_mtl_efa_params.net_read_min &&
        ompi_mtl_efa_use_engine(comm, dest) && !ompi_mtl_efa_ring_peer(comm, dest) &&
        ompi_comm_peer_lookup(comm, dest) != ompi_proc_local() &&
        on_device(convertor, *buffer, length) &&
        NULL != (*hmem_mr = hmem_register(*buffer, length, FI_REMOTE_READ))) {
        note_context(*buffer);
        *engine_device = true;
        __atomic_fetch_add(&ompi_mtl_efa.device_hmem_sent, 1, __ATOMIC_RELAXED);
        return OMPI_SUCCESS;
    }
    /* (Open MPI's packed copy of a non-contiguous buffer: a new allocation
     * each time, registered each time; staged instead) */
    if (ompi_mtl_efa.device_hmem && !*free_buffer && 0 != length &&
        !ompi_mtl_efa_use_engine(comm, dest) && on_device(convertor, *buffer, length) &&
        NULL != (*hmem_mr = hmem_register(*buffer, length, FI_SEND))) {
        __atomic_fetch_add(&ompi_mtl_efa.device_hmem_sent, 1, __ATOMIC_RELAXED);
        return OMPI_SUCCESS;
    }
    return ompi_mtl_efa_device_stage_send(convertor, buffer, length, free_buffer);
}

int ompi_mtl_efa_device_stage_send(struct opal_convertor_t *convertor, void **buffer, size_t length,
                                   bool *free_buffer) {
#if OMPI_MAJOR_VERSION < 5
    if (MTL_EFA_DEVICE_CUDA41 == ompi_mtl_efa.device_how && !*free_buffer && 0 != length &&
        0 == (convertor->flags & CONVERTOR_SEND)) {
        return stage_cuda41_unprepared(convertor, buffer, length, free_buffer);
    }
#endif
    if (0 == length ||
        !(on_device(convertor, *buffer, length) || temp_on_device(convertor, *free_buffer))) {
        return OMPI_SUCCESS;
    }
    if (MTL_EFA_DEVICE_CUDA41 == ompi_mtl_efa.device_how) {
        /* (a buffer the convertor allocated is its host copy already) */
        return *free_buffer ? OMPI_SUCCESS : pack_cuda41(convertor, buffer, length, free_buffer);
    }
    return ompi_mtl_efa_device_stage_copy(buffer, length, free_buffer);
}

int ompi_mtl_efa_device_stage_copy(void **buffer, size_t length, bool *free_buffer) {
    void *host = efa_stage_get(length);
    int rc = NULL == host ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_SUCCESS;
    if (OMPI_SUCCESS == rc && 0 != efa_device_copy(host, *buffer, length)) {
        copy_failed("a send's buffer to the host", length);
        rc = OMPI_ERROR;
    }
    if (*free_buffer) {
        efa_device_release(*buffer); /* Open MPI's packed device copy */
        *free_buffer = false;
    }
    if (OMPI_SUCCESS != rc) {
        efa_stage_free(host);
        return rc;
    }
    *buffer = host;
    *free_buffer = true;
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_device_stage_recv(mca_mtl_efa_request_t *req) {
    /* (4.1's convertor gives a CUDA receive a host buffer of its own) */
    if (0 == req->length || MTL_EFA_DEVICE_CUDA41 == ompi_mtl_efa.device_how ||
        !(on_device(req->convertor, req->buffer, req->length) ||
          temp_on_device(req->convertor, req->free_buffer))) {
        return OMPI_SUCCESS;
    }
    void *host = efa_stage_get(req->length);
    if (NULL == host) {
        if (req->free_buffer) {
            efa_device_release(req->buffer); /* Open MPI's device buffer to unpack from */
            req->free_buffer = false;
        }
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    note_context(req->buffer);
    req->device_buf = req->buffer;
    req->device_temp = req->free_buffer;
    req->on.device_landed = false; /* (set by the engine where it put the bytes there) */
    /* A read from another node may land in it by the provider (the
     * engine reads this only with a device_buf); not in Open MPI's packed
     * copy, a new allocation each time. */
    req->on.device_by_provider = ompi_mtl_efa.device_read && !req->device_temp;
    req->buffer = host;
    req->free_buffer = true;
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_device_provider_recv(mca_mtl_efa_request_t *req) {
    if (ompi_mtl_efa.device_hmem && 0 != req->length && !req->free_buffer &&
        on_device(req->convertor, req->buffer, req->length)) {
        /* (FI_READ: a rendezvous message is read into it, mtl_efa_rdv.c) */
        req->mr = hmem_register(req->buffer, req->length, FI_RECV | FI_READ);
        if (NULL != req->mr) {
            __atomic_fetch_add(&ompi_mtl_efa.device_hmem_received, 1, __ATOMIC_RELAXED);
            return OMPI_SUCCESS;
        }
    }
    return ompi_mtl_efa_device_stage_recv(req);
}

bool ompi_mtl_efa_device_post_refused(mca_mtl_efa_request_t *req, const char *call, int rc) {
    if (NULL == req->mr ||
        EFA_DEVICE_POST_NOT_REFUSED ==
            efa_core_mr_device_post_refused(ompi_mtl_efa.core, req->mr, call, rc)) {
        return false;
    }
    efa_core_mr_release(ompi_mtl_efa.core, req->mr);
    req->mr = NULL;
    /* (counted as handed to the provider: it was not) */
    __atomic_fetch_sub(req->is_send ? &ompi_mtl_efa.device_hmem_sent
                                    : &ompi_mtl_efa.device_hmem_received,
                       1, __ATOMIC_RELAXED);
    /* (the buffer is the user's device memory: only such is registered) */
    const int staged = req->is_send ? ompi_mtl_efa_device_stage_send(req->convertor, &req->buffer,
                                                                     req->length, &req->free_buffer)
                                    : ompi_mtl_efa_device_stage_recv(req);
    return OMPI_SUCCESS == staged;
}

/* Open MPI's packed device copy of a non-contiguous receive: unpacked
 * into the user's buffer, then given back (its own unpack does both), or
 * only given back where nothing was delivered.  The thread may be any
 * that progresses (the engine completes requests on whichever pops them)
 * and, where the engine put the bytes into dev itself, none of this
 * message's device copies made a context current on it: Open MPI's
 * unpack (cuMemcpyAsync) and its release (cuMemFree) would fail with
 * CUDA_ERROR_INVALID_CONTEXT and Open MPI 5 aborts on the copy's. */
static void unpack_device_temp(mca_mtl_efa_request_t *req, void *dev, size_t n) {
    mca_common_efa_cuda_context_here(dev, NULL);
    if (n > 0) {
        ompi_mtl_datatype_unpack(req->convertor, dev, n);
    } else {
        efa_device_release(dev);
    }
}

void ompi_mtl_efa_device_recv_done(mca_mtl_efa_request_t *req, size_t len, bool deliver,
                                   bool held) {
    void *dev = req->device_buf;
    const size_t n = !deliver ? 0 : len < req->length ? len : req->length;
    /* The engine put the bytes into dev itself (IPC on this node, or a
     * read from another node copied on piece by piece). */
    const bool landed = req->on.device_landed;
    req->device_buf = NULL;
    if (n > 0 && !landed && 0 != efa_device_copy(dev, req->buffer, n)) {
        copy_failed("a received message to the device", n);
        /* (a truncated one too: its count would name bytes never copied) */
        int *error = &req->super.ompi_req->req_status.MPI_ERROR;
        if (OMPI_SUCCESS == *error || MPI_ERR_TRUNCATE == *error) {
            *error = MPI_ERR_OTHER; /* (an MPI class: ompi_mtl_efa_status_error) */
        }
    }
    if (req->device_temp) {
        unpack_device_temp(req, dev, n);
    }
    /* (one that failed may still be the provider's; a cancelled one, or
     * one never posted, is not) */
    if (held) {
        efa_stage_drop(req->buffer);
    } else {
        efa_stage_free(req->buffer);
    }
    req->buffer = dev;
    req->free_buffer = req->device_temp = false;
}

/* What the engine did with device messages, at verbose 1 (those it
 * carried at all; mtl_efa's finalize). */
void ompi_mtl_efa_device_say_stats(const struct efa_engine_stats *s) {
    if (0 != s->device_ipc + s->device_streamed + s->device_self) {
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: device messages received from this node: %llu by the "
                            "device's IPC, %llu streamed through the host, %llu from this "
                            "process itself by one device copy",
                            (unsigned long long)s->device_ipc,
                            (unsigned long long)s->device_streamed,
                            (unsigned long long)s->device_self);
    }
    if (0 != mca_common_efa_cuda_context_given()) {
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: %lu threads without a CUDA context were given one for "
                            "device messages' driver calls",
                            mca_common_efa_cuda_context_given());
    }
    if (0 != s->device_read_pieces + s->device_read_direct) {
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: device messages read from other nodes: %llu read straight "
                            "into the device buffer's registration, %llu copied to the device "
                            "piece by piece as they came in (%llu pieces)",
                            (unsigned long long)s->device_read_direct,
                            (unsigned long long)s->device_read_landed,
                            (unsigned long long)s->device_read_pieces);
    }
    if (0 != s->device_stream_pieces) {
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: device messages streamed as DATA frames: %llu copied to the "
                            "device piece by piece as they came in (%llu pieces)",
                            (unsigned long long)s->device_stream_landed,
                            (unsigned long long)s->device_stream_pieces);
    }
    if (0 != s->device_send_read) {
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: device messages sent to other nodes: %llu offered for "
                            "reading from their registration",
                            (unsigned long long)s->device_send_read);
    }
    if (0 != s->device_send_staged) {
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: device messages sent to this node as DATA frames: %llu "
                            "copied to the host piece by piece as their frames went (%llu "
                            "pieces)",
                            (unsigned long long)s->device_send_staged,
                            (unsigned long long)s->device_send_pieces);
    }
}

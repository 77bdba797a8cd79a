/*
 * Device (GPU) buffers in mtl_efa: copied through the host with the
 * device's own copy (common/include/efa_device.h), at the MTL's entry, so
 * that no path behind it (the rings, the single copy, the engine's eager
 * copies, a provider without FI_HMEM) ever touches device memory.
 *
 * Who copies (mtl_efa_device_buffers):
 *   open-mpi  Open MPI 5's pml/cm does (its convertor packs device
 *             buffers into host memory for an MTL that says it takes no
 *             device memory); what Open MPI 4.1 with CUDA does likewise.
 *   own       this MTL does, through the core's device seam with Open
 *             MPI's accelerator as the backend: pml/cm is told that the
 *             MTL takes device buffers.  The seam is where registered
 *             bounce buffers, pipelining, IPC and FI_HMEM come next.
 *   auto      (default) open-mpi; own where the core's device is the fake
 *             of the tests (Open MPI does not know its memory).
 * Where Open MPI has no accelerator component loaded (4.1; 5.0 on a node
 * without a GPU driver) and no fake, verbose 1 says that device buffers
 * are not supported here.  Sends: one malloc and
 * one device copy before the send; receives: a host buffer, copied to the
 * device when the message is in.
 */
#include <string.h>

#include "mtl_efa_device.h"
#include "efa_device.h"

bool ompi_mtl_efa_device_init(void) {
    const mtl_efa_params_t *p = &ompi_mtl_efa_params;
    const bool want_own = 0 == strcmp(p->device_buffers, "own");
    const char *backend = efa_device_name(); /* installed by the core or the glue */
    bool accelerator_support = false;
    ompi_mtl_efa.device_staging = false;
    if (NULL != backend && 0 == strcmp(backend, "fake")) {
        /* The fake device (a test setting): Open MPI does not know its
         * memory, so this MTL copies whatever the setting. */
        ompi_mtl_efa.device_staging = !p->test.device_blind;
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices", "device buffers: %s",
                                  p->test.device_blind
                                      ? "handed on uncopied (mtl_efa_debug_device_blind, a test "
                                        "setting)"
                                      : "copied through the host by mtl_efa (the core's fake "
                                        "device)");
    } else if (NULL != backend && want_own) {
        ompi_mtl_efa.device_staging = true;
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
    } else {
        /* Open MPI 4.1, or 5.0 with no accelerator component loaded. */
        mca_common_efa_say_choice("mtl:efa", "mtl_efa devices",
                                  "device buffers: not supported here (Open MPI has no "
                                  "accelerator component loaded%s)",
                                  want_own ? "; mtl_efa_device_buffers own needs one" : "");
    }
    return accelerator_support;
}

void ompi_mtl_efa_device_fini(void) {
    ompi_mtl_efa.device_staging = false;
}

/* Said once: a device copy failed (the device's error is in its own
 * report). */
static void copy_failed(const char *what, size_t len) {
    static bool said = false;
    if (!said) {
        said = true;
        mca_common_efa_show_help("help-mtl-efa.txt", "device-copy-failed", true,
                                 opal_process_info.nodename, what, len, efa_device_name());
    }
}

int ompi_mtl_efa_device_stage_send(void **buffer, size_t length, bool *free_buffer) {
    if (0 == length || !efa_device_check(*buffer, length)) {
        return OMPI_SUCCESS;
    }
    void *host = malloc(length);
    if (NULL == host) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (0 != efa_device_copy(host, *buffer, length)) {
        copy_failed("a send's buffer to the host", length);
        free(host);
        return OMPI_ERROR;
    }
    if (*free_buffer) {
        efa_device_release(*buffer); /* Open MPI's packed device copy */
    }
    *buffer = host;
    *free_buffer = true;
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_device_stage_recv(mca_mtl_efa_request_t *req) {
    if (0 == req->length || !efa_device_check(req->buffer, req->length)) {
        return OMPI_SUCCESS;
    }
    void *host = malloc(req->length);
    if (NULL == host) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    req->device_buf = req->buffer;
    req->device_temp = req->free_buffer;
    req->buffer = host;
    req->free_buffer = true;
    return OMPI_SUCCESS;
}

void ompi_mtl_efa_device_recv_done(mca_mtl_efa_request_t *req, size_t len, bool deliver) {
    void *dev = req->device_buf;
    req->device_buf = NULL;
    if (deliver) {
        const size_t n = len < req->length ? len : req->length;
        if (0 != efa_device_copy(dev, req->buffer, n)) {
            copy_failed("a received message to the device", n);
            if (OMPI_SUCCESS == req->super.ompi_req->req_status.MPI_ERROR) {
                req->super.ompi_req->req_status.MPI_ERROR = OMPI_ERROR;
            }
        }
        if (req->device_temp) {
            /* Open MPI's packed device copy: unpacked into the user's
             * buffer, then given back (its own unpack does both). */
            ompi_mtl_datatype_unpack(req->convertor, dev, n);
        }
    } else if (req->device_temp) {
        efa_device_release(dev);
    }
    free(req->buffer);
    req->buffer = dev;
    req->free_buffer = req->device_temp = false;
}

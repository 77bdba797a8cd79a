/*
 * mtl_efa's buffer registration where the provider requires one
 * (FI_MR_LOCAL, as efa does): through the core's registration cache.  A
 * device buffer handed to the provider as it is was registered already
 * (mtl_efa_device.c): its descriptor is passed whatever FI_MR_LOCAL says.
 */
#include "mtl_efa.h"

int ompi_mtl_efa_reg_buffer(mca_mtl_efa_request_t *req, void **desc) {
    if (OPAL_UNLIKELY(NULL != req->mr)) {
        *desc = efa_mr_desc(req->mr); /* a device buffer's (mtl_efa_device.c) */
        return OMPI_SUCCESS;
    }
    *desc = NULL;
    if (!ompi_mtl_efa.mr_local || 0 == req->length) {
        return OMPI_SUCCESS;
    }
    int err = 0;
    uint64_t access = req->is_send ? FI_SEND : FI_RECV;
    req->mr = efa_core_mr_acquire(ompi_mtl_efa.core, req->buffer, req->length, access, &err);
    if (NULL == req->mr) {
        return ompi_mtl_efa_error(err);
    }
    *desc = efa_mr_desc(req->mr);
    return OMPI_SUCCESS;
}

/*
 * mtl_efa component: parameters, selection and module creation.
 */
#include "mtl_efa.h"
#include "common_efa_release.h"
#include "mtl_efa_device.h"

#include "opal/util/show_help.h"

static int ompi_mtl_efa_component_register(void);
static int ompi_mtl_efa_component_open(void);
static int ompi_mtl_efa_component_close(void);
static int ompi_mtl_efa_component_query(mca_base_module_t **module, int *priority);
static mca_mtl_base_module_t *ompi_mtl_efa_component_init(MTL_EFA_INIT_PARAMS);

mca_mtl_base_component_2_0_0_t mca_mtl_efa_component = {
    .mtl_version =
        {
            MCA_MTL_BASE_VERSION_2_0_0,
            .mca_component_name = "efa",
            MCA_COMMON_EFA_RELEASE_VERSION,
            .mca_open_component = ompi_mtl_efa_component_open,
            .mca_close_component = ompi_mtl_efa_component_close,
            .mca_query_component = ompi_mtl_efa_component_query,
            .mca_register_component_params = ompi_mtl_efa_component_register,
        },
    .mtl_data = {.param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT},
    .mtl_init = ompi_mtl_efa_component_init,
};

/* Does the job span nodes?  Then a node-local provider (shm) cannot serve it. */
static bool job_spans_nodes(void) {
    return mtl_efa_job_size() > (uint32_t)mca_common_efa_local_size();
}

static int ompi_mtl_efa_component_register(void) {
    ompi_mtl_efa_params_register(&mca_mtl_efa_component.mtl_version);
    return mca_common_efa_register_params(&mca_mtl_efa_component.mtl_version);
}

static int ompi_mtl_efa_component_open(void) {
    return OMPI_SUCCESS;
}

static int ompi_mtl_efa_component_close(void) {
    return OMPI_SUCCESS;
}

static int ompi_mtl_efa_component_query(mca_base_module_t **module, int *priority) {
    /* Only claim the job when a provider is really there: otherwise another
     * MTL (or pml/ob1) must get its chance. */
    bool asked = mca_common_efa_explicitly_requested("ompi", "mtl");
    if (OPAL_SUCCESS != mca_common_efa_probe(asked, job_spans_nodes())) {
        *module = NULL;
        *priority = -1;
        return OMPI_ERR_NOT_AVAILABLE;
    }
    *priority = ompi_mtl_efa_params.priority;
    *module = (mca_base_module_t *)&ompi_mtl_efa.base;
    return OMPI_SUCCESS;
}

static mca_mtl_base_module_t *ompi_mtl_efa_component_init(MTL_EFA_INIT_PARAMS) {
    int rc;
    (void)enable_progress_threads;
    MTL_EFA_INIT_ACCELERATOR(false);
    efa_core_t *core = mca_common_efa_acquire(enable_mpi_threads, job_spans_nodes(), &rc);
    if (NULL == core) {
        return NULL;
    }
    if (OMPI_SUCCESS != ompi_mtl_efa_module_init(core, enable_mpi_threads)) {
        mca_common_efa_release(core);
        return NULL;
    }
    if (OMPI_SUCCESS != ompi_mtl_efa_engine_init(enable_mpi_threads)) {
        /* The core may live on for btl_efa: nothing of this component may
         * stay registered with it once the component is unloaded. */
        ompi_mtl_efa_any_fini();
        free(ompi_mtl_efa.ctxs);
        ompi_mtl_efa.ctxs = NULL;
        mca_common_efa_release(core);
        return NULL;
    }
    MTL_EFA_INIT_ACCELERATOR(ompi_mtl_efa_device_init());
    ompi_mtl_efa_matching_publish();
    return &ompi_mtl_efa.base;
}

/*
 * What the program hears of the MTL's failures: a provider's or the
 * core's error as an OMPI code (a lost peer as one code, whatever found
 * it), and the message for a tag the provider's layout cannot carry.
 * Called from the error branches of every path, and out of line, so that
 * the hot functions around those branches stay as small as they were.
 */
#include "mtl_efa.h"

__opal_attribute_noinline__ int ompi_mtl_efa_error(int fi_err) {
    return efa_path_error(fi_err) ? MTL_EFA_ERR_LOST : mca_common_efa_fi_to_opal(fi_err);
}

void ompi_mtl_efa_tag_unfit(int tag) {
    static int said = 0;
    if (0 == __atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
        mca_common_efa_show_help("help-mtl-efa.txt", "tag-does-not-fit", false,
                                 opal_process_info.nodename, tag, (int)ompi_mtl_efa.codec.min_tag,
                                 (int)ompi_mtl_efa.codec.max_tag,
                                 efa_core_get_info(ompi_mtl_efa.core)->provider);
    }
}

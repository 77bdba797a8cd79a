/*
 * The node's processes' cpusets, for NIC selection (common_efa_cpusets.h).
 */
#include "common_efa_cpusets.h"

#include "common_efa.h"
#include "common_efa_compat.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "opal/constants.h"
#include "opal/util/output.h"

/* Read once: the runtime registers them before the processes start, and
 * they do not change.  The reads are optional ones, answered from what this
 * process already holds: they never wait for the modex. */
static char **node_cpusets = NULL;
static int num_node_cpusets = 0;
static bool node_cpusets_read = false;

static void free_cpusets(char **list, int count) {
    for (int i = 0; list && i < count; ++i) {
        free(list[i]);
    }
    free(list);
}

/* Each of the peers' cpusets ("" where it has none) at its local rank in
 * list, of size slots.  NULL, or why not. */
static const char *place_cpusets(char *peers, char **list, int size) {
    opal_process_name_t name = OPAL_PROC_MY_NAME;
    char *save = NULL;
    int placed = 0, rc;
    for (char *vpid = strtok_r(peers, ",", &save); NULL != vpid;
         vpid = strtok_r(NULL, ",", &save)) {
        uint16_t local_rank = 0, *local_rank_ptr = &local_rank;
        char *cpuset = NULL;
        name.vpid = (opal_vpid_t)strtoul(vpid, NULL, 10);
        OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, EFA_PMIX_LOCAL_RANK, &name, &local_rank_ptr,
                                       EFA_PMIX_UINT16);
        if (OPAL_SUCCESS != rc) {
            return "a process's local rank is not known";
        }
        if (local_rank >= size || NULL != list[local_rank]) {
            return "the local ranks are not those of the node's processes";
        }
        OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, EFA_PMIX_CPUSET, &name, &cpuset, EFA_PMIX_STRING);
        list[local_rank] = OPAL_SUCCESS == rc && NULL != cpuset ? cpuset : strdup("");
        if (NULL == list[local_rank]) {
            return "no memory";
        }
        ++placed;
    }
    return placed == size ? NULL : "the runtime's list of the node's processes is not complete";
}

static void read_node_cpusets(int size) {
    opal_process_name_t node = OPAL_PROC_MY_NAME;
    node.vpid = OPAL_VPID_WILDCARD;
    char *peers = NULL;
    int rc;
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, EFA_PMIX_LOCAL_PEERS, &node, &peers, EFA_PMIX_STRING);
    const char *why = "the runtime lists no processes of this node";
    char **list = NULL;
    if (OPAL_SUCCESS == rc && NULL != peers) {
        list = calloc((size_t)size, sizeof(*list));
        why = NULL == list ? "no memory" : place_cpusets(peers, list, size);
    }
    free(peers);
    if (NULL != why) {
        free_cpusets(list, size);
        opal_output_verbose(10, mca_common_efa_output,
                            "common:efa: the bindings of this node's %d processes are not known "
                            "(%s): NIC selection estimates who shares a NIC",
                            size, why);
        return;
    }
    int bound = 0;
    for (int i = 0; i < size; ++i) {
        bound += '\0' != list[i][0];
    }
    const int mine = mca_common_efa_local_rank();
    opal_output_verbose(10, mca_common_efa_output,
                        "common:efa: the runtime gave the bindings of %d of this node's %d "
                        "processes (this one's, local rank %d: \"%s\")",
                        bound, size, mine, mine >= 0 && mine < size ? list[mine] : "?");
    node_cpusets = list;
    num_node_cpusets = size;
}

int mca_common_efa_node_cpusets(const char *const **list) {
    const int size = mca_common_efa_local_size();
    if (!node_cpusets_read && size > 1) { /* (alone: nobody to share NICs with) */
        node_cpusets_read = true;
        read_node_cpusets(size);
    }
    *list = (const char *const *)node_cpusets;
    return num_node_cpusets;
}

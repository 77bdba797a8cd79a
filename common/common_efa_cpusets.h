/*
 * The bindings of this job's processes on this node, as the runtime
 * registered them with the job (the core's node_cpusets, efa_core.h).
 */
#ifndef MCA_COMMON_EFA_CPUSETS_H
#define MCA_COMMON_EFA_CPUSETS_H

/* How many processes of this node *list holds the cpusets of, by local
 * rank ("" for one the runtime gave none of); 0 and NULL when the runtime
 * does not tell them all, or this process is alone on its node.  Read at
 * the first call (verbose output says what was found) and kept. */
int mca_common_efa_node_cpusets(const char *const **list);

#endif

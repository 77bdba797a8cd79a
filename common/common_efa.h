/*
 * The OPAL side of the shared core, used by mtl_efa and btl_efa: shared
 * MCA parameters, opal_show_help, the modex, the progress callback and the
 * memory-release hook.  C, because the Open MPI headers are C.
 */
#ifndef MCA_COMMON_EFA_H
#define MCA_COMMON_EFA_H

#include "opal_config.h"

#include "opal/constants.h"
#include "opal/mca/base/mca_base_component_repository.h"
#include "opal/prefetch.h"
#include "opal/util/proc.h"

#include "common_efa_channel.h"
#include "common_efa_params.h"
#include "efa_core.h"
#include "efa_device.h"
#include "efa_node.h"

BEGIN_C_DECLS

/* Register the shared parameters once (as common_efa_*) and a synonym of
 * each under the calling component (mtl_efa_*, btl_efa_*), so ompi_info
 * shows them with either component. */
OPAL_DECLSPEC int mca_common_efa_register_params(const mca_base_component_t *component);
/* The core's MPI_T performance variables, common_efa_* (common_efa_pvars.c):
 * registered with the parameters, once. */
void mca_common_efa_register_pvars(void);

/* The shared parameters' current values. */
OPAL_DECLSPEC void mca_common_efa_get_params(efa_core_params_t *params, bool thread_multiple,
                                             bool need_remote_comm);

/* Is a usable provider there?  'explain': the user asked for this
 * component explicitly, so tell them why not. */
OPAL_DECLSPEC int mca_common_efa_probe(bool explain, bool need_remote_comm);

/* Open or share the core; the first caller also publishes the modex blob
 * and registers the progress callback.  Returns NULL with *opal_err set. */
OPAL_DECLSPEC efa_core_t *mca_common_efa_acquire(bool thread_multiple, bool need_remote_comm,
                                                 int *opal_err);
OPAL_DECLSPEC void mca_common_efa_release(efa_core_t *core);

/* Look a remote process up in the modex and insert it into the AV.
 * say_missing: a process the modex does not hold is said (help text and
 * its pause, as the job ends); else it is only refused (a name a message
 * carries, perhaps forged: its receiver says what it drops). */
OPAL_DECLSPEC efa_peer_t *mca_common_efa_peer_lookup(efa_core_t *core,
                                                     const opal_process_name_t *name,
                                                     bool say_missing, int *opal_err);

/* Show a help topic of 'file' on stderr, the way the core's own messages
 * go (Open MPI 4.1's show_help relay loses messages of several failing
 * processes).  same_everywhere: a configuration mistake every process
 * makes, so local rank 0 speaks first and the others only if the job is
 * still alive a second later (an int, not a bool: the last parameter
 * before "..." must not be one that promotes).  The arguments are the
 * topic's (%s). */
OPAL_DECLSPEC void mca_common_efa_show_help(const char *file, const char *topic,
                                            int same_everywhere, ...);
/* The core's help texts (help-common-efa.txt), as efa_core_set_reporters
 * wants them: used by the glue itself. */
void mca_common_efa_core_help(const char *topic, const char *a1, const char *a2, const char *a3);

/* Say the verbose-1 report (core_report.hpp) once per process: node-wide
 * lines from local rank 0, the NIC line from every rank.  Called at the
 * first add_procs, when both components have made their choices. */
OPAL_DECLSPEC void mca_common_efa_report(efa_core_t *core);

/* A component's choice, said at verbose 1 as "<prefix>: <text>" and added
 * to the report under 'who' (the core must be open). */
OPAL_DECLSPEC void mca_common_efa_say_choice(const char *prefix, const char *who, const char *fmt,
                                             ...) __opal_attribute_format__(__printf__, 3, 4);

/* A component that offers single copy or on-node rings to the node's
 * processes opens this process to them under Yama's ptrace_scope 1
 * (efa_cma_open_to_node, once per process: their single copy, their watch
 * on this process's exit and their attach through its inbox's descriptor
 * read its memory) and says, as its choice, what was done (once per
 * process).  Nothing with fewer than two processes on the node. */
OPAL_DECLSPEC void mca_common_efa_open_to_node(const char *prefix, const char *who);

/* Open MPI's accelerator framework as the core's device backend
 * (efa_device.h): NULL where Open MPI has none (4.1, or 5.0 with no
 * accelerator component but "null"). */
OPAL_DECLSPEC const efa_device_ops_t *mca_common_efa_device_ompi(void);
/* CUDA's IPC calls added to ops, from the driver Open MPI loaded
 * (common_efa_cuda_ipc.c, Open MPI 5): false where it cannot be. */
bool mca_common_efa_cuda_ipc(efa_device_ops_t *ops);
/* CUDA's dmabuf export added to ops, from the same driver
 * (common_efa_cuda_dmabuf.c, Open MPI 5): false where it cannot be. */
bool mca_common_efa_cuda_dmabuf(efa_device_ops_t *ops);
/* CUDA's pinning of host memory added to ops, from the same driver
 * (common_efa_cuda_pin.c, Open MPI 5): false where it cannot be. */
bool mca_common_efa_cuda_pin(efa_device_ops_t *ops);
/* CUDA's pointer attribute calls (efa_cuda_pointer.h) from the same driver
 * (common_efa_cuda_pointer.c, Open MPI 5): false where they cannot be. */
struct efa_cuda_pointer_calls;
bool mca_common_efa_cuda_pointer(struct efa_cuda_pointer_calls *cu);
/* A current context for the calling thread before the backend's CUDA
 * calls (efa_cuda_context.h), from the same driver
 * (common_efa_cuda_context.c, Open MPI 5): _load takes the driver's calls
 * (false where it cannot); _here gives the thread a's, b's or the last
 * one seen, and does nothing before a load; _given: threads given one. */
bool mca_common_efa_cuda_context_load(void);
void mca_common_efa_cuda_context_here(const void *a, const void *b);
/* Gives a thread without a current context the primary context of the
 * device last seen, once per thread (libfabric's own device copies in its
 * progress would otherwise make device 0's current). */
void mca_common_efa_cuda_context_thread(void);
unsigned long mca_common_efa_cuda_context_given(void);

/* Open MPI's memory hooks (common_efa_mem_hooks.c): started before the
 * first core opens, stopped after the last closes; on: every release of
 * memory is reported to the core (its params' mem_release_hooks). */
void mca_common_efa_mem_hooks_start(void);
void mca_common_efa_mem_hooks_stop(void);
bool mca_common_efa_mem_hooks_on(void);

/* Hand a file of this process (an on-node channel's inbox) to the runtime,
 * which removes it if the process dies without finalizing.  A runtime that
 * refuses is said at verbose 1 with the path: the file would then outlive
 * a crash (a normal finalize still removes it). */
OPAL_DECLSPEC void mca_common_efa_register_cleanup(const char *path);

/* The progress callback (one opal_progress hook for the whole stack)
 * runs the core's paced progress, then each function added here, in the
 * order added (the components' on-node channels).  Up to 4 functions. */
typedef int (*mca_common_efa_progress_fn_t)(void);
OPAL_DECLSPEC int mca_common_efa_progress_add(mca_common_efa_progress_fn_t fn);
OPAL_DECLSPEC void mca_common_efa_progress_remove(mca_common_efa_progress_fn_t fn);

/* The on-node stack (efa_node.h): one inbox per process whose channels the
 * components share, in the directory and of the geometry of the common
 * parameters (common_efa_onnode_dir, _slots, _slot_size). */
OPAL_DECLSPEC const char *mca_common_efa_onnode_dir(void); /* NULL: none */
OPAL_DECLSPEC bool mca_common_efa_onnode_dir_named(void);  /* set by the user */
OPAL_DECLSPEC void mca_common_efa_onnode_geometry(int *slots, size_t *slot_size);
/* This process's inbox file name (for messages). */
OPAL_DECLSPEC void mca_common_efa_node_file(char *buf, size_t len);
/* Take a reference to the node (the first creates its inbox and hands the
 * file to the runtime's cleanup).  NULL and *err (negative errno). */
OPAL_DECLSPEC efa_node_t *mca_common_efa_node_acquire(int *err);
/* Publish the node's card (after a channel opened): an OPAL error code. */
OPAL_DECLSPEC int mca_common_efa_node_publish(efa_node_t *node);
/* The card process 'name' published: false when none. */
OPAL_DECLSPEC bool mca_common_efa_node_card(const opal_process_name_t *name, efa_node_card_t *card);
/* A component's reference to the node dropped; the first to drop one says
 * (verbose 1) how many peers' inboxes were reached through their owners'
 * descriptors, their names having been removed. */
OPAL_DECLSPEC void mca_common_efa_node_put(efa_node_t *node);

/* libfabric error (negative) to an OPAL error code. */
OPAL_DECLSPEC int mca_common_efa_fi_to_opal(int fi_err);

/* The same, with success decided inline: the hot paths call this after
 * every post, and almost always with 0. */
static inline int mca_common_efa_rc(int fi_err) {
    return OPAL_LIKELY(0 == fi_err) ? OPAL_SUCCESS : mca_common_efa_fi_to_opal(fi_err);
}

/* Was the framework's selection string naming this component explicitly
 * (e.g. --mca mtl efa)?  Decides whether a decline is explained. */
OPAL_DECLSPEC bool mca_common_efa_explicitly_requested(const char *project, const char *framework);

OPAL_DECLSPEC extern int mca_common_efa_output;

END_C_DECLS
#endif

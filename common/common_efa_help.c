/*
 * OPAL glue: what the components and the core tell the user (help texts on
 * stderr, once per node where every process would say the same), and the
 * peers' modex entries turned into the core's peers, with libfabric's
 * errors in Open MPI's codes.
 */
#include "common_efa.h"
#include "common_efa_compat.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "opal/constants.h"
#include "opal/util/error.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

/* Configuration mistakes read the same in every process. */
static bool same_in_every_process(const char *topic) {
    static const char *const topics[] = {"bad-param",
                                         "conflicting-lists",
                                         "empty-list-item",
                                         "unknown-provider",
                                         "no-efa-device",
                                         "no-provider-matched",
                                         "unknown-excluded-provider",
                                         "conflicting-nic-lists",
                                         "unknown-nic",
                                         "no-nic-left",
                                         "empty-nic-list-item"};
    for (size_t i = 0; i < sizeof(topics) / sizeof(topics[0]); ++i) {
        if (0 == strcmp(topic, topics[i])) {
            return true;
        }
    }
    return false;
}

/*
 * Topics said while the job goes on, often from progress with the engine's
 * lock held: a registration refused for room, a rail taken out, a device
 * buffer's post refused, a forged sender.  None waits.  A peer's loss waits
 * the first time only: the job usually ends with it, but one that goes on
 * (an error handler that returns) must not stall once for every peer of a
 * node that died.
 */
static bool job_ends_with(const char *topic) {
    static const char *const going_on[] = {"registration-refused", "rail-lost",
                                           "device-post-refused", "forged-sender"};
    for (size_t i = 0; i < sizeof(going_on) / sizeof(going_on[0]); ++i) {
        if (0 == strcmp(topic, going_on[i])) {
            return false;
        }
    }
    if (0 == strcmp(topic, "peer-unreachable")) {
        static int said = 0;
        return 0 == __atomic_fetch_add(&said, 1, __ATOMIC_RELAXED);
    }
    return true;
}

/*
 * Every other topic ends in the components declining, and a job that asked for
 * them then aborts.  Open MPI 4.1 loses such messages when they travel the
 * runtime's show_help relay (several processes reporting at once arrive
 * "truncated": "Data unpack would read past end of buffer"; mtl/ofi's
 * messages suffer the same), so the text is rendered from the help file
 * here and written to stderr, whose forwarding mpirun flushes.  One copy
 * of a configuration mistake is enough: local rank 0 says it at once; the
 * others wait, and speak only if the job is still alive a second later
 * (local rank 0 was slow or did not get this far).
 */
static void emit_help(char *text, bool job_ends) {
    if (text) {
        fputs(text, stderr);
        fflush(stderr);
        free(text);
    }
    if (job_ends) {
        usleep(300 * 1000); /* let stderr reach mpirun before the job is torn down */
    }
}

void mca_common_efa_core_help(const char *topic, const char *a1, const char *a2, const char *a3) {
    if (same_in_every_process(topic) && mca_common_efa_local_rank() > 0) {
        usleep(1000 * 1000);
    }
    emit_help(opal_show_help_string("help-common-efa.txt", topic, true, opal_process_info.nodename,
                                    a1, a2, a3),
              job_ends_with(topic));
}

void mca_common_efa_show_help(const char *file, const char *topic, int same_everywhere, ...) {
    va_list ap;
    if (same_everywhere && mca_common_efa_local_rank() > 0) {
        usleep(1000 * 1000);
    }
    va_start(ap, same_everywhere);
    char *text = opal_show_help_vstring(file, topic, true, ap);
    va_end(ap);
    emit_help(text, true);
}

/* The seconds a message's lookup of a process of another job may wait for
 * the runtime.  A legitimate one (a job connected or spawned, whose data
 * the runtime holds once the connection is made) answers at once; a name
 * no runtime knows (a forged or stale message) would otherwise wait for
 * ever where the runtime defers the question until that job appears
 * (PMIx does, for a namespace it does not know), in the progress call. */
#define FOREIGN_LOOKUP_SECONDS 5

/* A modex entry of a process of another job, the wait bounded; an OPAL
 * code, *blob the caller's to free. */
static int modex_recv_bounded(const char *key, const opal_process_name_t *name, uint8_t **blob,
                              size_t *len) {
    *blob = NULL;
    *len = 0;
#if OPAL_MAJOR_VERSION >= 5
    pmix_proc_t proc;
    OPAL_PMIX_CONVERT_NAME(&proc, name);
    int seconds = FOREIGN_LOOKUP_SECONDS;
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
    pmix_value_t *kv = NULL;
    const pmix_status_t st = PMIx_Get(&proc, key, &info, 1, &kv);
    PMIX_INFO_DESTRUCT(&info);
    int rc = PMIX_SUCCESS == st ? OPAL_SUCCESS : opal_pmix_convert_status(st);
    if (OPAL_SUCCESS == rc && (NULL == kv || PMIX_BYTE_OBJECT != kv->type)) {
        rc = OPAL_ERR_NOT_FOUND;
    }
    if (OPAL_SUCCESS == rc) {
        *blob = (uint8_t *)kv->data.bo.bytes;
        *len = kv->data.bo.size;
        kv->data.bo.bytes = NULL; /* (now the caller's) */
        kv->data.bo.size = 0;
    }
    if (NULL != kv) {
        PMIX_VALUE_RELEASE(kv);
    }
    return rc;
#else
    opal_list_t info;
    OBJ_CONSTRUCT(&info, opal_list_t);
    opal_value_t *timeout = OBJ_NEW(opal_value_t);
    if (NULL == timeout || NULL == (timeout->key = strdup(OPAL_PMIX_TIMEOUT))) {
        if (NULL != timeout) {
            OBJ_RELEASE(timeout);
        }
        OPAL_LIST_DESTRUCT(&info);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    timeout->type = OPAL_INT;
    timeout->data.integer = FOREIGN_LOOKUP_SECONDS;
    opal_list_append(&info, &timeout->super);
    opal_value_t *kv = NULL;
    int rc = opal_pmix.get(name, key, &info, &kv);
    OPAL_LIST_DESTRUCT(&info);
    if (OPAL_SUCCESS == rc && (NULL == kv || OPAL_BYTE_OBJECT != kv->type)) {
        rc = OPAL_ERR_NOT_FOUND;
    }
    if (OPAL_SUCCESS == rc) {
        *blob = kv->data.bo.bytes;
        *len = kv->data.bo.size;
        kv->data.bo.bytes = NULL; /* (now the caller's) */
        kv->data.bo.size = 0;
    }
    if (NULL != kv) {
        OBJ_RELEASE(kv);
    }
    return rc;
#endif
}

efa_peer_t *mca_common_efa_peer_lookup(efa_core_t *core, const opal_process_name_t *name,
                                       bool say_missing, int *opal_err) {
    uint8_t *blob = NULL;
    size_t len = 0;
    int rc;
    if (!say_missing && name->jobid != OPAL_PROC_MY_NAME.jobid) {
        rc = modex_recv_bounded("common_efa", name, &blob, &len);
    } else {
        OPAL_MODEX_RECV_STRING(rc, "common_efa", name, &blob, &len);
    }
    if ((OPAL_SUCCESS != rc || NULL == blob) && !say_missing) {
        free(blob);
        *opal_err = OPAL_ERR_UNREACH;
        return NULL;
    }
    if (OPAL_SUCCESS != rc || NULL == blob) {
        /* Straight to stderr (Open MPI 4.1's relay loses messages of several
         * failing processes), with the runtime's answer. */
        mca_common_efa_show_help("help-common-efa.txt", "modex-missing", false,
                                 opal_process_info.nodename, OPAL_NAME_PRINT(*name),
                                 opal_strerror(mca_common_efa_modex_rc(rc)));
        *opal_err = OPAL_ERR_UNREACH;
        return NULL;
    }
    int err = 0;
    efa_peer_t *peer = efa_core_peer_get(core, blob, len, &err);
    free(blob);
    if (peer) {
        /* For the peer deadline's message: the rank and host a user knows. */
        char *host = NULL;
        char pname[256];
        OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, EFA_PMIX_HOSTNAME, name, &host, EFA_PMIX_STRING);
        snprintf(pname, sizeof(pname), "rank %u (%s) on host %s", (unsigned)name->vpid,
                 OPAL_NAME_PRINT(*name), (OPAL_SUCCESS == rc && host) ? host : "(unknown)");
        free(host);
        efa_core_peer_set_name(core, peer, pname);
    }
    *opal_err = peer ? OPAL_SUCCESS : mca_common_efa_fi_to_opal(err);
    return peer;
}

int mca_common_efa_fi_to_opal(int fi_err) {
    switch (-fi_err) {
    case 0:
        return OPAL_SUCCESS;
    case FI_EAGAIN:
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    case FI_ENOMEM:
    case FI_ENOSPC: /* the address vector is full (efa_core_peer_get) */
        return OPAL_ERR_OUT_OF_RESOURCE;
    case FI_EINVAL:
        return OPAL_ERR_BAD_PARAM;
    case FI_ENODATA:
    case FI_ENOSYS:
        return OPAL_ERR_NOT_AVAILABLE;
    case FI_EHOSTUNREACH:
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
        return OPAL_ERR_UNREACH;
    case FI_ETIMEDOUT:
        return OPAL_ERR_TIMEOUT;
    default:
        return OPAL_ERROR;
    }
}

/*
 * btl_efa single copy: put and get to another process of the same node by
 * Linux cross-memory attach (process_vm_writev / process_vm_readv).
 *
 * The initiator's CPU copies straight between its buffer and the target's
 * registered memory, so an operation is complete, at the target too, when
 * the system call returns: the callback is called before put/get return
 * and flush has nothing to wait for.  Atomics keep their path (the
 * provider's or the emulated one), and so do peers on other nodes.
 *
 * Which peers: those Open MPI reports on this node that also published,
 * through a node-local modex entry, their pid and the address and value of
 * a random cookie.  The first put or get to such a peer reads the cookie
 * out of that pid: only when the bytes match is the peer taken as reachable
 * (a pid of another pid namespace, a recycled pid or a kernel that refuses
 * -- EPERM from Yama's ptrace_scope, a container's seccomp policy, another
 * uid -- all fail there), otherwise the peer stays on the provider's path
 * for good, reported once at verbosity 1 (as a help message when the user
 * asked for cma).  Registration handles carry their owner's pid; a handle
 * is used for a direct copy only if that pid is the verified pid of the
 * peer addressed, and only inside the range it describes (byte-exact,
 * efa_rma_cma_check): the copy writes the target's memory without the
 * target or a provider checking anything.  The copy loop, the cookie and
 * its check are common's (efa_cma.h), shared with mtl_efa's matching engine.
 */
#include "btl_efa.h"
#include "btl_efa_rdma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "efa_cma.h"

#include "opal/mca/hwloc/base/base.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

/* What each process publishes to the processes of its node. */
typedef struct efa_btl_cma_card {
    uint64_t pid;
    uint64_t cookie_addr; /* where 'cookie' can be read in that process */
    uint64_t cookie;
} efa_btl_cma_card_t;

#define CMA_MODEX_KEY "btl_efa_cma"

/* The peer is not reachable by CMA: the provider's path from now on, said
 * once per job (a help message when the user asked for cma). */
void mca_btl_efa_cma_give_up(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                             const char *why) {
    static volatile int32_t said = 0;
    __atomic_store_n(&ep->cma, EFA_BTL_CMA_OFF, __ATOMIC_RELEASE);
    OPAL_THREAD_ADD_FETCH32(&btl->cma.fallbacks, 1);
    if (1 != OPAL_THREAD_ADD_FETCH32(&said, 1)) {
        return;
    }
    if (EFA_SINGLE_COPY_CMA == btl->cma.mode) {
        mca_common_efa_show_help("help-btl-efa.txt", "cma-refused", true,
                                 opal_process_info.nodename, OPAL_NAME_PRINT(ep->name), why);
    } else {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: single copy (CMA) to %s not possible, put/get take the "
                            "provider's path: %s",
                            OPAL_NAME_PRINT(ep->name), why);
    }
}

/* First put or get to ep: is the peer on this node and readable? */
static void cma_probe(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    char why[200];
    if (NULL == ep->proc) {
        /* Not through add_procs yet (only heard from): decide later. */
        __atomic_store_n(&ep->cma, EFA_BTL_CMA_UNKNOWN, __ATOMIC_RELEASE);
        return;
    }
    if (!OPAL_PROC_ON_LOCAL_NODE(ep->proc->proc_flags)) {
        /* another node: nothing to report */
        __atomic_store_n(&ep->cma, EFA_BTL_CMA_OFF, __ATOMIC_RELEASE);
        return;
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc;
    OPAL_MODEX_RECV_STRING(rc, CMA_MODEX_KEY, &ep->name, &bytes, &len);
    efa_btl_cma_card_t c;
    if (OPAL_SUCCESS != rc || NULL == bytes || sizeof(c) != len) {
        free(bytes);
        mca_btl_efa_cma_give_up(btl, ep,
                                "the peer published no single-copy address (btl_efa_single_copy "
                                "none there, or a build without CMA)");
        return;
    }
    memcpy(&c, bytes, sizeof(c));
    free(bytes);
    int err = mca_btl_efa_component.test.cma_refuse
                  ? EPERM
                  : efa_cma_verify((uint32_t)c.pid, c.cookie_addr, c.cookie);
    if (EFA_CMA_OTHER_PROCESS != err && 0 != err) {
        snprintf(why, sizeof(why), "process_vm_readv from pid %llu: %s%s",
                 (unsigned long long)c.pid, strerror(err),
                 EPERM == err ? " (ptrace_scope, a container's policy or another user)" : "");
        mca_btl_efa_cma_give_up(btl, ep, why);
        return;
    }
    if (EFA_CMA_OTHER_PROCESS == err) {
        snprintf(why, sizeof(why),
                 "pid %llu is not the peer seen from here (another pid namespace?)",
                 (unsigned long long)c.pid);
        mca_btl_efa_cma_give_up(btl, ep, why);
        return;
    }
    ep->cma_pid = (uint32_t)c.pid;
    __atomic_store_n(&ep->cma, EFA_BTL_CMA_ON, __ATOMIC_RELEASE);
}

int mca_btl_efa_cma_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                         const efa_btl_rdma_args_t *a) {
    const bool put = EFA_BTL_MSG_PUT == a->type;
    const uint64_t remote_address = a->remote_address;
    const size_t size = a->size;
    /* Acquire: a thread that sees ON sees cma_pid.  One thread probes
     * (threads used to probe at once, each writing cma_pid); the others
     * take the other paths meanwhile. */
    int32_t state = __atomic_load_n(&ep->cma, __ATOMIC_ACQUIRE);
    if (EFA_BTL_CMA_ON != state) {
        if (EFA_BTL_CMA_UNKNOWN != state ||
            !__atomic_compare_exchange_n(&ep->cma, &state, EFA_BTL_CMA_PROBING, false,
                                         __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
            return OPAL_ERR_NOT_AVAILABLE;
        }
        cma_probe(btl, ep);
        if (EFA_BTL_CMA_ON != __atomic_load_n(&ep->cma, __ATOMIC_ACQUIRE)) {
            return OPAL_ERR_NOT_AVAILABLE;
        }
    }
    switch (efa_rma_cma_check(&a->remote_handle->rma, ep->cma_pid, remote_address, size,
                              put ? MCA_BTL_REG_FLAG_REMOTE_WRITE : MCA_BTL_REG_FLAG_REMOTE_READ)) {
    case EFA_RMA_CMA_OK:
        break;
    case EFA_RMA_CMA_OUTSIDE:
        return mca_btl_efa_refuse(btl, ep, put ? "put" : "get", a);
    default:
        return OPAL_ERR_NOT_AVAILABLE;
    }
    static bool announced = false;
    /* A plain load first: the exchange is a locked instruction. */
    if (!__atomic_load_n(&announced, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&announced, true, __ATOMIC_RELAXED)) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: single copy (CMA) put/get in use");
    }
    size_t moved = 0;
    int err = efa_cma_copy(ep->cma_pid, put, a->cb.local_address, remote_address, size, &moved);
    int status = OPAL_SUCCESS;
    if (0 != err) {
        if (mca_btl_efa_cma_passing(err)) {
            return OPAL_ERR_NOT_AVAILABLE; /* this one by the provider; single copy stays */
        }
        if (EFAULT != err) {
            /* The kernel took the right away (or the process is gone):
             * the provider redoes the whole operation, which is harmless
             * for the bytes already copied (the same bytes again). */
            char why[160];
            snprintf(why, sizeof(why), "%s pid %u failed after %zu of %zu bytes: %s",
                     put ? "process_vm_writev to" : "process_vm_readv from", ep->cma_pid, moved,
                     size, strerror(err));
            mca_btl_efa_cma_give_up(btl, ep, why);
            return OPAL_ERR_NOT_AVAILABLE;
        }
        /* Inside the registration, yet not mapped in one of the two
         * processes: the memory was freed under the registration. */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: single-copy %s of %zu bytes at 0x%llx failed after %zu "
                            "bytes: %s",
                            put ? "put" : "get", size, (unsigned long long)remote_address, moved,
                            strerror(err));
        status = OPAL_ERR_BAD_PARAM;
    } else if (put) {
        OPAL_THREAD_ADD_FETCH64(&btl->cma.puts, 1);
    } else {
        OPAL_THREAD_ADD_FETCH64(&btl->cma.gets, 1);
    }
    mca_btl_efa_rdma_cb_call(btl, ep, &a->cb, status);
    return OPAL_SUCCESS;
}

/* Decide whether this job may use the single-copy path and, if so,
 * publish this process's card to the processes of its node.  Called from
 * component init, before the modex is exchanged. */
int mca_btl_efa_cma_init(mca_btl_efa_module_t *btl, efa_single_copy_mode_t mode) {
    btl->cma.mode = mode;
    btl->cma.allowed = false;
    btl->cma.my_pid = 0;
    btl->cma.puts = btl->cma.gets = 0;
    btl->cma.fallbacks = 0;
    if (EFA_SINGLE_COPY_NONE == mode || !efa_cma_built()) {
        return OPAL_SUCCESS;
    }
    efa_btl_cma_card_t card = {.pid = (uint64_t)getpid()};
    card.cookie = efa_cma_cookie(&card.cookie_addr);
    int rc;
    OPAL_MODEX_SEND_STRING(rc, EFA_PMIX_LOCAL, CMA_MODEX_KEY, &card, sizeof(card));
    if (OPAL_SUCCESS != rc) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: single copy (CMA) off: cannot publish the modex entry");
        return OPAL_SUCCESS;
    }
    btl->cma.allowed = true;
    btl->cma.my_pid = (uint32_t)getpid();
    mca_common_efa_open_to_node("btl:efa", "btl_efa");
    return OPAL_SUCCESS;
}

void mca_btl_efa_cma_fini(mca_btl_efa_module_t *btl) {
    if (btl->cma.allowed) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: single copy (CMA): %lld put(s), %lld get(s); %d peer(s) "
                            "left on the provider's path",
                            (long long)btl->cma.puts, (long long)btl->cma.gets,
                            (int)btl->cma.fallbacks);
    }
}

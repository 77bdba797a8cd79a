/*
 * mtl_efa's watch on the MPI_ANY_SOURCE receives the provider holds.
 *
 * Under the provider's matching an ANY_SOURCE receive is a tagged receive
 * for no address: nothing the core's peer deadline tracks, since it waits
 * on nobody in particular.  A peer whose host drops off the data network
 * would leave it posted for ever when that peer was the one to send.
 * ULFM's rule, which own matching follows too (engine_watch.cpp):
 * such a receive fails once a member of its communicator (the remote
 * group of an inter-communicator) is lost, since that member may be the
 * only one that would ever send what it waits for.
 *
 * So, while the deadline is on (common_efa_peer_timeout), every
 * ANY_SOURCE receive posted to the provider is on a list until the
 * provider hands it back (the lock and a link per such receive: directed
 * receives pay nothing).  About once a second, from the core's deadline
 * check, a sweep watches (efa_core_peer_watch) every member of each
 * communicator with such a receive posted for a whole sweep period (a
 * short wait, the common case, is never looked at twice), and ends the
 * watches nobody waits on any more.  A watched peer silent for half the
 * deadline is probed; unanswered, the core declares it lost and
 * watch_lost cancels every listed receive that may hear from it.  The
 * cancel's completion fails the receive (recv_finish: any_lost), unless
 * a message matched it first, which then completes as usual: nothing
 * received is dropped.  Receives posted after the loss fail at the next
 * sweep.
 *
 * Blocking probes wait with nothing posted at all: pml cm's MPI_Probe
 * calls iprobe until a message is there.  A probe that finds nothing
 * notes what it waits on (ompi_mtl_efa_any_probe_missed): its peer, or for
 * ANY_SOURCE its communicator, is watched for the next two sweeps, and once
 * a peer it waits on is lost the next miss returns the loss's error,
 * which ends MPI_Probe with it.
 *
 * The worst case from the start of a wait to the error: a sweep period to
 * be swept, one more to be watched, half a deadline of silence and a
 * deadline for the probe.
 */
#include "mtl_efa.h"

#include <rdma/fi_errno.h>

#include "ompi/group/group.h"
#include "opal/class/opal_hash_table.h"

/* One peer watched for the list's receives: kept from the first sweep
 * that wanted it to finalize (at most one per process of the job). */
typedef struct {
    efa_op_t op;              /* first: the core's call hands it back */
    opal_process_name_t name; /* the key (a peer may be released and made again) */
    bool on;                  /* the core watches it */
    bool waited;              /* a listed receive or a probe may hear from it (this sweep) */
    uint8_t probed;           /* sweeps still to watch it for a probe's miss */
    int err;                  /* declared lost: the error; 0 while alive */
} mtl_efa_any_watch_t;

/* A probe's miss watched for a few sweeps (renewed by each miss). */
#define MTL_EFA_PROBE_SWEEPS 2
/* ANY_SOURCE probes noted at once (a wait per thread in MPI_Probe, as a
 * rule); when full, the wait renewed longest ago goes. */
#define MTL_EFA_PROBE_COMMS 16

typedef struct {
    uint32_t cid;
    uint8_t sweeps;
    int err; /* a member was lost */
} mtl_efa_probe_comm_t;

static struct {
    /* Recursive: a cancel may complete its receive at once (the core's
     * backlog), and the completion takes the receive off the list. */
    opal_recursive_mutex_t lock;
    mca_mtl_efa_request_t *head;
    opal_hash_table_t watches; /* name_key() -> mtl_efa_any_watch_t * */
    mtl_efa_probe_comm_t probe_comms[MTL_EFA_PROBE_COMMS];
    int nprobe_comms;
} any;

static void sweep(void *arg);

void ompi_mtl_efa_any_init(void) {
    ompi_mtl_efa.any_watch = false;
    if (efa_core_peer_timeout(ompi_mtl_efa.core) <= 0) {
        return; /* nothing is ever declared lost */
    }
    OBJ_CONSTRUCT(&any.lock, opal_recursive_mutex_t);
    OBJ_CONSTRUCT(&any.watches, opal_hash_table_t);
    any.head = NULL;
    any.nprobe_comms = 0;
    if (OPAL_SUCCESS != opal_hash_table_init(&any.watches, 64) ||
        0 != efa_core_add_deadline_tick(ompi_mtl_efa.core, sweep, NULL)) {
        OBJ_DESTRUCT(&any.watches);
        OBJ_DESTRUCT(&any.lock);
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "ANY_SOURCE receives unwatched (out of memory): a lost "
                                  "peer's may wait for ever");
        return;
    }
    ompi_mtl_efa.any_watch = true;
}

void ompi_mtl_efa_any_fini(void) {
    if (!ompi_mtl_efa.any_watch) {
        return;
    }
    efa_core_remove_deadline_tick(ompi_mtl_efa.core, sweep, NULL);
    uint64_t key;
    void *value, *node;
    int rc = opal_hash_table_get_first_key_uint64(&any.watches, &key, &value, &node);
    while (OPAL_SUCCESS == rc) {
        mtl_efa_any_watch_t *w = value;
        if (w->on) {
            efa_core_peer_unwatch(ompi_mtl_efa.core, &w->op);
        }
        free(w);
        rc = opal_hash_table_get_next_key_uint64(&any.watches, &key, &value, node, &node);
    }
    OBJ_DESTRUCT(&any.watches);
    OBJ_DESTRUCT(&any.lock);
    ompi_mtl_efa.any_watch = false;
}

void ompi_mtl_efa_any_link(mca_mtl_efa_request_t *req) {
    OPAL_THREAD_LOCK(&any.lock);
    req->any_prev = NULL;
    req->any_next = any.head;
    if (any.head) {
        any.head->any_prev = req;
    }
    any.head = req;
    req->any_linked = true;
    /* (held until the post is made: ompi_mtl_efa_any_posted) */
}

void ompi_mtl_efa_any_posted(void) {
    OPAL_THREAD_UNLOCK(&any.lock);
}

void ompi_mtl_efa_any_unlink_slow(mca_mtl_efa_request_t *req) {
    OPAL_THREAD_LOCK(&any.lock);
    if (req->any_prev) {
        req->any_prev->any_next = req->any_next;
    } else {
        any.head = req->any_next;
    }
    if (req->any_next) {
        req->any_next->any_prev = req->any_prev;
    }
    req->any_linked = false;
    OPAL_THREAD_UNLOCK(&any.lock);
}

/* May a receive of comm hear from the process 'name'?  By name: nothing is
 * allocated for members never talked to. */
static bool comm_hears(ompi_communicator_t *comm, const opal_process_name_t *name) {
    ompi_group_t *g = comm->c_remote_group; /* an intra-communicator's is its own */
    const int n = ompi_group_size(g);
    for (int i = 0; i < n; ++i) {
        const opal_process_name_t m = ompi_group_get_proc_name(g, i);
        if (m.jobid == name->jobid && m.vpid == name->vpid) {
            return true;
        }
    }
    return false;
}

/* The lock is held.  Every listed receive that may hear from w's peer,
 * lost with w->err, is cancelled; its completion fails it. */
static void fail_hearing(mtl_efa_any_watch_t *w) {
    mca_mtl_efa_request_t *next;
    for (mca_mtl_efa_request_t *r = any.head; NULL != r; r = next) {
        next = r->any_next; /* a cancel may unlink r at once, never another */
        if (0 == r->any_lost && comm_hears(r->comm, &w->name)) {
            r->any_lost = w->err;
            (void)efa_ctx_cancel(r->ctx, &r->op);
        }
    }
}

/* The lock is held.  The ANY_SOURCE probes of communicators w's peer
 * belongs to fail at their next miss. */
static void fail_probes(const mtl_efa_any_watch_t *w) {
    for (int i = 0; i < any.nprobe_comms; ++i) {
        mtl_efa_probe_comm_t *pc = &any.probe_comms[i];
        ompi_communicator_t *comm = ompi_comm_lookup(pc->cid);
        if (0 == pc->err && NULL != comm && comm_hears(comm, &w->name)) {
            pc->err = w->err;
        }
    }
}

/* The core declared a watched peer lost (its message naming the peer is
 * out); from progress or the deadline check, no lock of ours held. */
static void watch_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    mtl_efa_any_watch_t *w = (mtl_efa_any_watch_t *)op;
    OPAL_THREAD_LOCK(&any.lock);
    w->on = false;
    w->err = cqe->err ? cqe->err : -FI_EHOSTUNREACH;
    fail_hearing(w);
    fail_probes(w);
    OPAL_THREAD_UNLOCK(&any.lock);
}

static uint64_t name_key(opal_process_name_t name) {
    return (uint64_t)name.jobid << 32 | name.vpid;
}

/* The lock is held.  The watch of the process at rank i of comm's remote
 * group, made on first use (and its peer with it: the first message to
 * it would make it too); NULL for this process or one unreachable. */
static mtl_efa_any_watch_t *watch_of(ompi_communicator_t *comm, int i) {
    ompi_proc_t *proc = ompi_group_peer_lookup(comm->c_remote_group, i);
    if (NULL == proc || ompi_proc_local() == proc ||
        (NULL == proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL] &&
         NULL == ompi_mtl_efa_peer_slow(proc))) {
        return NULL;
    }
    const uint64_t key = name_key(proc->super.proc_name);
    void *value = NULL;
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&any.watches, key, &value)) {
        return value;
    }
    mtl_efa_any_watch_t *w = calloc(1, sizeof(*w));
    if (NULL == w) {
        return NULL; /* the next sweep asks again */
    }
    w->name = proc->super.proc_name;
    w->op.complete = watch_lost;
    if (OPAL_SUCCESS != opal_hash_table_set_value_uint64(&any.watches, key, w)) {
        free(w);
        return NULL;
    }
    return w;
}

/* The core's peer of a watched process now, or NULL (released at
 * del_procs: nothing is watched then). */
static efa_peer_t *peer_now(const mtl_efa_any_watch_t *w) {
    ompi_proc_t *proc = (ompi_proc_t *)ompi_proc_for_name(w->name);
    return NULL == proc ? NULL : (efa_peer_t *)proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
}

/* The lock is held.  Marks every member of comm waited on (each
 * communicator once per sweep: seen); the error of a member lost, or 0. */
static int mark_members(ompi_communicator_t *comm, ompi_communicator_t **seen, size_t *nseen) {
    for (size_t i = 0; i < *nseen; ++i) {
        if (seen[i] == comm) {
            return 0;
        }
    }
    seen[(*nseen)++] = comm;
    int err = 0;
    const int n = ompi_group_size(comm->c_remote_group);
    for (int i = 0; i < n; ++i) {
        mtl_efa_any_watch_t *w = watch_of(comm, i);
        if (w) {
            w->waited = true;
            err = err ? err : w->err;
        }
    }
    return err;
}

int ompi_mtl_efa_any_probe_missed(ompi_communicator_t *comm, int src) {
    int err = 0;
    OPAL_THREAD_LOCK(&any.lock);
    if (MPI_ANY_SOURCE != src) {
        mtl_efa_any_watch_t *w = watch_of(comm, src);
        if (w && 0 == (err = w->err)) {
            w->probed = MTL_EFA_PROBE_SWEEPS;
        }
        OPAL_THREAD_UNLOCK(&any.lock);
        return err ? ompi_mtl_efa_error(err) : OMPI_SUCCESS;
    }
    const uint32_t cid = mtl_efa_comm_cid(comm);
    mtl_efa_probe_comm_t *pc = NULL;
    for (int i = 0; i < any.nprobe_comms && NULL == pc; ++i) {
        pc = any.probe_comms[i].cid == cid ? &any.probe_comms[i] : NULL;
    }
    if (NULL == pc && any.nprobe_comms < MTL_EFA_PROBE_COMMS) {
        pc = &any.probe_comms[any.nprobe_comms++];
        pc->cid = cid;
        pc->err = 0;
    } else if (NULL == pc) {
        pc = &any.probe_comms[0]; /* full: replace the wait renewed longest ago */
        for (int i = 1; i < MTL_EFA_PROBE_COMMS; ++i) {
            if (any.probe_comms[i].sweeps < pc->sweeps) {
                pc = &any.probe_comms[i];
            }
        }
        pc->cid = cid;
        pc->err = 0;
    }
    pc->sweeps = MTL_EFA_PROBE_SWEEPS;
    err = pc->err;
    OPAL_THREAD_UNLOCK(&any.lock);
    return err ? ompi_mtl_efa_error(err) : OMPI_SUCCESS;
}

/* The lock is held.  The probes' waits: peers of directed ones marked,
 * ANY_SOURCE ones' communicators' members marked (seen), and a wait on a
 * member lost takes its error; those no miss renewed are dropped. */
static void sweep_probes(ompi_communicator_t **seen, size_t *nseen) {
    uint64_t key;
    void *value, *node;
    int rc = opal_hash_table_get_first_key_uint64(&any.watches, &key, &value, &node);
    while (OPAL_SUCCESS == rc) {
        mtl_efa_any_watch_t *w = value;
        if (w->probed) {
            w->waited = true;
            --w->probed;
        }
        rc = opal_hash_table_get_next_key_uint64(&any.watches, &key, &value, node, &node);
    }
    for (int i = 0; i < any.nprobe_comms;) {
        mtl_efa_probe_comm_t *pc = &any.probe_comms[i];
        ompi_communicator_t *comm = ompi_comm_lookup(pc->cid);
        if (NULL == comm || 0 == pc->sweeps) {
            *pc = any.probe_comms[--any.nprobe_comms]; /* freed, or no longer waited */
            continue;
        }
        --pc->sweeps;
        const int err = mark_members(comm, seen, nseen);
        pc->err = pc->err ? pc->err : err;
        ++i;
    }
}

/* About once a second, from the core's deadline check (no lock held). */
static void sweep(void *arg) {
    (void)arg;
    OPAL_THREAD_LOCK(&any.lock);
    if (NULL == any.head && 0 == opal_hash_table_get_size(&any.watches) && 0 == any.nprobe_comms) {
        OPAL_THREAD_UNLOCK(&any.lock); /* the common case: nothing waits */
        return;
    }
    uint64_t key;
    void *value, *node;
    int rc = opal_hash_table_get_first_key_uint64(&any.watches, &key, &value, &node);
    while (OPAL_SUCCESS == rc) {
        ((mtl_efa_any_watch_t *)value)->waited = false;
        rc = opal_hash_table_get_next_key_uint64(&any.watches, &key, &value, node, &node);
    }
    /* The communicators of receives listed since the sweep before. */
    size_t listed = 0, nseen = 0;
    for (mca_mtl_efa_request_t *r = any.head; NULL != r; r = r->any_next) {
        ++listed;
    }
    /* The communicators first, the members after: looking a member up may
     * add it (the runtime's modex), which must not run under the walk. */
    ompi_communicator_t **comms = malloc(listed * sizeof(*comms) + 1);
    ompi_communicator_t **seen = malloc((listed + MTL_EFA_PROBE_COMMS) * sizeof(*seen));
    size_t ncomms = 0;
    for (mca_mtl_efa_request_t *r = any.head; NULL != r && NULL != comms; r = r->any_next) {
        if (!r->any_swept) {
            r->any_swept = true;
        } else if (0 == r->any_lost) {
            comms[ncomms++] = r->comm; /* kept by the pending request */
        }
    }
    for (size_t i = 0; i < ncomms && NULL != seen; ++i) {
        (void)mark_members(comms[i], seen, &nseen);
    }
    if (NULL != seen) {
        sweep_probes(seen, &nseen);
    }
    free(comms);
    free(seen);
    rc = opal_hash_table_get_first_key_uint64(&any.watches, &key, &value, &node);
    while (OPAL_SUCCESS == rc) {
        mtl_efa_any_watch_t *w = value;
        if (w->waited && w->err) {
            fail_hearing(w); /* receives posted after it was lost */
        } else if (w->waited && !w->on && NULL != peer_now(w)) {
            const int err = efa_core_peer_watch(ompi_mtl_efa.core, peer_now(w), &w->op);
            w->on = 0 == err;
            if (-FI_EHOSTUNREACH == err) { /* lost already, through another operation */
                w->err = err;
                fail_hearing(w);
            }
        } else if (!w->waited && w->on) {
            efa_core_peer_unwatch(ompi_mtl_efa.core, &w->op);
            w->on = false;
        }
        rc = opal_hash_table_get_next_key_uint64(&any.watches, &key, &value, node, &node);
    }
    OPAL_THREAD_UNLOCK(&any.lock);
}

void ompi_mtl_efa_any_comm_freed(struct ompi_communicator_t *comm) {
    if (!ompi_mtl_efa.any_watch) {
        return;
    }
    const uint32_t cid = mtl_efa_comm_cid(comm); /* it may name another one next */
    OPAL_THREAD_LOCK(&any.lock);
    for (int i = 0; i < any.nprobe_comms;) {
        if (any.probe_comms[i].cid == cid) {
            any.probe_comms[i] = any.probe_comms[--any.nprobe_comms];
        } else {
            ++i;
        }
    }
    OPAL_THREAD_UNLOCK(&any.lock);
}

/*
 * btl_sendi: btl_efa's sendi keeps the BTL interface's promise when it
 * cannot send at once: OPAL_ERR_RESOURCE_BUSY together with a descriptor
 * of the message's size, which the caller fills and hands to btl_send.
 *
 * Why it matters: Open MPI 5's ob1 sends its control messages (the FIN of
 * a rendezvous, ACKs) by sendi and, given no descriptor, parks them on a
 * list it retries only when a descriptor of the BTL completes.  A receiver
 * that had used up its credits after a window of 64 rendezvous messages
 * between two nodes parked its last FINs there for ever and the sender
 * never finished (docs/PLATFORMS.md).
 *
 * Two ranks under pml ob1 with btl efa,self (run only in ob1-efa-*
 * configurations).  Rank 1 stops progressing for a while; rank 0 calls
 * btl_efa's sendi itself with a tag nobody registered (the receiver drops
 * those) until the peer's credits (provider path) or its ring (on-node
 * channel) are used up and sendi says busy.  The descriptor it must hand
 * back is then sent with btl_send, and its completion callback must come
 * once rank 1 progresses again.
 *
 * Options: -n MAX (sendi calls before giving up waiting for busy,
 *          default 1000000).
 */
#define _GNU_SOURCE
#include "test_util.h"

#include "btl_efa_dl.h"
#include "opal_config.h"
#include "opal/mca/btl/btl.h"
#include "opal/util/proc.h"

/* A user tag no upper layer registers: the receiver drops the messages. */
#define SENDI_TAG (MCA_BTL_TAG_USR + 7)
#define HDR_BYTES 16

typedef struct mca_btl_base_endpoint_t *(*endpoint_by_name_fn)(void *btl, uint64_t name,
                                                               void *proc);

static volatile int sent_done = 0;
static volatile int sent_status = 1;

static void on_sent(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                    struct mca_btl_base_descriptor_t *des, int status) {
    (void)btl;
    (void)ep;
    (void)des;
    sent_status = status;
    sent_done = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    long max_calls = 1000000;
    tu_init(&argc, &argv, "btl_sendi");
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "-n") && i + 1 < argc) {
            max_calls = atol(argv[++i]);
        }
    }
    TU_ASSERT(2 == tu_size, "needs 2 ranks, got %d", tu_size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (1 == tu_rank) {
        /* No progress: the peer's sends pile up in the provider's queues
         * or in this rank's ring. */
        double end = now_s() + 2.0;
        while (now_s() < end) {
        }
        MPI_Barrier(MPI_COMM_WORLD);
        tu_ok("rank 1");
        return 0;
    }

    char why[4200];
    void *lib = efa_test_open_btl_efa(why, sizeof(why));
    TU_ASSERT(lib, "%s", why);
    mca_btl_base_module_t *btl = dlsym(lib, "mca_btl_efa_module");
    endpoint_by_name_fn by_name = (endpoint_by_name_fn)dlsym(lib, "mca_btl_efa_endpoint_by_name");
    TU_ASSERT(btl && btl->btl_sendi && btl->btl_send && by_name, "btl_efa's symbols are missing");
    /* From libopen-pal, which MPI_LIBS does not name: looked up. */
    opal_proc_t *(*local_proc)(void) =
        (opal_proc_t * (*)(void)) dlsym(RTLD_DEFAULT, "opal_proc_local_get");
    TU_ASSERT(local_proc && local_proc(), "opal_proc_local_get is missing");
    opal_process_name_t peer = local_proc()->proc_name;
    peer.vpid = 1; /* rank 1 of MPI_COMM_WORLD */
    uint64_t key;
    memcpy(&key, &peer, sizeof(key));
    struct mca_btl_base_endpoint_t *ep = by_name(btl, key, NULL);
    TU_ASSERT(ep, "no btl_efa endpoint for rank 1");

    uint8_t hdr[HDR_BYTES];
    memset(hdr, 0xab, sizeof(hdr));
    const uint32_t flags = MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    mca_btl_base_descriptor_t *des = NULL;
    int rc = OPAL_SUCCESS;
    long calls = 0;
    for (; calls < max_calls; ++calls) {
        des = NULL;
        rc = btl->btl_sendi(btl, ep, NULL, hdr, sizeof(hdr), 0, MCA_BTL_NO_ORDER, flags, SENDI_TAG,
                            &des);
        if (OPAL_SUCCESS != rc) {
            break;
        }
    }
    TU_ASSERT(OPAL_ERR_RESOURCE_BUSY == rc, "sendi never said busy in %ld calls (last rc %d)",
              calls, rc);
    TU_ASSERT(NULL != des,
              "sendi said busy after %ld sends without handing back a descriptor (ob1 of Open "
              "MPI 5 would park its control message for ever)",
              calls);
    TU_ASSERT(des->des_segment_count >= 1 && des->des_segments[0].seg_len >= sizeof(hdr),
              "the descriptor sendi handed back holds %zu bytes, less than the %zu asked",
              (size_t)des->des_segments[0].seg_len, sizeof(hdr));
    memcpy(des->des_segments[0].seg_addr.pval, hdr, sizeof(hdr));
    des->des_cbfunc = on_sent;
    rc = btl->btl_send(btl, ep, des, SENDI_TAG);
    TU_ASSERT(rc >= 0, "btl_send of the descriptor sendi handed back failed: %d", rc);
    /* Rank 1 progresses again from its barrier on: the queued send goes. */
    MPI_Barrier(MPI_COMM_WORLD);
    double end = now_s() + 30.0;
    while (!sent_done && now_s() < end) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    TU_ASSERT(sent_done, "the send of the handed-back descriptor never completed");
    TU_ASSERT(OPAL_SUCCESS == sent_status, "the send of the handed-back descriptor failed: %d",
              sent_status);
    tu_ok("rank 0: busy after %ld sendi calls, the descriptor handed back was sent", calls);
    return 0;
}

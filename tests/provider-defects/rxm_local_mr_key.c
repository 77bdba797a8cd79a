/*
 * Reproducer: libfabric 2.x's tcp;ofi_rxm (seen with 2.6.0), when the domain
 * has FI_ATOMIC, refuses the second registration that has no remote access
 * (FI_RECV only, say) with -FI_ENOKEY.  Such registrations get no key from
 * the util MR code (FI_KEY_NOTAVAIL), and rxm files every registration in
 * its atomic-verification map under its key: two local-only ones collide.
 * With FI_MR_LOCAL (efa-direct requires it) every receive buffer is such a
 * registration.  libfabric 1.17 gives every registration a key of its own.
 * The core works around it (common/core.cpp, FiMrBackend::reg).
 *
 * Prints "defect present" (exit 1) when the second registration fails,
 * "no defect" (exit 0) otherwise.
 *   cc rxm_local_mr_key.c -lfabric && ./a.out "tcp;ofi_rxm"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

int main(int argc, char **argv) {
    const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
    hints->ep_attr->type = FI_EP_RDM;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->fabric_attr->prov_name = strdup(prov);
    int rc = fi_getinfo(fi_version(), NULL, NULL, 0, hints, &info);
    if (rc) {
        printf("cannot test: fi_getinfo(%s): %s\n", prov, fi_strerror(-rc));
        return 2;
    }
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    if (fi_fabric(info->fabric_attr, &fabric, NULL) || fi_domain(fabric, info, &domain, NULL)) {
        printf("cannot test: fabric or domain\n");
        return 2;
    }
    static char buf[2][4096];
    struct fid_mr *mr[2] = {NULL, NULL};
    int result = 0;
    for (int i = 0; i < 2; ++i) {
        rc =
            fi_mr_reg(domain, buf[i], sizeof(buf[i]), FI_RECV, 0, (uint64_t)i + 1, 0, &mr[i], NULL);
        if (rc) {
            mr[i] = NULL; /* rxm has freed it already, though it handed it out */
            printf("defect present: registration %d (FI_RECV only) failed: %s\n", i + 1,
                   fi_strerror(-rc));
            result = 1;
            break;
        }
    }
    if (0 == result) {
        printf("no defect: two local-only registrations on %s\n", prov);
    }
    for (int i = 0; i < 2; ++i) {
        if (mr[i]) {
            fi_close(&mr[i]->fid);
        }
    }
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    return result;
}

// A whole core opened for a unit test, with the peer entry of its own
// address, so that a test can send to itself (from context 1 to context 0,
// as to a process on another node).  Both are released when it goes.
#pragma once

#include <gtest/gtest.h>

#include "efa_core.h"

class CoreWithSelf {
  public:
    CoreWithSelf() = default;
    CoreWithSelf(const CoreWithSelf &) = delete;
    CoreWithSelf &operator=(const CoreWithSelf &) = delete;
    ~CoreWithSelf() {
        if (self_) {
            efa_core_peer_put(core_, self_);
        }
        if (core_) {
            efa_core_release(core_);
        }
    }

    ::testing::AssertionResult open(const efa_core_params_t &p) {
        int err = 0;
        core_ = efa_core_acquire(&p, &err);
        if (!core_) {
            return ::testing::AssertionFailure() << "efa_core_acquire: " << err;
        }
        const void *blob = nullptr;
        size_t len = 0;
        if ((err = efa_core_local_blob(core_, &blob, &len)) != 0) {
            return ::testing::AssertionFailure() << "efa_core_local_blob: " << err;
        }
        self_ = efa_core_peer_get(core_, blob, len, &err);
        if (!self_) {
            return ::testing::AssertionFailure() << "efa_core_peer_get (own blob): " << err;
        }
        return ::testing::AssertionSuccess();
    }
    efa_core_t *core() const { return core_; }
    efa_peer_t *self() const { return self_; }

  private:
    efa_core_t *core_ = nullptr;
    efa_peer_t *self_ = nullptr;
};

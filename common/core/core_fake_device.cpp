// The fake device of the tests (efa_device.h) installed for a core that
// asks for it (common_efa_debug_fake_device and its settings), and what
// is said of it.
#include <string>

#include "core.hpp"
#include "efa_device.h"

namespace efa {

void install_fake_device(efa_core *core) {
    const efa_core_params_t &p = core->params;
    efa_device_install(efa_fake_device_ops());
    efa_fake_device_refuse_ipc(p.debug_fake_device_no_ipc);
    efa_fake_device_visible(p.debug_fake_device_hmem);
    efa_fake_device_no_sync_memops(p.debug_fake_device_vmm);
    efa_fake_device_pieces(static_cast<size_t>(p.debug_fake_device_piece));
    core->dev_refuse_test.store(0 != p.debug_fake_device_refuse_post);
    core->rep.say(
        1, std::string("device memory: the fake device's (a test setting), ") +
               (p.debug_fake_device_hmem ? "visible to the CPU and the provider (FI_HMEM_SYSTEM)"
                                         : "which the CPU cannot touch") +
               (p.debug_fake_device_hmem && p.debug_fake_device_vmm
                    ? ", described as memory without synchronous memory "
                      "operations (as CUDA VMM memory)"
                    : "") +
               (p.debug_fake_device_piece > 0
                    ? "; its allocations above " + std::to_string(p.debug_fake_device_piece) +
                          " bytes are pieces of that size side by side"
                    : "") +
               (p.debug_fake_device_no_ipc ? "; it refuses IPC" : "") +
               (0 != p.debug_fake_device_refuse_post
                    ? "; the provider's posts of its registrations refused"
                    : ""));
}

void uninstall_fake_device() {
    efa_device_install(nullptr);
    efa_fake_device_pieces(0); // (a setting of the core that installed it)
}

} // namespace efa

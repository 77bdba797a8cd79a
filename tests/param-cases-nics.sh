# Cases of run-param-tests.sh (sourced: its runner and cm): the NIC
# lists, a GPU named that the host lacks, and the MTL's empty choices.
# shellcheck shell=bash disable=SC2154
# NIC lists: names this host does not offer (a mistyped exclusion would
# keep its NIC in use), both lists at once, and a list that leaves none.
expect_failure nic-include-unknown "Unknown NIC:   rdmap99s0" \
    "${cm[@]}" --mca mtl_efa_provider_include shm --mca common_efa_nic_include rdmap99s0
expect_failure nic-exclude-unknown "Unknown NIC:   rdmap99s0" \
    "${cm[@]}" --mca mtl_efa_provider_include shm --mca common_efa_nic_exclude rdmap99s0
expect_failure nic-lists-conflict "Both an include list and an exclude list of NICs" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_nic_include shm \
    --mca common_efa_nic_exclude shm
expect_failure nic-empty-item "has an empty item" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_nic_include "shm,"
expect_failure nic-exclude-all "leaves no NIC to use" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_nic_exclude shm
expect_output nic-include-named "report: local rank [01]: NIC shm" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_nic_include shm --mca common_efa_verbose 1
# A GPU named that this host lacks, where one NIC leaves nothing to choose
# by GPU: refused as where several NICs are (no GPU here: index 0 too).
expect_failure gpu-index-unknown-one-nic "common_efa_gpu 0: the node's accelerators are" \
    "${cm[@]}" --mca mtl_efa_provider_include shm --mca common_efa_gpu 0
expect_failure gpu-address-unknown-one-nic "common_efa_gpu 0000:99:00.0: no accelerator" \
    "${cm[@]}" --mca mtl_efa_provider_include shm --mca common_efa_gpu 0000:99:00.0
# An empty choice is its default, auto, as for btl_efa's modes (Open MPI
# keeps "" as unset).
expect_output mtl-empty-choices-are-auto "matching: [a-z]+ \\(auto: " "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_matching "" \
    --mca mtl_efa_onnode_single_copy "" --mca mtl_efa_device_buffers "" --mca common_efa_verbose 1

# Sourced by tests/soak.sh and tests/netns/peer-loss.sh: their
# configurations, PML-PROVIDER, as mpirun arguments, in one place.
#   PML       cm (pml cm + mtl_efa, provider matching), cm-own (mtl_efa
#             matching itself over untagged provider messages), cm-direct
#             (the forced efa-direct-like mode), ob1 (pml ob1 + btl_efa)
#   PROVIDER  rxd (udp;ofi_rxd), rxm (tcp;ofi_rxm)
# One-sided goes through osc/rdma + btl_efa in every configuration.

# config_mpirun_args CONFIG: sets the array args to CONFIG's mpirun
# arguments; fails, leaving args alone, when CONFIG is not one of the above.
config_mpirun_args() {
    local prov pml
    case ${1##*-} in
    rxd) prov='udp;ofi_rxd' ;;
    rxm) prov='tcp;ofi_rxm' ;;
    *) return 1 ;;
    esac
    case ${1%-*} in
    cm) pml=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov" --mca mtl_efa_matching provider) ;;
    cm-own) pml=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov" --mca mtl_efa_matching own) ;;
    cm-direct) pml=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov" --mca common_efa_force_direct_mode 1) ;;
    ob1) pml=(--mca pml ob1) ;;
    *) return 1 ;;
    esac
    # shellcheck disable=SC2034,SC2054 # args is the caller's; "efa,self" is one argument
    args=("${pml[@]}" --mca btl efa,self --mca btl_efa_provider_include "$prov" --mca osc rdma)
}

// efa-mpi-info: the core's help topics rendered (info_help.cpp).
#ifndef EFA_INFO_HELP_HPP
#define EFA_INFO_HELP_HPP

#include <string>

namespace efa::info {

// A topic of the core's help file with its %s filled (the host first, as
// the glue does); empty when the file or the topic is not found.
std::string help_text(const char *topic, const char *a1, const char *a2, const char *a3);

} // namespace efa::info

#endif

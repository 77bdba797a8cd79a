// efa-mpi-info: the components' MCA parameters from where Open MPI 4.1
// reads them (info_params.cpp): the environment over the parameter files
// (the user's ~/.openmpi/mca-params.conf over the system's
// openmpi-mca-params.conf), and booleans by Open MPI's rules.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace efa::info {

// A parameter's value and where it came from ("the environment,
// OMPI_MCA_x" or a file's path); empty value: set nowhere.
struct ParamValue {
    std::string value;
    std::string source;
};

class ParamSources {
  public:
    // The environment and the files Open MPI would read: the list of
    // OMPI_MCA_mca_base_param_files ("none": no file), else the user's
    // file then the system's.
    static ParamSources load();
    // The component parameter `name` (without prefix) by its common_efa_,
    // mtl_efa_ or btl_efa_ name, in that order, from the environment and
    // else from the files.
    ParamValue get(const std::string &name) const;
    // The files consulted, the first one taking precedence, each with
    // "read" or "absent".
    const std::vector<std::pair<std::string, bool>> &files() const { return files_; }

  private:
    std::map<std::string, ParamValue> from_files_; // full name -> value, file
    std::vector<std::pair<std::string, bool>> files_;
};

// A boolean as Open MPI's mca_base_var_enum_bool takes it: after leading
// white space, an integer (non-zero: true) or one of t, true, enabled,
// yes, y / f, false, disabled, no, n (case matters).  false: none of them.
bool parse_mca_bool(const std::string &v, bool *out);
// What parse_mca_bool accepts, for messages.
extern const char *const kMcaBoolValues;
// An integer as Open MPI's mca_base_var reads one (int_from_string): any
// base strtoll takes (0x.. hexadecimal, 0.. octal), optionally followed by
// k, m or g (times 1024, 1024^2, 1024^3).  false: no number, something
// after it other than one suffix (Open MPI would read such text as 0 or
// ignore the rest: refused here as the likely mistake it is), or beyond
// an int (Open MPI refuses that too).
bool parse_mca_int(const std::string &v, int *out);
// What parse_mca_int accepts, for messages.
extern const char *const kMcaIntForms;

} // namespace efa::info

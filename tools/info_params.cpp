// efa-mpi-info: the components' MCA parameters (info_params.hpp), read by
// the rules of Open MPI 4.1's mca_base_var (the list of files, their
// precedence) and keyval parser (the lines of a file).
#include "info_params.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <pwd.h>
#include <unistd.h>

#include "info_ompi_paths.h"

namespace efa::info {

namespace {

constexpr const char *kPrefixes[] = {"common_efa_", "mtl_efa_", "btl_efa_"};

std::string env_or_empty(const char *name) {
    const char *v = std::getenv(name);
    return v ? v : "";
}

std::string trim(const std::string &s) {
    const char *ws = " \t\r\n\v\f";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) {
        return "";
    }
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Open MPI's home directory (opal_home_directory): $HOME, else the
// password database's.
std::string home_directory() {
    if (const std::string h = env_or_empty("HOME"); !h.empty()) {
        return h;
    }
    const passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir ? pw->pw_dir : "";
}

// The installed Open MPI's sysconfdir as its installdirs components
// find it: OPAL_SYSCONFDIR, else under OPAL_PREFIX where the built one is
// under the built prefix (a relocated installation), else the one
// ompi_info gave when this was built.
std::string ompi_sysconfdir() {
    if (const std::string d = env_or_empty("OPAL_SYSCONFDIR"); !d.empty()) {
        return d;
    }
    const std::string built = EFA_OMPI_SYSCONFDIR, prefix = EFA_OMPI_PREFIX;
    const std::string relocated = env_or_empty("OPAL_PREFIX");
    if (!relocated.empty() && !prefix.empty() && built.rfind(prefix + "/", 0) == 0) {
        return relocated + built.substr(prefix.size());
    }
    return built;
}

// The files in Open MPI's order of precedence (the first wins):
// mca_base_param_files from the environment (by either of its names),
// else the user's file and the system's.
std::vector<std::string> param_file_list() {
    std::string list = env_or_empty("OMPI_MCA_mca_base_param_files");
    if (list.empty()) {
        list = env_or_empty("OMPI_MCA_mca_param_files");
    }
    if (list == "none") {
        return {};
    }
    std::vector<std::string> out;
    if (list.empty()) {
        if (const std::string home = home_directory(); !home.empty()) {
            out.push_back(home + "/.openmpi/mca-params.conf");
        }
        if (const std::string etc = ompi_sysconfdir(); !etc.empty()) {
            out.push_back(etc + "/openmpi-mca-params.conf");
        }
        return out;
    }
    for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) {
            out.push_back(list.substr(at, comma - at));
        }
        at = comma + 1;
    }
    return out;
}

// A line of a parameter file as the keyval parser reads the common form:
// "name = value" (white space around both dropped, the value the rest of
// the line: a '#' there is part of it); blank lines and lines starting
// with '#' or "//" are nothing.  false: not a name = value line (also
// mpirun-style "--mca"/"-x" lines, which name no parameter directly).
bool parse_line(const std::string &raw, std::string *name, std::string *value) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line.rfind("//", 0) == 0 || line[0] == '-') {
        return false;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
        return false;
    }
    *name = trim(line.substr(0, eq));
    *value = trim(line.substr(eq + 1));
    return !name->empty();
}

bool read_file(const std::string &path, std::map<std::string, ParamValue> *into) {
    std::ifstream f(path);
    if (!f) {
        return false;
    }
    std::string raw, name, value;
    while (std::getline(f, raw)) {
        if (parse_line(raw, &name, &value)) {
            (*into)[name] = {value, path}; // (a later line of a file replaces)
        }
    }
    return true;
}

} // namespace

const char *const kMcaBoolValues =
    "an integer (0: false, else true), t|true|enabled|yes|y or f|false|disabled|no|n";

ParamSources ParamSources::load() {
    ParamSources s;
    const std::vector<std::string> list = param_file_list();
    std::vector<bool> read(list.size());
    // Read the last first so that the files before replace its values:
    // the first of the list takes precedence, as in Open MPI.
    for (size_t i = list.size(); i-- > 0;) {
        read[i] = read_file(list[i], &s.from_files_);
    }
    for (size_t i = 0; i < list.size(); ++i) {
        s.files_.emplace_back(list[i], read[i]);
    }
    return s;
}

ParamValue ParamSources::get(const std::string &name) const {
    for (const char *prefix : kPrefixes) {
        const std::string var = "OMPI_MCA_" + std::string(prefix) + name;
        if (const std::string v = env_or_empty(var.c_str()); !v.empty()) {
            return {v, "the environment, " + var};
        }
    }
    for (const char *prefix : kPrefixes) {
        const std::string key = prefix + name;
        const auto it = from_files_.find(key);
        if (it != from_files_.end() && !it->second.value.empty()) {
            // (the file's name for it where that is a synonym)
            const bool own = key.rfind(kPrefixes[0], 0) == 0;
            return {it->second.value, it->second.source + (own ? "" : ", " + key)};
        }
    }
    return {};
}

bool parse_mca_bool(const std::string &v, bool *out) {
    const char *s = v.c_str() + std::strspn(v.c_str(), " \t\n\v\f\r");
    char *end = nullptr;
    const long n = std::strtol(s, &end, 10);
    if (*end == '\0') {
        *out = n != 0; // (out of range: LONG_MAX or LONG_MIN, true as in Open MPI)
        return true;
    }
    for (const char *t : {"true", "t", "enabled", "yes", "y"}) {
        if (std::strcmp(s, t) == 0) {
            *out = true;
            return true;
        }
    }
    for (const char *f : {"false", "f", "disabled", "no", "n"}) {
        if (std::strcmp(s, f) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

const char *const kMcaIntForms =
    "an integer (decimal, 0x hexadecimal or 0 octal; k, m or g multiplies by 1024, "
    "1024^2 or 1024^3)";

bool parse_mca_int(const std::string &v, int *out) {
    const char *s = v.c_str();
    char *end = nullptr;
    errno = 0;
    long long n = std::strtoll(s, &end, 0);
    if (end == s || errno == ERANGE) {
        return false;
    }
    int shift = 0;
    switch (*end) {
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    default:
        break;
    }
    if (shift != 0) {
        ++end;
        if (n > (LLONG_MAX >> shift) || n < -(LLONG_MAX >> shift)) {
            return false;
        }
        n *= 1LL << shift;
    }
    if (*end != '\0' || n < INT_MIN || n > INT_MAX) {
        return false;
    }
    *out = static_cast<int>(n);
    return true;
}

} // namespace efa::info

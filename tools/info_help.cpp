// efa-mpi-info's rendering of the core's help topics (help-common-efa.txt),
// as the components' messages would read.
#include "info_help.hpp"

#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace efa::info {

std::string help_text(const char *topic, const char *a1, const char *a2, const char *a3) {
    FILE *f = std::fopen(EFA_HELP_FILE, "r");
    if (!f) {
        f = std::fopen(EFA_HELP_FILE_SRC, "r");
    }
    if (!f) {
        return "";
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    const char *args[] = {host, a1 ? a1 : "", a2 ? a2 : "", a3 ? a3 : ""};
    size_t next = 0;
    std::string out, want = std::string("[") + topic + "]";
    bool in = false;
    char line[1024];
    while (std::fgets(line, sizeof(line), f)) {
        std::string l(line);
        if (!in) {
            in = l.rfind(want, 0) == 0;
            continue;
        }
        if (l[0] == '#' || l[0] == '[') {
            break;
        }
        for (size_t at = 0; (at = l.find("%s", at)) != std::string::npos;) {
            const char *arg = next < 4 ? args[next++] : "";
            l.replace(at, 2, arg);
            at += std::strlen(arg); // (an argument's own "%s" stays as it is)
        }
        out += "  " + l;
    }
    std::fclose(f);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
        out.pop_back();
    }
    return out;
}

} // namespace efa::info

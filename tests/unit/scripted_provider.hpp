// A stand-in for the provider's answers to posts, for tests of the
// context's backlog: what it answers to the next posts (0 once the script
// is out), and the order in which the posts it accepted were made.
#pragma once

#include <sys/types.h>

#include <deque>
#include <vector>

struct ScriptedProvider {
    std::deque<ssize_t> answers;
    std::vector<int> accepted;

    auto post(int id) {
        return [this, id]() -> ssize_t {
            ssize_t rc = 0;
            if (!answers.empty()) {
                rc = answers.front();
                answers.pop_front();
            }
            if (rc == 0) {
                accepted.push_back(id);
            }
            return rc;
        };
    }
};

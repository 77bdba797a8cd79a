// Yama's ptrace_scope and the node's processes (common/node/ptrace_open.cpp):
// what each scope leads to, read from a scope file the test writes.  Scope
// 1 asks the kernel (prctl PR_SET_PTRACER): with Yama it opens this
// process; a kernel without Yama refuses the call (EINVAL), and that must be
// reported as refused, never as done.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "efa_cma.h"

namespace {

constexpr const char *kRealScope = "/proc/sys/kernel/yama/ptrace_scope";

struct ScopeFile {
    std::string path;
    explicit ScopeFile(const char *text) {
        char name[] = "/tmp/efa_ptrace_scope_XXXXXX";
        const int fd = mkstemp(name);
        path = fd >= 0 ? name : "";
        if (fd >= 0) {
            EXPECT_EQ(static_cast<ssize_t>(strlen(text)), write(fd, text, strlen(text)));
            close(fd);
        }
    }
    ~ScopeFile() {
        if (!path.empty()) {
            unlink(path.c_str());
        }
    }
};

bool yama_here() {
    return 0 == access(kRealScope, F_OK);
}

} // namespace

TEST(PtraceOpen, NoYamaOrScopeZeroNeedsNothing) {
    int scope = 7, err = 7;
    EXPECT_EQ(EFA_CMA_OPEN_NOT_NEEDED,
              efa_cma_open_to_node_at("/nonexistent/ptrace_scope", &scope, &err));
    EXPECT_EQ(-1, scope);
    EXPECT_EQ(0, err);
    ScopeFile zero("0\n");
    ASSERT_FALSE(zero.path.empty());
    EXPECT_EQ(EFA_CMA_OPEN_NOT_NEEDED, efa_cma_open_to_node_at(zero.path.c_str(), &scope, &err));
    EXPECT_EQ(0, scope);
    EXPECT_STREQ("Yama's ptrace_scope 0", efa_cma_open_said(EFA_CMA_OPEN_NOT_NEEDED, 0));
    EXPECT_STREQ("no Yama", efa_cma_open_said(EFA_CMA_OPEN_NOT_NEEDED, -1));
}

// Scope 2 (administrators only) and 3 (nobody): no process can open
// itself; nothing is asked of the kernel.
TEST(PtraceOpen, ScopeTwoAndThreeAreRefused) {
    for (const char *text : {"2\n", "3"}) {
        ScopeFile f(text);
        ASSERT_FALSE(f.path.empty());
        int scope = -1, err = 7;
        EXPECT_EQ(EFA_CMA_OPEN_REFUSED, efa_cma_open_to_node_at(f.path.c_str(), &scope, &err));
        EXPECT_EQ(atoi(text), scope);
        EXPECT_EQ(0, err);
        EXPECT_NE(nullptr,
                  strstr(efa_cma_open_said(EFA_CMA_OPEN_REFUSED, scope), "administrators"));
    }
}

// A file that says nothing readable is taken as no Yama: the copies
// themselves then say what the kernel allows.
TEST(PtraceOpen, UnreadableScopeIsNoYama) {
    ScopeFile f("yes\n");
    ASSERT_FALSE(f.path.empty());
    int scope = 0;
    EXPECT_EQ(EFA_CMA_OPEN_NOT_NEEDED, efa_cma_open_to_node_at(f.path.c_str(), &scope, nullptr));
    EXPECT_EQ(-1, scope);
}

// Scope 1: the kernel is asked.  Where Yama runs, the call succeeds; on a
// kernel without it, prctl answers EINVAL, which is a refusal with its
// reason.  (In a child: the opening lasts the process's life.)
TEST(PtraceOpen, ScopeOneAsksTheKernel) {
    ScopeFile f("1\n");
    ASSERT_FALSE(f.path.empty());
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (0 == child) {
        int scope = -1, err = 0;
        const efa_cma_open_t how = efa_cma_open_to_node_at(f.path.c_str(), &scope, &err);
        int code = 1 == scope ? 0 : 10;
        if (yama_here()) {
            code += EFA_CMA_OPEN_DONE == how && 0 == err ? 0 : 1;
        } else {
            code += EFA_CMA_OPEN_REFUSED == how && EINVAL == err ? 0 : 2;
        }
        _exit(code);
    }
    int status = 0;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status)) << "10: scope not read; 1: Yama refused; 2: the refusal "
                                         "of a kernel without Yama not reported";
}

// The process-wide answer reads the real file once and keeps it.
TEST(PtraceOpen, OncePerProcessKeepsTheFirstAnswer) {
    int s1 = 9, s2 = 9;
    const efa_cma_open_t a = efa_cma_open_to_node(&s1, nullptr);
    const efa_cma_open_t b = efa_cma_open_to_node(&s2, nullptr);
    EXPECT_EQ(a, b);
    EXPECT_EQ(s1, s2);
    if (!yama_here()) {
        EXPECT_EQ(-1, s1);
        EXPECT_EQ(EFA_CMA_OPEN_NOT_NEEDED, a);
    }
}

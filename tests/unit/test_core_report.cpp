// The verbose-1 report's component lines (core_report.cpp): a line
// replaces the same component's earlier line on its topic only, so that a
// revised choice is said once and every other choice still is.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core_report.hpp"

namespace {

std::vector<std::string> *g_said;

void capture(int level, const char *msg) {
    (void)level;
    g_said->push_back(msg);
}

std::vector<std::string> say(efa::CoreReport &report) {
    std::vector<std::string> said;
    g_said = &said;
    efa::Reporter rep;
    rep.verbose = capture;
    rep.verbosity = 1;
    report.say_once(rep, true);
    g_said = nullptr;
    return said;
}

bool has(const std::vector<std::string> &said, const std::string &line) {
    for (const auto &s : said) {
        if (s.find(line) != std::string::npos) {
            return true;
        }
    }
    return false;
}

} // namespace

TEST(CoreReportTopic, IsTheLeadBeforeTheColon) {
    EXPECT_EQ(efa::note_topic("matching: own (auto: on tcp;ofi_rxm)"), "matching");
    EXPECT_EQ(efa::note_topic("on-node channel: inbox and rings"), "on-node channel");
    // A parenthesis before the colon: no lead, the whole line is its topic.
    EXPECT_EQ(efa::note_topic("inject off (mtl_efa_debug_no_inject: a test)"),
              "inject off (mtl_efa_debug_no_inject: a test)");
    EXPECT_EQ(efa::note_topic("MPI_Cancel withdraws large sends"),
              "MPI_Cancel withdraws large sends");
}

TEST(CoreReportNote, LinesOnOtherTopicsOfOneComponentAllStay) {
    efa::CoreReport report;
    report.note("mtl_efa", "MPI_Cancel withdraws large provider sends at the receiver");
    report.note("mtl_efa", "matching: own (auto: the node offers 2 rails)");
    report.note("mtl_efa", "on-node channel: inbox and rings");
    const auto said = say(report);
    EXPECT_TRUE(has(said, "report: mtl_efa: MPI_Cancel withdraws"));
    EXPECT_TRUE(has(said, "report: mtl_efa: matching: own"));
    EXPECT_TRUE(has(said, "report: mtl_efa: on-node channel: inbox"));
}

TEST(CoreReportNote, ARevisedChoiceReplacesTheEarlierOnItsTopic) {
    efa::CoreReport report;
    report.note("mtl_efa", "matching: own (auto: the node offers 2 rails)");
    report.note("mtl_efa", "matching: own (the provider carries untagged messages)");
    report.note("mtl_efa devices", "matching: of another component, kept");
    const auto said = say(report);
    EXPECT_FALSE(has(said, "offers 2 rails"));
    EXPECT_TRUE(has(said, "report: mtl_efa: matching: own (the provider carries"));
    EXPECT_TRUE(has(said, "report: mtl_efa devices: matching: of another component"));
}

// The check every crash simulation ends with (fs/testing/crash_harness.h's crash_at_every_step).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "fs/testing/crash_harness.h"

namespace tierzero::test_support {

// Prints the simulation's counts and fails the test once per problem it found (and when the
// scenario took no file-system step at all, so that nothing was simulated).
inline void expect_no_crash_problems(const fs::testing::CrashReport& report) {
  std::printf("  %zu steps, %zu crash points, %zu crash images checked\n", report.steps, report.crash_points,
              report.images);
  EXPECT_GT(report.steps, 0u) << "the scenario took no file-system step";
  for (const std::string& problem : report.problems) ADD_FAILURE() << problem;
}

}  // namespace tierzero::test_support

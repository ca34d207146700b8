// gtest checks on tierzero::Status and tierzero::Result<T> that print the error when they fail:
//
//   EXPECT_OK(writer.commit());                 // "writer.commit() is not OK: kIo: cannot ..."
//   ASSERT_OK(reader) << "while reading " << path;
//   ASSERT_OK_AND_ASSIGN(auto file, fs.open(path));
//   EXPECT_ERROR(load(dir), ErrorCode::kCorrupt, "bad magic");
//
// Each evaluates its expression once and accepts further messages with <<, as EXPECT_TRUE does.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>

#include "common/common.h"

namespace tierzero::test_support {

inline const Status& status_of(const Status& status) { return status; }
template <typename T>
Status status_of(const Result<T>& result) {
  return result.status();
}

// The predicate behind EXPECT_OK / ASSERT_OK.
template <typename T>
::testing::AssertionResult status_is_ok(const char* expr_text, const T& value) {
  const Status& status = status_of(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expr_text << " is not OK: " << status.to_string();
}

// The predicate behind EXPECT_ERROR / ASSERT_ERROR: not ok, with `code`, and a message holding
// `substring` (any message when it is empty).
template <typename T>
::testing::AssertionResult status_is_error(const char* expr_text, const char*, const char*, const T& value,
                                           ErrorCode code, std::string_view substring) {
  const Status& status = status_of(value);
  if (status.ok()) {
    return ::testing::AssertionFailure() << expr_text << " is OK; expected " << error_code_name(code) << " with \""
                                         << substring << "\"";
  }
  if (status.code() != code || status.message().find(substring) == std::string::npos) {
    return ::testing::AssertionFailure() << expr_text << " is " << status.to_string() << "; expected "
                                         << error_code_name(code) << " with \"" << substring << "\"";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tierzero::test_support

#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::tierzero::test_support::status_is_ok, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::tierzero::test_support::status_is_ok, expr)

#define EXPECT_ERROR(expr, code, substring) \
  EXPECT_PRED_FORMAT3(::tierzero::test_support::status_is_error, expr, code, substring)
#define ASSERT_ERROR(expr, code, substring) \
  ASSERT_PRED_FORMAT3(::tierzero::test_support::status_is_error, expr, code, substring)

// `lhs = value of expr` (a Result<T>), or a fatal failure printing the error. `lhs` may declare
// a variable: ASSERT_OK_AND_ASSIGN(auto engine, IoEngine::create(config));
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  TZ_TEST_ASSERT_OK_AND_ASSIGN_IMPL_(TZ_TEST_CONCAT_(tz_test_result_, __LINE__), lhs, expr)
#define TZ_TEST_CONCAT_INNER_(a, b) a##b
#define TZ_TEST_CONCAT_(a, b) TZ_TEST_CONCAT_INNER_(a, b)
#define TZ_TEST_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr)                                 \
  auto tmp = (expr);                                                                       \
  GTEST_ASSERT_(::tierzero::test_support::status_is_ok(#expr, tmp), GTEST_FATAL_FAILURE_); \
  lhs = std::move(tmp).value()

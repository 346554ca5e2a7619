#pragma once

// The part of GoogleTest that the series' ATen C++ tests use (TEST,
// EXPECT_*/ASSERT_*, FAIL, ADD_FAILURE, SUCCEED), so that
// tools/checks/run_cpp_tests.sh compiles and runs them where no googletest
// is installed. gtest_main.cpp next to this folder is the main(). A PyTorch
// build links the real googletest instead; nothing here may be needed by a
// test that the real one lacks.

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace testing {

// What a failed check streams after its summary (`<< "context"`).
class Message {
 public:
  template <typename T>
  Message& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  std::string str() const {
    return stream_.str();
  }

 private:
  std::ostringstream stream_;
};

class AssertionResult {
 public:
  explicit AssertionResult(bool ok, std::string message = "")
      : ok_(ok), message_(std::move(message)) {}
  explicit operator bool() const {
    return ok_;
  }
  const std::string& message() const {
    return message_;
  }

 private:
  bool ok_;
  std::string message_;
};

inline AssertionResult AssertionSuccess() {
  return AssertionResult(true);
}

inline AssertionResult AssertionFailure(std::string message) {
  return AssertionResult(false, std::move(message));
}

namespace internal {

struct TestInfo {
  const char* suite;
  const char* name;
  void (*body)();
};

inline std::vector<TestInfo>& registry() {
  static std::vector<TestInfo> tests;
  return tests;
}

inline bool& current_test_failed() {
  static bool failed = false;
  return failed;
}

struct Registrar {
  Registrar(const char* suite, const char* name, void (*body)()) {
    registry().push_back(TestInfo{suite, name, body});
  }
};

// Reports a failure: the summary, then what the test streamed.
class AssertHelper {
 public:
  AssertHelper(const char* file, int line, std::string summary)
      : file_(file), line_(line), summary_(std::move(summary)) {}
  void operator=(const Message& message) const {
    std::cerr << file_ << ":" << line_ << ": Failure\n" << summary_;
    const std::string extra = message.str();
    if (!extra.empty()) {
      std::cerr << "\n" << extra;
    }
    std::cerr << "\n";
    current_test_failed() = true;
  }

 private:
  const char* file_;
  int line_;
  std::string summary_;
};

template <typename T, typename = void>
struct Printable : std::false_type {};
template <typename T>
struct Printable<
    T,
    std::void_t<decltype(std::declval<std::ostream&>() << std::declval<T>())>>
    : std::true_type {};

template <typename T>
void print_value(std::ostream& os, const T& value);

template <typename T>
void print_value(std::ostream& os, const std::vector<T>& values) {
  os << "{";
  for (size_t i = 0; i < values.size(); ++i) {
    os << (i ? ", " : "");
    print_value(os, values[i]);
  }
  os << "}";
}

template <typename T>
void print_value(std::ostream& os, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (value ? "true" : "false");
  } else if constexpr (
      std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
    os << static_cast<int>(value);
  } else if constexpr (Printable<T>::value) {
    os << value;
  } else {
    os << "<" << sizeof(T) << "-byte object>";
  }
}

template <typename T>
std::string to_string(const T& value) {
  std::ostringstream os;
  print_value(os, value);
  return os.str();
}

template <typename A, typename B>
AssertionResult compare(
    bool ok,
    const char* op,
    const char* a_text,
    const char* b_text,
    const A& a,
    const B& b) {
  if (ok) {
    return AssertionSuccess();
  }
  return AssertionFailure(
      std::string("Expected: (") + a_text + ") " + op + " (" + b_text +
      "), actual: " + to_string(a) + " vs " + to_string(b));
}

inline AssertionResult check_bool(
    bool value,
    bool expected,
    const char* text) {
  if (value == expected) {
    return AssertionSuccess();
  }
  return AssertionFailure(
      std::string("Value of: ") + text + "\n  Actual: " +
      (value ? "true" : "false") + "\nExpected: " +
      (expected ? "true" : "false"));
}

}  // namespace internal

// Real googletest parses its flags here; the shim's main() reads its own.
inline void InitGoogleTest(int* /*argc*/, char** /*argv*/) {}

}  // namespace testing

int gtest_shim_run_all_tests(int argc, char** argv);
#define RUN_ALL_TESTS() gtest_shim_run_all_tests(0, nullptr)

#define GTEST_SHIM_CONCAT_(a, b) a##b
#define TEST(suite, name)                                              \
  static void GTEST_SHIM_CONCAT_(gtest_shim_body_, suite##_##name)();  \
  static const ::testing::internal::Registrar GTEST_SHIM_CONCAT_(      \
      gtest_shim_registrar_, suite##_##name)(                          \
      #suite, #name, &GTEST_SHIM_CONCAT_(gtest_shim_body_, suite##_##name)); \
  static void GTEST_SHIM_CONCAT_(gtest_shim_body_, suite##_##name)()

// `on_failure` is empty (EXPECT_*) or `return` (ASSERT_*); the dangling
// else lets a test stream a message after the macro.
#define GTEST_SHIM_CHECK_(result_expr, on_failure)                     \
  switch (0)                                                           \
  case 0:                                                              \
  default:                                                             \
    if (const ::testing::AssertionResult gtest_shim_result =           \
            (result_expr))                                             \
      ;                                                                \
    else                                                               \
      on_failure ::testing::internal::AssertHelper(                    \
          __FILE__, __LINE__, gtest_shim_result.message()) =           \
          ::testing::Message()

#define GTEST_SHIM_CMP_(a, b, op, on_failure)                          \
  GTEST_SHIM_CHECK_(                                                   \
      ::testing::internal::compare(((a)op(b)), #op, #a, #b, (a), (b)), \
      on_failure)

#define EXPECT_EQ(a, b) GTEST_SHIM_CMP_(a, b, ==, )
#define EXPECT_NE(a, b) GTEST_SHIM_CMP_(a, b, !=, )
#define EXPECT_LT(a, b) GTEST_SHIM_CMP_(a, b, <, )
#define EXPECT_LE(a, b) GTEST_SHIM_CMP_(a, b, <=, )
#define EXPECT_GT(a, b) GTEST_SHIM_CMP_(a, b, >, )
#define EXPECT_GE(a, b) GTEST_SHIM_CMP_(a, b, >=, )
#define ASSERT_EQ(a, b) GTEST_SHIM_CMP_(a, b, ==, return)
#define ASSERT_NE(a, b) GTEST_SHIM_CMP_(a, b, !=, return)
#define ASSERT_LT(a, b) GTEST_SHIM_CMP_(a, b, <, return)
#define ASSERT_LE(a, b) GTEST_SHIM_CMP_(a, b, <=, return)
#define ASSERT_GT(a, b) GTEST_SHIM_CMP_(a, b, >, return)
#define ASSERT_GE(a, b) GTEST_SHIM_CMP_(a, b, >=, return)

#define EXPECT_TRUE(cond) \
  GTEST_SHIM_CHECK_(      \
      ::testing::internal::check_bool(static_cast<bool>(cond), true, #cond), )
#define EXPECT_FALSE(cond) \
  GTEST_SHIM_CHECK_(       \
      ::testing::internal::check_bool(static_cast<bool>(cond), false, #cond), )
#define ASSERT_TRUE(cond)                                                  \
  GTEST_SHIM_CHECK_(                                                       \
      ::testing::internal::check_bool(static_cast<bool>(cond), true, #cond), \
      return)
#define ASSERT_FALSE(cond)                                                  \
  GTEST_SHIM_CHECK_(                                                        \
      ::testing::internal::check_bool(static_cast<bool>(cond), false, #cond), \
      return)

#define GTEST_SHIM_THROW_(statement, exception, on_failure)                 \
  GTEST_SHIM_CHECK_(                                                        \
      ([&]() -> ::testing::AssertionResult {                                \
        try {                                                               \
          statement;                                                        \
        } catch (const exception&) {                                        \
          return ::testing::AssertionSuccess();                             \
        } catch (...) {                                                     \
          return ::testing::AssertionFailure(                               \
              "Expected: " #statement " throws an exception of type " #exception \
              ".\n  Actual: it throws a different type.");                  \
        }                                                                   \
        return ::testing::AssertionFailure(                                 \
            "Expected: " #statement " throws an exception of type " #exception \
            ".\n  Actual: it throws nothing.");                             \
      }()),                                                                 \
      on_failure)

#define GTEST_SHIM_NO_THROW_(statement, on_failure)             \
  GTEST_SHIM_CHECK_(                                            \
      ([&]() -> ::testing::AssertionResult {                    \
        try {                                                   \
          statement;                                            \
        } catch (const std::exception& e) {                     \
          return ::testing::AssertionFailure(                   \
              std::string("Expected: " #statement               \
                          " doesn't throw.\n  Actual: it throws ") + \
              e.what());                                        \
        } catch (...) {                                         \
          return ::testing::AssertionFailure(                   \
              "Expected: " #statement                           \
              " doesn't throw.\n  Actual: it throws.");         \
        }                                                       \
        return ::testing::AssertionSuccess();                   \
      }()),                                                     \
      on_failure)

#define EXPECT_THROW(statement, exception) \
  GTEST_SHIM_THROW_(statement, exception, )
#define ASSERT_THROW(statement, exception) \
  GTEST_SHIM_THROW_(statement, exception, return)
#define EXPECT_ANY_THROW(statement) \
  GTEST_SHIM_THROW_(statement, std::exception, )
#define EXPECT_NO_THROW(statement) GTEST_SHIM_NO_THROW_(statement, )
#define ASSERT_NO_THROW(statement) GTEST_SHIM_NO_THROW_(statement, return)

#define ADD_FAILURE()                                               \
  ::testing::internal::AssertHelper(__FILE__, __LINE__, "Failed") = \
      ::testing::Message()
#define FAIL() return ADD_FAILURE()
#define SUCCEED() static_cast<void>(0)

// main() for the gtest shim (gtest/gtest.h): runs every registered TEST, or
// those whose "Suite.Name" matches --gtest_filter=PATTERN (`*` and `?`
// wildcards, patterns separated by ':'), in gtest's output format; exits 1
// when one fails.

#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

bool wildcard_match(const char* pattern, const char* text) {
  if (*pattern == '\0') {
    return *text == '\0';
  }
  if (*pattern == '*') {
    return wildcard_match(pattern + 1, text) ||
        (*text != '\0' && wildcard_match(pattern, text + 1));
  }
  return *text != '\0' && (*pattern == '?' || *pattern == *text) &&
      wildcard_match(pattern + 1, text + 1);
}

bool selected(const std::string& filter, const std::string& full_name) {
  if (filter.empty()) {
    return true;
  }
  size_t start = 0;
  while (start <= filter.size()) {
    size_t end = filter.find(':', start);
    if (end == std::string::npos) {
      end = filter.size();
    }
    if (wildcard_match(filter.substr(start, end - start).c_str(),
                       full_name.c_str())) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace

int gtest_shim_run_all_tests(int argc, char** argv) {
  std::string filter;
  const char* flag = "--gtest_filter=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      filter = argv[i] + std::strlen(flag);
    }
  }
  std::vector<std::string> failed;
  int ran = 0;
  for (const auto& test : testing::internal::registry()) {
    const std::string full_name =
        std::string(test.suite) + "." + test.name;
    if (!selected(filter, full_name)) {
      continue;
    }
    ++ran;
    std::cout << "[ RUN      ] " << full_name << std::endl;
    testing::internal::current_test_failed() = false;
    try {
      test.body();
    } catch (const std::exception& e) {
      std::cerr << "uncaught exception: " << e.what() << "\n";
      testing::internal::current_test_failed() = true;
    } catch (...) {
      std::cerr << "uncaught exception of unknown type\n";
      testing::internal::current_test_failed() = true;
    }
    if (testing::internal::current_test_failed()) {
      failed.push_back(full_name);
      std::cout << "[  FAILED  ] " << full_name << std::endl;
    } else {
      std::cout << "[       OK ] " << full_name << std::endl;
    }
  }
  std::cout << "[==========] " << ran << " tests ran.\n"
            << "[  PASSED  ] " << ran - failed.size() << " tests.\n";
  for (const auto& name : failed) {
    std::cout << "[  FAILED  ] " << name << "\n";
  }
  if (ran == 0) {
    std::cout << "no test matched the filter\n";
    return 1;
  }
  return failed.empty() ? 0 : 1;
}

int main(int argc, char** argv) {
  return gtest_shim_run_all_tests(argc, argv);
}

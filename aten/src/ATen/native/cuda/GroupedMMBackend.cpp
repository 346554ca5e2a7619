// Host code only: the backend override of the CUDA grouped mm. It is read
// at every call, so a test or benchmark can switch paths within one
// process.

// CUDA only: ROCm keeps upstream's _grouped_mm (GroupedBlas.cpp calls the
// device-offset path under !USE_ROCM), so the ROCm build's hipified copy of
// this file is empty.
#if !defined(USE_ROCM)

#include <ATen/native/cuda/GroupedMMKernels.h>

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

namespace at::native::grouped_mm {

size_t env_choice(const char* name, c10::ArrayRef<std::string_view> choices) {
  const char* env = std::getenv(name);
  const std::string_view value = env == nullptr ? "" : env;
  if (value.empty() || value == "auto") {
    return 0;
  }
  size_t index = 1;
  std::string accepted = "auto";
  for (std::string_view choice : choices) {
    if (value == choice) {
      return index;
    }
    ++index;
    accepted.append(", ").append(choice);
  }
  TORCH_CHECK(false, name, " must be one of ", accepted, "; got '", value,
              "'");
}

Backend requested_backend() {
  switch (env_choice(
      "TORCH_GROUPED_MM_BACKEND", {"sm90", "sm80", "generic"})) {
    case 1:
      return Backend::kSm90;
    case 2:
      return Backend::kSm80;
    case 3:
      return Backend::kGeneric;
    default:
      return Backend::kAuto;
  }
}

}  // namespace at::native::grouped_mm

#endif  // !defined(USE_ROCM)

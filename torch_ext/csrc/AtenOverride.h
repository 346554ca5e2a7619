#pragma once

// A set of aten kernel overrides that can be switched on and off at run
// time. The overrides exist while their torch::Library objects do:
// destroying them brings PyTorch's own kernels back.

#include <torch/library.h>

#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace overlap_ops {

class AtenOverride {
 public:
  using Libraries = std::vector<std::unique_ptr<torch::Library>>;

  // `make` registers the overrides and returns the objects that own them.
  explicit AtenOverride(std::function<Libraries()> make)
      : make_(std::move(make)) {}

  // Turns the overrides on or off; returns whether they were on before.
  bool set(bool enabled) {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool was_enabled = enabled_;
    if (enabled != was_enabled) {
      // Built before it is stored: a registration that throws leaves no
      // half set of overrides behind.
      libraries_ = enabled ? make_() : Libraries{};
      enabled_ = enabled;
    }
    return was_enabled;
  }

  bool enabled() {
    std::lock_guard<std::mutex> lock(mutex_);
    return enabled_;
  }

  // An IMPL library for `key` in the aten namespace.
  static std::unique_ptr<torch::Library> aten_impl(c10::DispatchKey key) {
    return std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  }

 private:
  std::mutex mutex_;
  bool enabled_ = false;
  std::function<Libraries()> make_;
  Libraries libraries_;
};

}  // namespace overlap_ops

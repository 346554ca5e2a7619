// Restricted-stream cache for the SM carveout; see CarveoutStreamCache.h.

#include <ATen/cuda/CarveoutStreamCache.h>

#include <c10/util/Exception.h>

namespace at::cuda {

CarveoutStreamCache::CarveoutStreamCache(
    std::unique_ptr<CarveoutStreamBackend> backend)
    : backend_(std::move(backend)) {
  TORCH_CHECK(
      backend_ != nullptr,
      "CarveoutStreamCache: backend must not be null");
}

CarveoutStreamCache::~CarveoutStreamCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, entry] : entries_) {
    backend_->destroy_event(entry.device, entry.join_event);
    backend_->destroy_event(entry.device, entry.fork_event);
    backend_->destroy_stream(entry.device, entry.stream);
  }
}

size_t CarveoutStreamCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

CarveoutStreamCache::Entry& CarveoutStreamCache::entry_for(
    c10::DeviceIndex device,
    int64_t carveout) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = entries_.find(Key{device, carveout});
  if (found != entries_.end()) {
    return found->second;
  }
  // Creating under the map lock keeps "created once" trivially true; it
  // happens once per (device, k) for the life of the process.
  CarveoutStream stream = backend_->create_restricted_stream(device, carveout);
  CarveoutEvent fork_event = nullptr;
  CarveoutEvent join_event = nullptr;
  try {
    fork_event = backend_->create_event(device, nullptr);
    join_event = backend_->create_event(device, stream);
  } catch (...) {
    if (fork_event != nullptr) {
      backend_->destroy_event(device, fork_event);
    }
    backend_->destroy_stream(device, stream);
    throw;
  }
  Entry& entry = entries_.try_emplace(Key{device, carveout}).first->second;
  entry.device = device;
  entry.stream = stream;
  entry.fork_event = fork_event;
  entry.join_event = join_event;
  return entry;
}

CarveoutStream CarveoutStreamCache::restricted_stream(
    c10::DeviceIndex device,
    int64_t carveout) {
  TORCH_CHECK(
      carveout > 0,
      "CarveoutStreamCache: a restricted stream needs k > 0, got k = ",
      carveout);
  return entry_for(device, carveout).stream;
}

CarveoutFork CarveoutStreamCache::fork(
    c10::DeviceIndex device,
    int64_t carveout,
    CarveoutStream current) {
  CarveoutFork result;
  result.stream = current;
  result.current = current;
  if (carveout == 0) {
    return result;  // no carveout: zero overhead
  }
  if (backend_->is_capturing(current)) {
    // Still reject a bad k, so capture does not hide the error.
    backend_->check_carveout(device, carveout);
    return result;  // see "Graph capture" in the header
  }
  Entry& entry = entry_for(device, carveout);
  {
    std::lock_guard<std::mutex> lock(entry.event_mutex);
    backend_->record(entry.fork_event, current);
    backend_->wait(entry.stream, entry.fork_event);
  }
  result.stream = entry.stream;
  result.entry = &entry;
  return result;
}

void CarveoutStreamCache::join(const CarveoutFork& fork) {
  if (fork.entry == nullptr) {
    return;
  }
  auto& entry = *static_cast<Entry*>(fork.entry);
  std::lock_guard<std::mutex> lock(entry.event_mutex);
  backend_->record(entry.join_event, entry.stream);
  backend_->wait(fork.current, entry.join_event);
}

CarveoutStreamScope::CarveoutStreamScope(
    CarveoutStreamCache& cache,
    c10::DeviceIndex device,
    int64_t carveout,
    CarveoutStream current)
    : cache_(cache), fork_(cache.fork(device, carveout, current)) {}

void CarveoutStreamScope::join() {
  if (joined_) {
    return;
  }
  joined_ = true;
  cache_.join(fork_);
}

CarveoutStreamScope::~CarveoutStreamScope() {
  // A destructor must not throw; call join() explicitly to see errors.
  try {
    join();
  } catch (const std::exception& e) {
    TORCH_WARN("CarveoutStreamScope: join failed: ", e.what());
  }
}

}  // namespace at::cuda

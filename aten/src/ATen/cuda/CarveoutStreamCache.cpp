// Restricted-stream cache for the SM carveout; see CarveoutStreamCache.h.

#include <ATen/cuda/CarveoutStreamCache.h>

#include <c10/util/Exception.h>

#include <algorithm>

namespace at::cuda {

// One restricted stream and its two events; destroyed when the cache drops
// it and no fork holds it any more.
struct CarveoutStreamEntry {
  CarveoutStreamBackend* backend = nullptr;
  c10::DeviceIndex device = 0;
  CarveoutStream stream = nullptr;
  CarveoutEvent fork_event = nullptr;  // recorded on the caller's stream
  CarveoutEvent join_event = nullptr;  // recorded on `stream`
  // Held across each record+wait pair (see the header).
  std::mutex event_mutex;

  CarveoutStreamEntry() = default;
  CarveoutStreamEntry(const CarveoutStreamEntry&) = delete;
  CarveoutStreamEntry& operator=(const CarveoutStreamEntry&) = delete;
  ~CarveoutStreamEntry() {
    // Events go before the stream they belong to.
    if (join_event != nullptr) {
      backend->destroy_event(device, join_event);
    }
    if (fork_event != nullptr) {
      backend->destroy_event(device, fork_event);
    }
    if (stream != nullptr) {
      backend->destroy_stream(device, stream);
    }
  }
};

bool CarveoutStreamCache::Key::operator==(const Key& other) const {
  return device == other.device && partition == other.partition &&
      caller == other.caller;
}

CarveoutStreamCache::CarveoutStreamCache(
    std::unique_ptr<CarveoutStreamBackend> backend,
    size_t max_entries)
    : backend_(std::move(backend)), max_entries_(max_entries) {
  TORCH_CHECK(
      backend_ != nullptr,
      "CarveoutStreamCache: backend must not be null");
  TORCH_CHECK(
      max_entries_ >= 1,
      "CarveoutStreamCache: max_entries must be at least 1, got ",
      max_entries_);
}

CarveoutStreamCache::~CarveoutStreamCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

size_t CarveoutStreamCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

std::shared_ptr<CarveoutStreamEntry> CarveoutStreamCache::create_entry(
    c10::DeviceIndex device,
    int64_t partition) {
  // The entry's destructor frees whatever was created if a later step
  // throws.
  auto entry = std::make_shared<CarveoutStreamEntry>();
  entry->backend = backend_.get();
  entry->device = device;
  entry->stream = backend_->create_restricted_stream(device, partition);
  entry->fork_event = backend_->create_event(device, nullptr);
  entry->join_event = backend_->create_event(device, entry->stream);
  return entry;
}

std::shared_ptr<CarveoutStreamEntry>
CarveoutStreamCache::evict_least_recently_used() {
  auto oldest = std::min_element(
      entries_.begin(), entries_.end(), [](const Slot& a, const Slot& b) {
        return a.last_use < b.last_use;
      });
  std::shared_ptr<CarveoutStreamEntry> evicted = std::move(oldest->entry);
  entries_.erase(oldest);
  return evicted;
}

std::shared_ptr<CarveoutStreamEntry> CarveoutStreamCache::entry_for(
    c10::DeviceIndex device,
    int64_t carveout,
    CarveoutStream current) {
  const int64_t partition = backend_->partition(device, carveout);
  // Destroyed after the lock is released (declared before it).
  std::shared_ptr<CarveoutStreamEntry> evicted;
  std::lock_guard<std::mutex> lock(mutex_);
  const Key key{device, partition, current};
  auto found = std::find_if(
      entries_.begin(), entries_.end(),
      [&key](const Slot& slot) { return slot.key == key; });
  if (found != entries_.end()) {
    found->last_use = ++clock_;
    return found->entry;
  }
  // Created under the map lock, so a key is created once; that happens
  // once per key until it is evicted.
  std::shared_ptr<CarveoutStreamEntry> entry =
      create_entry(device, partition);
  if (entries_.size() >= max_entries_) {
    evicted = evict_least_recently_used();
  }
  entries_.push_back(Slot{key, entry, ++clock_});
  return entry;
}

CarveoutStream CarveoutStreamCache::restricted_stream(
    c10::DeviceIndex device,
    int64_t carveout,
    CarveoutStream current) {
  TORCH_CHECK(
      carveout > 0,
      "CarveoutStreamCache: a restricted stream needs k > 0, got k = ",
      carveout);
  return entry_for(device, carveout, current)->stream;
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
    (void)backend_->partition(device, carveout);
    return result;  // see "Graph capture" in the header
  }
  std::shared_ptr<CarveoutStreamEntry> entry =
      entry_for(device, carveout, current);
  {
    std::lock_guard<std::mutex> lock(entry->event_mutex);
    backend_->record(entry->fork_event, current);
    backend_->wait(entry->stream, entry->fork_event);
  }
  result.stream = entry->stream;
  result.entry = std::move(entry);
  return result;
}

void CarveoutStreamCache::join(const CarveoutFork& fork) {
  if (fork.entry == nullptr) {
    return;
  }
  CarveoutStreamEntry& entry = *fork.entry;
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

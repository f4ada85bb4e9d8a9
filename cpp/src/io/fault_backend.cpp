// fault backend: wraps any backend and injects faults decided from (seed, queue, request number).
// See gpuio/fault.hpp for what each fault looks like to the engine's user.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "gpuio/status.hpp"
#include "io/backends.hpp"

namespace gpuio::detail {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class FaultBackend;

class FaultQueue final : public IoQueue {
 public:
  FaultQueue(FaultBackend& be, std::unique_ptr<IoQueue> inner);
  bool prepare(const IoRequest& r) override;
  int submit() override { return inner_->submit(); }
  int reap(IoCompletion* out, int max, int wait_min) override;
  uint32_t depth() const override { return inner_->depth(); }
  uint32_t inflight() const override { return inflight_; }

 private:
  struct Slot {
    uint64_t user_data = 0;
    uint32_t delay_us = 0;
    bool torn = false;
  };
  struct Pending {
    Clock::time_point due;
    IoCompletion c;
  };
  // The k-th draw for a request: a pure function of the seed and the request itself, so the outcome does
  // not depend on thread timing or on the order completions arrive in.
  static double uniform(uint64_t key, uint64_t k) {
    return static_cast<double>(splitmix64(key ^ (k * 0xD1B54A32D192ED03ull)) >> 11) * 0x1.0p-53;
  }
  static uint32_t prefix(uint32_t len, uint32_t unit, double u) {  // non-empty, unit-aligned, shorter than len
    uint32_t units = len / unit;
    if (units <= 1) return len;
    return unit * (1 + static_cast<uint32_t>(u * (units - 1)));
  }
  void release(IoCompletion c, uint32_t delay_us, uint32_t bytes);
  int drain_ready(IoCompletion* out, int n, int max);

  FaultBackend& be_;
  std::unique_ptr<IoQueue> inner_;
  uint32_t inflight_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  std::vector<Pending> pending_;  // completions held back (latency, pacing, synthetic errors)
  Clock::time_point pace_clock_ = Clock::now();
};

class FaultBackend final : public IoBackend {
 public:
  FaultBackend(std::unique_ptr<IoBackend> inner, const FaultOptions& o) : inner_(std::move(inner)), opts_(o) {
    auto rate_ok = [](double r) { return r >= 0.0 && r <= 1.0; };
    GPUIO_EXPECT(rate_ok(o.eio_rate) && rate_ok(o.short_rate) && rate_ok(o.latency_rate) && rate_ok(o.torn_write_rate),
                 "fault rates must lie in [0, 1]");
    name_ = std::string("fault:") + inner_->name();
  }
  const char* name() const override { return name_.c_str(); }
  size_t device_count() const override { return inner_->device_count(); }
  const DeviceInfo& device(size_t i) const override { return inner_->device(i); }
  std::unique_ptr<IoQueue> create_queue(uint32_t depth, const std::vector<FixedBuffer>& fixed) override {
    return std::make_unique<FaultQueue>(*this, inner_->create_queue(depth, fixed));
  }
  void sync() override { inner_->sync(); }
  bool fast_completions() const override { return inner_->fast_completions(); }
  std::string describe() const override {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "fault(seed=%llu eio=%g short=%g latency=%g@%uus torn=%g disappear_after=%lld dev=%d "
                  "bytes_per_s=%llu) over ",
                  static_cast<unsigned long long>(opts_.seed), opts_.eio_rate, opts_.short_rate, opts_.latency_rate,
                  opts_.latency_us, opts_.torn_write_rate, static_cast<long long>(opts_.disappear_after),
                  opts_.disappear_device, static_cast<unsigned long long>(opts_.bytes_per_s));
    return buf + inner_->describe();
  }
  const FaultOptions& opts() const { return opts_; }
  // Requests seen over all queues: decides when a device disappears.
  int64_t count_request() { return requests_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::unique_ptr<IoBackend> inner_;
  FaultOptions opts_;
  std::string name_;
  std::atomic<int64_t> requests_{0};
};

FaultQueue::FaultQueue(FaultBackend& be, std::unique_ptr<IoQueue> inner)
    : be_(be), inner_(std::move(inner)) {
  slots_.resize(inner_->depth());
  for (uint32_t i = inner_->depth(); i-- > 0;) free_slots_.push_back(i);
}

bool FaultQueue::prepare(const IoRequest& r) {
  if (inflight_ >= inner_->depth() || free_slots_.empty()) return false;
  const FaultOptions& o = be_.opts();
  int64_t seen = be_.count_request();
  if (o.disappear_after >= 0 && seen >= o.disappear_after &&
      (o.disappear_device < 0 || o.disappear_device == static_cast<int32_t>(r.device))) {
    pending_.push_back({Clock::now(), {r.user_data, -ENODEV}});
    ++inflight_;
    return true;
  }
  uint64_t key = splitmix64(o.seed ^ splitmix64(r.offset ^ (uint64_t(r.len) << 40) ^ (uint64_t(r.device) << 56) ^
                                                 (uint64_t(r.op) << 63)));
  double u_eio = uniform(key, 1), u_torn = uniform(key, 2), u_short = uniform(key, 3), u_lat = uniform(key, 4);
  if (u_eio < o.eio_rate) {
    pending_.push_back({Clock::now(), {r.user_data, -EIO}});
    ++inflight_;
    return true;
  }
  IoRequest in = r;
  uint32_t unit = be_.device(r.device).logical_block_bytes;
  Slot slot{r.user_data, 0, false};
  if (r.op == IoOp::write && u_torn < o.torn_write_rate) {
    in.len = prefix(r.len, unit, uniform(key, 5));
    slot.torn = true;
  } else if (u_short < o.short_rate) {
    in.len = prefix(r.len, unit, uniform(key, 5));
  }
  if (u_lat < o.latency_rate) slot.delay_us = o.latency_us;
  uint32_t idx = free_slots_.back();
  in.user_data = idx;
  if (!inner_->prepare(in)) return false;
  free_slots_.pop_back();
  slots_[idx] = slot;
  ++inflight_;
  return true;
}

void FaultQueue::release(IoCompletion c, uint32_t delay_us, uint32_t bytes) {
  auto now = Clock::now();
  auto due = now + std::chrono::microseconds(delay_us);
  uint64_t rate = be_.opts().bytes_per_s;
  if (rate > 0) {
    // Token-bucket pacing: each completion takes bytes/rate of the queue's time line.
    if (pace_clock_ < now) pace_clock_ = now;
    pace_clock_ += std::chrono::nanoseconds(static_cast<int64_t>(bytes * 1e9 / static_cast<double>(rate)));
    if (pace_clock_ > due) due = pace_clock_;
  }
  pending_.push_back({due, c});
}

int FaultQueue::drain_ready(IoCompletion* out, int n, int max) {
  auto now = Clock::now();
  for (size_t i = 0; i < pending_.size() && n < max;) {
    if (pending_[i].due <= now) {
      out[n++] = pending_[i].c;
      pending_[i] = pending_.back();
      pending_.pop_back();
      --inflight_;
    } else {
      ++i;
    }
  }
  return n;
}

int FaultQueue::reap(IoCompletion* out, int max, int wait_min) {
  IoCompletion tmp[64];
  auto take = [&](const IoCompletion& c) {
    Slot s = slots_[c.user_data];
    free_slots_.push_back(static_cast<uint32_t>(c.user_data));
    int32_t res = c.res;
    if (s.torn && res >= 0) res = -EIO;  // the prefix reached the device; the rest did not
    release({s.user_data, res}, s.delay_us, res > 0 ? static_cast<uint32_t>(res) : 0);
  };
  int n = 0;
  for (;;) {
    int m = inner_->reap(tmp, 64, 0);
    if (m < 0) return n > 0 ? n : m;
    for (int i = 0; i < m; ++i) take(tmp[i]);
    n = drain_ready(out, n, max);
    if (n >= max || n >= wait_min || inflight_ == 0) return n;
    if (pending_.size() == inflight_) {
      // Everything outstanding is held here: sleep until the earliest is due (re-checking often).
      auto due = pending_[0].due;
      for (const Pending& p : pending_) due = std::min(due, p.due);
      std::this_thread::sleep_until(std::min(due, Clock::now() + std::chrono::milliseconds(2)));
    } else if (pending_.empty()) {
      m = inner_->reap(tmp, 1, 1);  // block in the inner backend
      if (m < 0) return n > 0 ? n : m;
      if (m == 1) take(tmp[0]);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace

std::unique_ptr<IoBackend> make_fault_backend(std::unique_ptr<IoBackend> inner, const FaultOptions& o) {
  return std::make_unique<FaultBackend>(std::move(inner), o);
}

}  // namespace gpuio::detail

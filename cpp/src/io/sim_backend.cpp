// sim backend: N emulated SSDs. Data lives in a SimStore (memory or backing file) and moves at submit();
// the flash model (gpuio/sim.hpp) says when each request completes. Paced: a completion is handed out by
// reap() only once the wall clock since the backend started passes the model's completion time, so the
// devices behave like real SSDs of the preset's speed. Free-running: completions are ready at once and
// each queue's model time advances to the completions it reaps (for fast functional tests). Null: no model and no
// data; paced null: no model and no data either, but each device's LinkClock (latency + link rate) times its
// requests in real time, for devices whose cost to the host is a real drive's (io/link_clock.hpp).
// Threads: each device's model has its own mutex (held for the model updates of one submission's requests to that
// device: see SimQueue::submit); a queue is owned by one thread as the IoQueue contract says.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include "gpuio/sim.hpp"
#include "gpuio/status.hpp"
#include "io/backends.hpp"
#include "io/link_clock.hpp"
#include "io/sim_store.hpp"

namespace gpuio::detail {
namespace {

using Clock = std::chrono::steady_clock;

struct SimDevice {
  DeviceInfo info;
  std::unique_ptr<SimStore> store;
  std::mutex mu;
  sim::Ssd model;
  LinkClock link;  // paced null only
  SimDevice(DeviceInfo i, std::unique_ptr<SimStore> s, const sim::SsdConfig& c, uint64_t latency_ns, uint32_t mb_s)
      : info(std::move(i)), store(std::move(s)), model(c), link(latency_ns, mb_s) {}
};

// The paced null device's idle read latency when not given: the preset model's for one page read on an idle drive.
uint64_t model_read_latency_ns(const sim::SsdConfig& c) {
  sim::Ssd probe(c);
  return probe.submit(sim::Request{0, 0, c.geometry.page_bytes, false, 0});
}

// The preset, with as many blocks (or pages per block) as the device's capacity needs.
sim::SsdConfig model_config(const SimOptions& o) {
  sim::SsdConfig c = sim::preset(o.preset);
  if (o.channels) c.geometry.channels = o.channels;
  if (o.write_buffer_pages >= 0) c.write_buffer_pages = static_cast<uint32_t>(o.write_buffer_pages);
  c.seed = o.seed;
  c.host_queues = limits::workers_max;
  c.queue_depth = limits::queue_depth_max;
  sim::Geometry& g = c.geometry;
  double usable = 1.0 - c.overprovision;
  uint64_t row = g.planes() * g.page_bytes;  // bytes of one page in every plane
  g.blocks_per_plane = 64;                   // enough blocks that the GC reserve fits in the spare area
  uint64_t ppb = static_cast<uint64_t>(static_cast<double>(o.device_bytes) / usable / (row * 64)) + 1;
  if (ppb <= g.pages_per_block) {
    g.pages_per_block = static_cast<uint32_t>(ppb);
  } else {
    g.blocks_per_plane = static_cast<uint32_t>(o.device_bytes / usable / (row * g.pages_per_block)) + 1;
  }
  sim::validate(c);
  return c;
}

constexpr long long kLatencyMaxNs = 1000000000;  // a paced null device's latency_ns: at most 1 s

// GPUIO_SIM overrides (see io.hpp). Throws std::invalid_argument naming the bad key or value.
SimOptions with_env_overrides(SimOptions o) {
  const char* env = std::getenv("GPUIO_SIM");
  if (!env || !*env) return o;
  std::string all(env);
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find(',', pos);
    if (end == std::string::npos) end = all.size();
    std::string item = all.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    GPUIO_EXPECT(eq != std::string::npos, "GPUIO_SIM: '" + item + "' is not key=value");
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto num = [&](void) -> long long {
      char* e = nullptr;
      long long x = std::strtoll(v.c_str(), &e, 10);
      GPUIO_EXPECT(!v.empty() && *e == 0, "GPUIO_SIM: " + k + "='" + v + "' is not an integer");
      return x;
    };
    auto nonneg = [&](long long hi) -> long long {
      long long x = num();
      GPUIO_EXPECT(x >= 0 && x <= hi, "GPUIO_SIM: " + k + "=" + v + " must lie in [0, " + std::to_string(hi) + "]");
      return x;
    };
    if (k == "preset") o.preset = v;
    else if (k == "channels") o.channels = static_cast<uint32_t>(num());
    else if (k == "device_bytes") o.device_bytes = static_cast<uint64_t>(num());
    else if (k == "paced") o.paced = num() != 0;
    else if (k == "write_buffer_pages") o.write_buffer_pages = num();
    else if (k == "seed") o.seed = static_cast<uint64_t>(num());
    else if (k == "backing_dir") o.backing_dir = v;
    else if (k == "null") o.null = num() != 0;
    else if (k == "null_paced") o.null_paced = num() != 0;
    else if (k == "latency_ns") o.latency_ns = static_cast<uint64_t>(nonneg(kLatencyMaxNs));
    else if (k == "link_mb_s") o.link_mb_s = static_cast<uint32_t>(nonneg(UINT32_MAX));
    else throw std::invalid_argument("GPUIO_SIM: unknown key '" + k + "' (known: preset, channels, device_bytes, "
                                     "paced, write_buffer_pages, seed, backing_dir, null, null_paced, latency_ns, "
                                     "link_mb_s)");
  }
  return o;
}

class SimBackend;

class SimQueue final : public IoQueue {
 public:
  SimQueue(SimBackend& be, uint32_t depth, uint32_t host_queue);
  bool prepare(const IoRequest& r) override {
    if (inflight_ >= depth_) return false;
    prepared_.push_back(r);
    ++inflight_;
    return true;
  }
  int submit() override;
  int reap(IoCompletion* out, int max, int wait_min) override;
  uint32_t depth() const override { return depth_; }
  uint32_t inflight() const override { return inflight_; }
  uint64_t device_ns() const override { return device_ns_; }
  uint64_t device_wait_ns() const override { return wait_ns_; }

 private:
  struct Pending {
    uint64_t due_ns;
    IoCompletion c;
    bool operator>(const Pending& o) const { return due_ns > o.due_ns; }
  };
  int32_t move_data(const IoRequest& r);
  uint64_t model_due(SimDevice& d, const IoRequest& r);
  void model_dues();
  void link_dues(uint64_t now);

  SimBackend& be_;
  uint32_t depth_, host_queue_, inflight_ = 0;
  uint64_t vnow_ = 0;  // free-running model time of this queue
  uint64_t device_ns_ = 0;  // wall time inside execute(): the emulated device's own cost (model + data copy)
  uint64_t wait_ns_ = 0;    // wall time reap() waited for a paced completion to fall due
  std::vector<IoRequest> prepared_;
  std::vector<Pending> pending_;  // min-heap by due_ns
  // submit()'s scratch (no allocation once grown): results, due times, requests by device, runs of one device
  std::vector<int32_t> results_;
  std::vector<uint64_t> due_;
  std::vector<int> order_;
  std::vector<std::pair<size_t, size_t>> runs_;
  // link_dues()' scratch, per device: the first request's bytes, the run's bytes, then the run's base / bytes so far
  std::vector<uint64_t> run_first_, run_bytes_, run_base_;
  std::vector<uint16_t> touched_;
};

class SimBackend final : public IoBackend {
 public:
  SimBackend(const std::vector<std::string>& paths, const BackendOptions& o)
      : opts_(with_env_overrides(o.sim)), t0_(Clock::now()) {
    GPUIO_EXPECT(!paths.empty(), "sim backend: no devices given");
    GPUIO_EXPECT(paths.size() <= limits::devices_max, "sim backend: " + std::to_string(paths.size()) +
                 " devices exceed devices_max=" + std::to_string(limits::devices_max));
    GPUIO_EXPECT(opts_.device_bytes >= (1u << 20) && opts_.device_bytes % 4096 == 0,
                 "sim backend: device_bytes=" + std::to_string(opts_.device_bytes) + " must be a multiple of 4096 and >= 1 MiB");
    GPUIO_EXPECT(paced_null() || (opts_.latency_ns == 0 && opts_.link_mb_s == 0),
                 "sim backend: latency_ns=" + std::to_string(opts_.latency_ns) + " and link_mb_s=" +
                 std::to_string(opts_.link_mb_s) + " time the paced null device only (null_paced=1)");
    GPUIO_EXPECT(!opts_.null_paced || opts_.paced,
                 "sim backend: null_paced=1 runs the devices in real time; paced=0 (free-running) contradicts it");
    GPUIO_EXPECT(opts_.latency_ns <= static_cast<uint64_t>(kLatencyMaxNs),
                 "sim backend: latency_ns=" + std::to_string(opts_.latency_ns) + " must be <= " +
                 std::to_string(kLatencyMaxNs) + " (1 s)");
    sim::SsdConfig cfg = model_config(opts_);
    const uint64_t latency_ns = opts_.latency_ns ? opts_.latency_ns : paced_null() ? model_read_latency_ns(cfg) : 0;
    const uint32_t link_mb_s = opts_.link_mb_s ? opts_.link_mb_s : cfg.timings.host_mb_s;
    for (const std::string& p : paths) {
      GPUIO_EXPECT(!p.empty() && p.find('/') == std::string::npos,
                   "sim backend: device name '" + p + "' must be a plain name like sim0");
      DeviceInfo info;
      info.path = p;
      info.bytes = opts_.device_bytes;
      info.logical_block_bytes = 512;
      std::string file = opts_.backing_dir.empty() ? "" : opts_.backing_dir + "/" + p + ".img";
      devs_.push_back(std::make_unique<SimDevice>(info, std::make_unique<SimStore>(opts_.device_bytes, file), cfg,
                                                  latency_ns, link_mb_s));
      GPUIO_ASSERT(devs_.back()->model.logical_bytes() >= opts_.device_bytes, "sim model smaller than the device");
    }
  }
  const char* name() const override { return "sim"; }
  size_t device_count() const override { return devs_.size(); }
  const DeviceInfo& device(size_t i) const override { return devs_.at(i)->info; }
  std::unique_ptr<IoQueue> create_queue(uint32_t depth, const std::vector<FixedBuffer>&) override {
    GPUIO_EXPECT(depth > 0 && depth <= limits::queue_depth_max,
                 "sim backend: queue depth " + std::to_string(depth) + " must lie in [1, queue_depth_max]");
    return std::make_unique<SimQueue>(*this, depth, queues_.fetch_add(1) % limits::workers_max);
  }
  std::string describe() const override {
    char null_desc[160] = "";
    const LinkClock& link = devs_[0]->link;
    if (paced_null())  // benchmarks read latency_ns and link_mb_s from here: the values in effect
      std::snprintf(null_desc, sizeof null_desc, " null=on(paced: latency_ns=%llu link_mb_s=%u, no model, no data)",
                    static_cast<unsigned long long>(link.latency_ns()), link.link_mb_s());
    else if (null())
      std::snprintf(null_desc, sizeof null_desc, " null=on(no model, no data)");
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "sim(preset=%s paced=%s devices=%zu device_bytes=%llu channels=%u write_buffer_pages=%u store=%s%s%s)",
                  opts_.preset.c_str(), opts_.paced ? "on" : "off", devs_.size(),
                  static_cast<unsigned long long>(opts_.device_bytes), devs_[0]->model.config().geometry.channels,
                  devs_[0]->model.config().write_buffer_pages, opts_.backing_dir.empty() ? "memory" : "file",
                  null_desc, std::getenv("GPUIO_SIM") ? " env=GPUIO_SIM" : "");
    return buf;
  }
  void sync() override {
    for (auto& d : devs_) d->store->sync();
  }
  SimDevice& dev(size_t i) { return *devs_[i]; }
  bool paced() const { return opts_.paced && !null(); }  // the flash model, in real time
  bool null() const { return opts_.null || opts_.null_paced; }
  bool paced_null() const { return opts_.null_paced; }  // each device's LinkClock, in real time
  bool real_time() const { return paced() || paced_null(); }
  uint64_t now_ns() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count());
  }

 private:
  SimOptions opts_;
  Clock::time_point t0_;
  std::vector<std::unique_ptr<SimDevice>> devs_;
  std::atomic<uint32_t> queues_{0};
};

SimQueue::SimQueue(SimBackend& be, uint32_t depth, uint32_t host_queue)
    : be_(be), depth_(depth), host_queue_(host_queue) {
  prepared_.reserve(depth);
  pending_.reserve(depth);
}

// The request's checks and its data (outside any lock: the store is safe for concurrent requests); 0 or more:
// the model must time it (model_due), else the result is final and due now.
int32_t SimQueue::move_data(const IoRequest& r) {
  if (r.device >= be_.device_count()) return -ENODEV;
  SimDevice& d = be_.dev(r.device);
  if (r.len == 0 || r.offset + r.len > d.info.bytes) return -EINVAL;
  if (!r.buf) return -EFAULT;
  if (be_.null()) return static_cast<int32_t>(r.len);  // zero latency, no data moved (due = vnow_: ready now)
  return r.op == IoOp::read ? d.store->read(r.buf, r.offset, r.len) : d.store->write(r.buf, r.offset, r.len);
}

// The device's model times the request; the caller holds the device's lock.
uint64_t SimQueue::model_due(SimDevice& d, const IoRequest& r) {
  uint64_t arrival = be_.paced() ? be_.now_ns() : vnow_;
  return d.model.submit(sim::Request{arrival, r.offset, r.len, r.op == IoOp::write, host_queue_});
}

// A device's model is one sequential state (its timelines and FTL): the model updates of one device run under its
// lock, but a submission takes each device's lock once for all its requests (in this queue's order), and a device
// whose lock another worker holds is passed over until the others are done. Locking per request, two workers sharing
// a device handed its lock over at every request (a futex wake and sleep each time), so on the H100 (672b55b) 8
// devices ran as fast on 5-7 workers as on 4 (2.55-2.69 M vs 2.60 M IOPS; 8 workers 5.43 M) although the model work
// per device was far below one core. The timing is the model's as before: each request arrives at the same time
// (this queue's model time, or the wall clock when paced) and a device sees this queue's requests in their order;
// only requests of two queues on one device are interleaved in runs rather than one by one, as an NVMe device's
// arbitration takes a burst of commands from one submission queue.
int SimQueue::submit() {
  int n = static_cast<int>(prepared_.size());
  if (n == 0) return 0;
  auto t0 = Clock::now();
  const uint64_t base = be_.real_time() ? be_.now_ns() : vnow_;
  results_.resize(n);
  order_.clear();
  for (int i = 0; i < n; ++i) {
    results_[i] = move_data(prepared_[i]);
    if (results_[i] >= 0 && (!be_.null() || be_.paced_null())) order_.push_back(i);
  }
  due_.assign(n, base);  // errors, and the null device's requests: due at once
  if (be_.paced_null()) link_dues(base);
  else if (!be_.null()) model_dues();
  for (int i = 0; i < n; ++i) {
    pending_.push_back({due_[i], {prepared_[i].user_data, results_[i]}});
    std::push_heap(pending_.begin(), pending_.end(), std::greater<>());
  }
  prepared_.clear();
  device_ns_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  return n;
}

// The flash model's due times of the requests in order_ (all arriving at this queue's model time, or now when paced).
void SimQueue::model_dues() {
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int a, int b) { return prepared_[a].device < prepared_[b].device; });
  std::vector<uint64_t>& due = due_;
  // runs of one device in order_: [start, end); taken in passes, a device whose lock is held waits for the next pass
  runs_.clear();
  for (size_t i = 0; i < order_.size();) {
    size_t j = i;
    while (j < order_.size() && prepared_[order_[j]].device == prepared_[order_[i]].device) ++j;
    runs_.push_back({i, j});
    i = j;
  }
  size_t left = runs_.size();
  for (bool block = false; left > 0;) {
    bool progress = false;
    for (auto& run : runs_) {
      if (run.first == run.second) continue;
      SimDevice& d = be_.dev(prepared_[order_[run.first]].device);
      std::unique_lock<std::mutex> g(d.mu, std::defer_lock);
      if (block) g.lock();
      else if (!g.try_lock()) continue;
      for (size_t k = run.first; k < run.second; ++k) due[order_[k]] = model_due(d, prepared_[order_[k]]);
      run.first = run.second;
      --left;
      progress = true;
      block = false;
    }
    block = !progress;  // every device left is busy: wait for the first one
  }
}

// The paced null device: the requests in order_ (arriving together at now), in their order per device, as one
// run per device on its LinkClock: three passes over the requests and one compare-and-swap per device.
void SimQueue::link_dues(uint64_t now) {
  const size_t devices = be_.device_count();
  if (run_first_.size() < devices) {
    run_first_.assign(devices, 0);
    run_bytes_.assign(devices, 0);
    run_base_.assign(devices, 0);
  }
  touched_.clear();
  for (int i : order_) {
    const IoRequest& r = prepared_[i];
    if (run_bytes_[r.device] == 0) run_first_[r.device] = r.len, touched_.push_back(r.device);
    run_bytes_[r.device] += r.len;
  }
  for (uint16_t d : touched_) {
    run_base_[d] = be_.dev(d).link.reserve(now, run_first_[d], run_bytes_[d]);
    run_bytes_[d] = 0;  // from here: the run's bytes so far
  }
  for (int i : order_) {
    const IoRequest& r = prepared_[i];
    run_bytes_[r.device] += r.len;
    due_[i] = run_base_[r.device] + be_.dev(r.device).link.xfer_ns(run_bytes_[r.device]);
  }
  for (uint16_t d : touched_) run_bytes_[d] = 0;
}

int SimQueue::reap(IoCompletion* out, int max, int wait_min) {
  int n = 0;
  wait_min = std::min(wait_min, max);
  bool waiting = false;
  uint64_t waited_from = 0;  // the clock when this call last went to wait
  for (;;) {
    uint64_t now = be_.real_time() ? be_.now_ns() : UINT64_MAX;
    if (waiting) wait_ns_ += now - waited_from, waiting = false;
    while (n < max && !pending_.empty() && pending_.front().due_ns <= now) {
      std::pop_heap(pending_.begin(), pending_.end(), std::greater<>());
      out[n++] = pending_.back().c;
      vnow_ = std::max(vnow_, pending_.back().due_ns);
      pending_.pop_back();
      --inflight_;
    }
    if (n >= wait_min || pending_.empty()) return n;
    uint64_t wait = pending_.front().due_ns - now;  // > 0: the loop above took everything due
    waiting = true, waited_from = now;
    if (wait > 200000)
      std::this_thread::sleep_for(std::chrono::nanoseconds(wait - 100000));
    else
      std::this_thread::yield();
  }
}

}  // namespace

std::unique_ptr<IoBackend> make_sim_backend(const std::vector<std::string>& paths, const BackendOptions& o) {
  return std::make_unique<SimBackend>(paths, o);
}

}  // namespace gpuio::detail

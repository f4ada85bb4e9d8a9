// The control plane's GPU side: one thread polls every queue's ring for doorbells (GpuRequest::ready),
// turns each request into an engine batch, and publishes completions in order through GpuQueueShared::done.
// It spins while any request is outstanding and for poll_spin_us after the last activity (a GPU round trip then
// costs a few microseconds), then naps in short, growing sleeps (2..20 us) so an idle engine costs next to no
// core. It never naps with a request outstanding: a completion waits at most one pass to be published.
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "gpu/cuda_check.hpp"
#include "gpu/runtime_impl.hpp"
#include "gpuio/status.hpp"

namespace gpuio {

namespace {
using Clock = std::chrono::steady_clock;

uint32_t load_acquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }
uint32_t clamp_u32(int64_t ns) { return static_cast<uint32_t>(std::min<int64_t>(std::max<int64_t>(ns, 0), UINT32_MAX)); }
void store_release(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
}  // namespace

bool GpuRuntime::Impl::take_requests(uint32_t q) {
  GpuQueueShared& s = shared_host[q];
  QueueState& st = qstate[q];
  bool took = false;
  for (;;) {
    GpuRequest& r = s.ring[st.next % gpu_limits::queue_ring_slots];
    if (load_acquire(&r.ready) != st.next) return took;
    took = true;
    InFlight f;
    f.seq = st.next++;
    const bool device_api = q < opts.queues;
    if (device_api) f.seen_ns = now_ns();
    requests.fetch_add(1, std::memory_order_relaxed);
    const uint32_t n = r.n;
    const IoOp op = r.op == gpu_write ? IoOp::write : IoOp::read;
    // gpu_mem_landed: host-mapped memory the requesting block copies from itself; the engine sees a host read.
    const MemKind kind = r.mem_kind == static_cast<uint32_t>(MemKind::device) ? MemKind::device : MemKind::host;
    if (device_api) (r.mem_kind == gpu_mem_landed ? landed_requests : device_requests).fetch_add(1, std::memory_order_relaxed);
    const int64_t* ids = r.ids;
    if (r.cell) f.cell = cells_host + (reinterpret_cast<uint32_t*>(r.cell) - cells_dev);
    try {
      if (n > gpu_limits::request_inline_ids_max) {
        GPUIO_EXPECT(n <= gpu_limits::request_blocks_max,
                     "GPU request of " + std::to_string(n) + " blocks exceeds request_blocks_max=" +
                         std::to_string(gpu_limits::request_blocks_max));
        // Stream requests name ids in the bounce pool's host-mapped memory: read them there, no CUDA call
        // (gpu.hpp). Device-API requests name GPU memory: copied (that path waits on CUDA calls anyway).
        ids = bounce.host_ids(r.blocks);
        if (ids == nullptr) {
          GPUIO_CUDA(cudaMemcpyAsync(ids_pinned, reinterpret_cast<const void*>(r.blocks), size_t{n} * 8,
                                     cudaMemcpyDeviceToHost, control_stream));
          GPUIO_CUDA(cudaStreamSynchronize(control_stream));
          ids = ids_pinned;
        }
      }
      void* mem = reinterpret_cast<void*>(r.mem);
      // A queue landing slot names its device address (the same as the host one under UVA, but not assumed).
      const uint64_t landing_bytes = uint64_t{opts.queues} * gpu_limits::landing_slots * gpu_limits::landing_slot_bytes;
      if (r.mem_kind == gpu_mem_landed && landing_dev && r.mem >= reinterpret_cast<uint64_t>(landing_dev) &&
          r.mem < reinterpret_cast<uint64_t>(landing_dev) + landing_bytes) {
        mem = landing_host + (r.mem - reinterpret_cast<uint64_t>(landing_dev));
      }
      f.handle = engine.submit(op, ids, n, mem, kind);
      if (device_api) f.submitted_ns = now_ns();
    } catch (const IoError& e) {
      f.failed_at_submit = true;
      f.err = e.error_code();
      f.message = e.what();
    } catch (const std::out_of_range& e) {
      f.failed_at_submit = true;
      f.err = ERANGE;
      f.message = e.what();
    } catch (const std::exception& e) {
      f.failed_at_submit = true;
      f.err = EINVAL;
      f.message = e.what();
    }
    st.inflight.push_back(std::move(f));
  }
}

void GpuRuntime::Impl::fail(uint32_t q, InFlight& f) {
  GpuQueueShared& s = shared_host[q];
  __atomic_store_n(&s.failed_errno, f.err, __ATOMIC_RELAXED);
  __atomic_store_n(&s.failed_seq, f.seq, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s.failures, 1u, __ATOMIC_RELEASE);
  failures.fetch_add(1, std::memory_order_release);
  std::lock_guard<std::mutex> g(error_mu);
  last_error = "GPU queue " + std::to_string(q) + " request " + std::to_string(f.seq) + ": " + f.message;
}

bool GpuRuntime::Impl::finish_requests(uint32_t q) {
  QueueState& st = qstate[q];
  bool finished = false;
  while (!st.inflight.empty()) {
    InFlight& f = st.inflight.front();
    if (!f.failed_at_submit) {
      if (!f.handle.done()) return finished;
      try {
        f.handle.wait(0);
      } catch (const IoError& e) {
        f.err = e.error_code();
        f.message = e.what();
      }
    }
    const int64_t done_seen = f.submitted_ns ? now_ns() : 0;
    if (f.err != 0) fail(q, f);
    store_release(&shared_host[q].done, f.seq);  // after the failure words: the GPU reads both in one load
    if (f.cell) store_release(f.cell, 1);
    if (f.submitted_ns) record_hops(f, done_seen, now_ns());
    st.inflight.pop_front();
    finished = true;
  }
  return finished;
}

bool GpuRuntime::Impl::finish_host() {
  {
    std::lock_guard<std::mutex> g(host_mu);
    for (InFlight& f : host_inbox) host_inflight.push_back(std::move(f));
    host_inbox.clear();
  }
  bool finished = false;
  for (size_t i = 0; i < host_inflight.size();) {
    InFlight& f = host_inflight[i];
    if (!f.handle.done()) {
      ++i;
      continue;
    }
    try {
      f.handle.wait(0);
    } catch (const IoError& e) {
      f.err = e.error_code();
      f.message = e.what();
    }
    if (f.err != 0) fail(opts.queues, f);
    store_release(f.cell, 1);
    host_inflight[i] = std::move(host_inflight.back());
    host_inflight.pop_back();
    finished = true;
  }
  return finished;
}

void GpuRuntime::Impl::record_hops(const InFlight& f, int64_t done_seen_ns, int64_t published_ns) {
  const std::array<uint32_t, 3> h{clamp_u32(f.submitted_ns - f.seen_ns), clamp_u32(done_seen_ns - f.submitted_ns),
                                  clamp_u32(published_ns - done_seen_ns)};
  api_requests.fetch_add(1, std::memory_order_relaxed);
  api_submit_ns.fetch_add(h[0], std::memory_order_relaxed);
  api_engine_ns.fetch_add(h[1], std::memory_order_relaxed);
  api_signal_ns.fetch_add(h[2], std::memory_order_relaxed);
  std::lock_guard<std::mutex> g(trace_mu);  // uncontended but for a reader taking the record
  if (trace.size() < GpuRuntime::device_api_trace_max) {
    trace.push_back(h);
  } else {
    trace[trace_next] = h;
    trace_next = (trace_next + 1) % trace.size();
  }
}

void GpuRuntime::Impl::run_poller() {
  pthread_setname_np(pthread_self(), "gpuio-gpu");
  cudaSetDevice(device);
  prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: naps stay short
  auto last_active = Clock::now();
  const auto spin = std::chrono::microseconds(opts.poll_spin_us);
  // Low-latency mode (the engine's): no nap while a request is outstanding. Otherwise (slow-completion backends,
  // few CPUs) the spin window alone decides, as the engine's workers do.
  const bool spin_outstanding = engine.low_latency_on();
  bool outstanding = false;  // after a pass: some request taken is not yet signalled
  auto pass = [&] {
    bool any = false;
    outstanding = false;
    for (uint32_t q = 0; q < total_queues(); ++q) {
      if (!stop.load(std::memory_order_relaxed)) any |= take_requests(q);
      any |= finish_requests(q);
      outstanding |= !qstate[q].inflight.empty();
    }
    any |= finish_host();
    outstanding |= !host_inflight.empty();
    return any;
  };
  long nap_ns = 2000;
  while (!stop.load(std::memory_order_acquire)) {
    if (pass()) {
      last_active = Clock::now();
      nap_ns = 2000;
      continue;
    }
    // Spin while a request is outstanding (its completion is published within one pass, never after a nap) and
    // for the spin window after the last activity (the GPU's next request usually follows within it).
    if ((spin_outstanding && outstanding) || Clock::now() - last_active < spin) {
      __builtin_ia32_pause();
      continue;
    }
    // Naps grow from 2 us to 20 us: a request soon after the spin window waits little, a long-idle engine
    // wakes at most 50 000 times a second. (The GPU cannot wake a futex, so there is no doorbell wake.)
    timespec ts{0, nap_ns};
    nanosleep(&ts, nullptr);
    nap_ns = std::min(nap_ns * 2, 20000L);
  }
  // Drain: requests already taken finish and are signalled; no new ones are taken.
  for (;;) {
    bool pending = false;
    for (uint32_t q = 0; q < total_queues(); ++q) {
      finish_requests(q);
      pending |= !qstate[q].inflight.empty();
    }
    finish_host();
    {
      std::lock_guard<std::mutex> g(host_mu);
      pending |= !host_inflight.empty() || !host_inbox.empty();
    }
    if (!pending) break;
    timespec ts{0, 50000};
    nanosleep(&ts, nullptr);
  }
  timespec cpu{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) poller_cpu.store(cpu.tv_sec + cpu.tv_nsec * 1e-9);
}

}  // namespace gpuio

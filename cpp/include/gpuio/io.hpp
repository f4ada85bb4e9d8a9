// The one I/O interface every backend implements (liburing/SPDK shape):
//   prepare() a request -> submit() the prepared batch -> reap() completions with a budget.
// An IoQueue has exactly one owner thread and takes no locks on its data path. prepare() returns false
// when the queue is full instead of blocking. Completions are only ever delivered by reap(), never by
// callbacks, so the owner decides when to handle them. The one exception is IoBackend::submit_direct
// (backends whose library is thread-safe and calls back on threads of its own: rbd), used without a queue.
// An IoBackend owns the devices and is shared between threads; it creates one IoQueue per owner thread.
#pragma once
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuio/fault.hpp"
#include "gpuio/limits.hpp"
#include "gpuio/status.hpp"

namespace gpuio {

enum class IoOp : uint8_t { read = 0, write = 1 };

struct IoRequest {
  uint64_t user_data = 0;  // returned unchanged in the completion
  void* buf = nullptr;     // host memory; aligned to the device's logical block when the device is direct
  uint64_t offset = 0;     // bytes from the start of the device
  uint32_t len = 0;        // bytes
  uint16_t device = 0;     // index into the backend's devices
  IoOp op = IoOp::read;
  int32_t buf_index = -1;  // index of a registered (fixed) buffer holding buf, or -1
};

// A request handed to IoBackend::submit_direct: done() is called exactly once, on a thread of the backend's
// library, with the bytes transferred (may be short) or -errno. The request must stay alive until then.
struct DirectRequest : IoRequest {
  void (*done)(DirectRequest* self, int64_t res) = nullptr;
};

struct IoCompletion {
  uint64_t user_data = 0;
  int32_t res = 0;  // bytes transferred (may be short) or -errno
};

class IoQueue {
 public:
  virtual ~IoQueue() = default;
  // Queue one request. Returns false, queuing nothing, when the queue holds depth() requests already.
  virtual bool prepare(const IoRequest& req) = 0;
  // Hand every prepared request to the device. Returns how many, or -errno.
  virtual int submit() = 0;
  // Move up to max completions into out; block until at least wait_min are available (0: never block).
  // Returns the number written or -errno. Never returns more than max.
  virtual int reap(IoCompletion* out, int max, int wait_min) = 0;
  // submit() then reap(): backends that can do both in one system call (io_uring_submit_and_wait)
  // override it. Returns completions written, or -errno from reaping; a submit error of -EAGAIN, -EBUSY
  // or -EINTR leaves the requests prepared for the next call.
  virtual int submit_and_reap(IoCompletion* out, int max, int wait_min) {
    int rc = submit();
    if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR) return rc;
    return reap(out, max, wait_min);
  }
  virtual uint32_t depth() const = 0;
  virtual uint32_t inflight() const = 0;  // prepared or submitted, not yet reaped
  // Nanoseconds this queue spent inside an emulated device (sim: its flash model and data copy) so far; 0 where
  // the device's work is not visible to the caller (kernel or remote devices). Read by the owner thread only.
  virtual uint64_t device_ns() const { return 0; }
  // Nanoseconds reap() spent waiting for an emulated device's completion to fall due (paced sim devices): the
  // device's time, not work on the caller's core; part of the caller's time in reap(). 0 for other backends.
  virtual uint64_t device_wait_ns() const { return 0; }
};

struct DeviceInfo {
  std::string path;
  uint64_t bytes = 0;
  uint32_t logical_block_bytes = 512;
  bool direct = false;       // opened with O_DIRECT
  bool block_device = false;
  bool zero_copy = false;    // any host buffer works, no alignment: data moves straight to/from caller memory (rbd)
};

struct FixedBuffer {
  void* base = nullptr;
  size_t bytes = 0;
};

// The sim backend: each path names one emulated SSD ("sim0", "sim1", ...; no file is opened unless
// backing_dir is set). Timing comes from the flash model (gpuio/sim.hpp).
// Environment override, read in one place when the backend opens: GPUIO_SIM="preset=tlc,channels=1,
// device_bytes=1073741824,paced=1,write_buffer_pages=-1,seed=1,backing_dir=/path,null=0,null_paced=0,latency_ns=0,
// link_mb_s=0"
// (any subset); the values in effect are reported by describe().
struct SimOptions {
  std::string preset = "znand";      // znand | tlc (gpuio::sim::preset_names())
  uint64_t device_bytes = 1ull << 30;  // capacity of each device
  bool paced = true;                 // completions wait for the model's time in real time; false: free-running
  std::string backing_dir;           // empty: data in memory (sparse, zeros until written); else one file per device
  uint32_t channels = 0;             // 0: the preset's; else fewer/more flash channels (a slower/faster device)
  int64_t write_buffer_pages = -1;   // -1: the preset's DRAM write buffer; 0: none (writes wait for the program)
  uint64_t seed = 1;
  // Zero-latency null device (null_blk with memory_backed=0): no flash model and no data copy; every request
  // completes at once with its full length and read buffers are left as they were. Measures the engine alone.
  bool null = false;
  // The paced null device (implies null; needs paced): no flash model and no data either, but each device has a
  // latency and a link rate of its own (io/link_clock.hpp): a request completes, in real time, at
  // max(arrival + latency_ns, the device's previous completion + its bytes over link_mb_s). Its cost to the host is
  // bookkeeping (one compare-and-swap per device per submission), as a real drive's flash work and DMA are its own
  // hardware's; read buffers are left as they were (no data is produced).
  bool null_paced = false;
  uint64_t latency_ns = 0;           // paced null: a read's latency on an idle device; 0: the preset model's for
                                     // one page read on an idle drive (znand 11.4 us, tlc 67 us)
  uint32_t link_mb_s = 0;            // paced null: the device's rate in MB/s (bytes/us); 0: the preset's host link
                                     // (timings.host_mb_s: znand 3200 = 0.78 M 4 KiB reads/s)
};

// The rbd backend (built when librbd is found): each path names a volume, "rbd:POOL/IMAGE" or
// "rbd:POOL/NAMESPACE/IMAGE". One librados client per backend, i.e. one cephx identity and one lock owner.
// Empty conf/user/keyring take the defaults the `rbd` tool uses: CEPH_CONF (else /etc/ceph/ceph.conf),
// CEPH_ARGS (--id/--keyring/...), client.admin.
struct RbdOptions {
  std::string conf;                  // ceph.conf path
  std::string user;                  // cephx id without "client." ("admin", "gpu1")
  std::string keyring;               // keyring path
  bool exclusive = true;             // a writable engine takes the volume's exclusive lock (single writer)
  uint32_t lock_wait_ms = 0;         // retry a lock held by another live writer this long, then EBUSY
  bool break_lock = false;           // break the current owner's lock (blocklisting it: fencing) and take it
  uint32_t timeout_s = 30;           // connecting and mon commands fail (ETIMEDOUT) after this
  uint32_t op_timeout_s = 0;         // an OSD request fails with ETIMEDOUT after this; 0: waits for recovery
};

// What may differ between the files (devices) of one engine: how each is opened.
struct DeviceOpenOptions {
  bool direct = true;            // O_DIRECT
  bool writable = true;
  bool lock = false;             // exclusive flock, waiting up to lock_wait_ms (see BackendOptions::lock)
  uint32_t lock_wait_ms = limits::lock_wait_ms_default;
};

struct BackendOptions {
  std::string kind = "uring";    // uring | posix | sim | rbd | fault:<inner>
  bool direct = true;            // O_DIRECT
  bool writable = true;
  bool sqpoll = false;           // uring: kernel thread polls the submission queue
  bool iopoll = false;           // uring: busy-poll completions (only where the device supports it)
  uint32_t posix_threads = limits::posix_threads_default;
  // Take an exclusive flock on every device, waiting up to lock_wait_ms. The kernel releases it only
  // after the last request of the previous holder ended, even when that process was killed with
  // requests in flight; so a store that restarts after kill -9 never sees old writes land late.
  bool lock = false;
  uint32_t lock_wait_ms = limits::lock_wait_ms_default;
  FaultOptions fault;            // used when kind is fault:<inner>
  SimOptions sim;                // used when kind is sim
  RbdOptions rbd;                // used when kind is rbd
};

class IoBackend {
 public:
  virtual ~IoBackend() = default;
  virtual const char* name() const = 0;
  virtual size_t device_count() const = 0;
  virtual const DeviceInfo& device(size_t i) const = 0;
  // Create a queue for the calling thread. fixed buffers are registered with it where the backend can.
  virtual std::unique_ptr<IoQueue> create_queue(uint32_t depth, const std::vector<FixedBuffer>& fixed) = 0;
  // Human-readable features and what was actually enabled ("sqpoll=off iopoll=unsupported ...").
  virtual std::string describe() const = 0;
  // Make completed writes durable. Throws IoError. Backends with no volatile cache (memory) do nothing.
  virtual void sync() = 0;
  // false where a completion takes a network round trip (hundreds of microseconds): the engine's threads
  // then sleep at once instead of polling for it, leaving the CPU to the cluster and the other clients.
  virtual bool fast_completions() const { return true; }
  // true where any thread may call submit_direct() (the library is thread-safe and completes on its own
  // threads): the engine then issues unstaged host extents from the submitting thread and finishes them in
  // done(), with no worker thread between the caller and the device (rbd: librbd's AIO calls).
  virtual bool direct_submission() const { return false; }
  // Issue one request now, from any thread. 0, or -errno when it never reached the device (done() is then
  // not called). Only where direct_submission() is true.
  virtual int submit_direct(DirectRequest*) { return -EOPNOTSUPP; }

  // One read on the calling thread, with no queue and no worker: the bytes read (short only at the device's end),
  // or -errno; -EOPNOTSUPP where the backend has no such path (sim, fault, rbd: the engine then queues the read).
  // *cached: the bytes came from the page cache (a direct device's range the cache held whole). buf must suit the
  // device's O_DIRECT alignment. Thread-safe; the device must stay open until it returns (the engine counts it).
  virtual int64_t read_now(uint32_t device, void* buf, uint32_t len, uint64_t offset, bool* cached) {
    (void)device, (void)buf, (void)len, (void)offset, (void)cached;
    return -EOPNOTSUPP;
  }

  // Devices opened after creation (file-descriptor backends: uring, posix), while queues run: the engine's
  // targets (Engine::open_target). Returns their indices; queues made earlier serve them too. A closed device's
  // index may be given to a later device. Thread-safe against each other and against queues using other devices.
  virtual bool opens_devices() const { return false; }
  virtual std::vector<uint32_t> open_devices(const std::vector<std::string>& paths, const DeviceOpenOptions&);
  // Close devices from open_devices(); no request may be in flight on them (the engine waits for their batches).
  virtual void close_devices(const std::vector<uint32_t>& devices);
  // fdatasync those devices only. Throws IoError naming the device.
  virtual void sync_devices(const std::vector<uint32_t>& devices) {
    (void)devices;
    sync();
  }
};

// Opens paths with the given backend kind. Throws IoError naming the path on failure, and
// std::invalid_argument for an unknown kind.
std::unique_ptr<IoBackend> make_backend(const std::vector<std::string>& paths, const BackendOptions& opts);
// Whether this build has the rbd backend (librbd was found at configure time).
bool rbd_built();

}  // namespace gpuio

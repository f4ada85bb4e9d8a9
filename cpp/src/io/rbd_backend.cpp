// rbd backend: each device is a Ceph RBD volume, read and written with librbd's C AIO API. prepare()
// only records a request; submit() hands each to rbd_aio_read/rbd_aio_write; librbd's completion callback
// appends the finished slot to the queue's done list (one mutex, a condition variable only when the owner
// sleeps), and reap() hands those to the worker like io_uring CQEs. The data moves straight between the
// OSDs' messages and the caller's (or the staging pool's) memory: no alignment, no bounce buffer.
// librbd's AIO calls are thread-safe and complete on librbd's threads, so the backend also takes requests
// from any thread (submit_direct): the engine issues a host batch's extents from the caller's thread and
// librbd's completion thread finishes them, with no engine worker in between (see IoBackend).
// A writable engine takes each volume's exclusive lock (the single-writer lease, see RbdOptions); readers
// open the image read-only and take no lock.
#include <rados/librados.h>
#include <rbd/librbd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gpuio/status.hpp"
#include "io/rbd_client.hpp"

namespace gpuio::detail {
namespace {

class RbdQueue;

// librbd reports a read's bytes and 0 for a completed write.
int64_t result_of(int64_t rc, IoOp op, uint32_t len) {
  return rc < 0 ? rc : op == IoOp::write ? len : std::min<int64_t>(rc, len);
}

void on_direct_complete(rbd_completion_t c, void* arg) {
  auto* r = static_cast<DirectRequest*>(arg);
  int64_t rc = rbd_aio_get_return_value(c);
  rbd_aio_release(c);
  r->done(r, result_of(rc, r->op, r->len));
}

struct Slot {
  RbdQueue* queue = nullptr;
  uint64_t user_data = 0;
  rbd_completion_t completion = nullptr;
  uint32_t len = 0;
  uint32_t index = 0;
  IoOp op = IoOp::read;
  int64_t res = 0;
};

class RbdQueue final : public IoQueue {
 public:
  RbdQueue(const std::vector<rbd_image_t>& images, uint32_t depth) : images_(images), depth_(depth), slots_(depth) {
    for (uint32_t i = depth; i-- > 0;) {
      slots_[i].queue = this;
      slots_[i].index = i;
      free_.push_back(i);
    }
    done_.reserve(depth);
    taken_.reserve(depth);
  }
  ~RbdQueue() override {
    // librbd still holds pointers to slots in flight: wait for them (rbd_close would, too).
    IoCompletion c[64];
    while (inflight_ > 0) reap(c, 64, 1);
  }

  bool prepare(const IoRequest& r) override {
    if (free_.empty()) return false;
    uint32_t i = free_.back();
    free_.pop_back();
    Slot& s = slots_[i];
    s.user_data = r.user_data;
    s.len = r.len;
    s.op = r.op;
    prepared_.push_back({i, r});
    ++inflight_;
    return true;
  }

  int submit() override {
    int n = 0;
    for (const auto& [i, r] : prepared_) {
      Slot& s = slots_[i];
      int rc = rbd_aio_create_completion(&s, &RbdQueue::on_complete, &s.completion);
      if (rc == 0) {
        rbd_image_t img = images_[r.device];
        char* buf = static_cast<char*>(r.buf);
        rc = r.op == IoOp::read ? rbd_aio_read(img, r.offset, r.len, buf, s.completion)
                                : rbd_aio_write(img, r.offset, r.len, buf, s.completion);
        if (rc < 0) {
          rbd_aio_release(s.completion);
          s.completion = nullptr;
        }
      }
      if (rc < 0) {  // never reached librbd: complete it here with the error
        s.res = rc;
        std::lock_guard<std::mutex> g(mu_);
        done_.push_back(i);
      }
      ++n;
    }
    prepared_.clear();
    return n;
  }

  int reap(IoCompletion* out, int max, int wait_min) override {
    {
      std::unique_lock<std::mutex> g(mu_);
      size_t want = static_cast<size_t>(std::min(wait_min, max));
      if (done_.size() < want) {
        sleeping_ = true;
        cv_.wait(g, [&] { return done_.size() >= want; });
        sleeping_ = false;
      }
      size_t take = std::min(done_.size(), static_cast<size_t>(max));
      taken_.assign(done_.begin(), done_.begin() + static_cast<long>(take));
      done_.erase(done_.begin(), done_.begin() + static_cast<long>(take));
    }
    int n = 0;
    for (uint32_t i : taken_) {
      Slot& s = slots_[i];
      if (s.completion) {
        rbd_aio_release(s.completion);
        s.completion = nullptr;
      }
      out[n++] = {s.user_data, static_cast<int32_t>(result_of(s.res, s.op, s.len))};
      free_.push_back(i);
      --inflight_;
    }
    return n;
  }

  uint32_t depth() const override { return depth_; }
  uint32_t inflight() const override { return inflight_; }

 private:
  static void on_complete(rbd_completion_t c, void* arg) {
    Slot* s = static_cast<Slot*>(arg);
    s->res = rbd_aio_get_return_value(c);
    RbdQueue* q = s->queue;
    std::lock_guard<std::mutex> g(q->mu_);
    q->done_.push_back(s->index);
    if (q->sleeping_) q->cv_.notify_one();
  }

  const std::vector<rbd_image_t>& images_;
  uint32_t depth_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;                          // owner thread only
  std::vector<std::pair<uint32_t, IoRequest>> prepared_;  // owner thread only
  std::vector<uint32_t> taken_;                         // owner thread only
  uint32_t inflight_ = 0;                               // owner thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint32_t> done_;  // guarded by mu_
  bool sleeping_ = false;       // guarded by mu_
};

class RbdBackend final : public IoBackend {
 public:
  RbdBackend(const std::vector<std::string>& paths, const BackendOptions& o) : opts_(o.rbd), writable_(o.writable) {
    GPUIO_EXPECT(!paths.empty(), "at least one volume is needed, got an empty list");
    GPUIO_EXPECT(paths.size() <= limits::devices_max, "too many volumes: " + std::to_string(paths.size()));
    std::vector<rbd::Spec> specs;
    for (const std::string& p : paths) specs.push_back(rbd::Spec::parse(p));  // bad names before connecting
    try {
      client_ = std::make_unique<rbd::RadosClient>(o.rbd);
    } catch (const IoError& e) {  // name the volume too: "volume 'rbd:p/v': cannot connect ... as client.x"
      throw IoError(e.error_code(), "volume '" + specs[0].str() + "': " + e.what());
    }
    try {
      for (const rbd::Spec& s : specs) open(s);
    } catch (...) {
      close_all();
      throw;
    }
  }
  ~RbdBackend() override { close_all(); }

  const char* name() const override { return "rbd"; }
  bool fast_completions() const override { return false; }
  size_t device_count() const override { return infos_.size(); }
  const DeviceInfo& device(size_t i) const override { return infos_[i]; }
  std::unique_ptr<IoQueue> create_queue(uint32_t depth, const std::vector<FixedBuffer>&) override {
    return std::make_unique<RbdQueue>(images_, depth);
  }
  bool direct_submission() const override { return true; }
  int submit_direct(DirectRequest* r) override {
    rbd_completion_t c = nullptr;
    int rc = rbd_aio_create_completion(r, &on_direct_complete, &c);
    if (rc < 0) return rc;
    char* buf = static_cast<char*>(r->buf);
    rbd_image_t img = images_[r->device];
    rc = r->op == IoOp::read ? rbd_aio_read(img, r->offset, r->len, buf, c) : rbd_aio_write(img, r->offset, r->len, buf, c);
    if (rc < 0) rbd_aio_release(c);
    return rc < 0 ? rc : 0;
  }
  void sync() override {
    for (size_t i = 0; i < images_.size(); ++i) {
      int rc = rbd_flush(images_[i]);
      if (rc < 0) rbd::fail(rc, "flush failed on", client_->who(specs_[i]));
    }
  }
  std::string describe() const override {
    std::string s = "rbd " + client_->name() + " client-id=" + std::to_string(client_->instance_id()) +
                    " aio=callback zero-copy=on cache=off lock=";
    s += !writable_ ? "none(read-only)" : (opts_.exclusive ? "exclusive" : "none");
    return s;
  }

 private:
  void open(const rbd::Spec& s) {
    const std::string who = client_->who(s);
    rados_ioctx_t io = client_->open_ioctx(s);
    ioctxs_.push_back(io);
    rbd_image_t img = rbd::open_image(io, s, !writable_, who);
    images_.push_back(img);
    specs_.push_back(s);
    if (writable_ && opts_.exclusive) lock(img, s, who);
    uint64_t bytes = 0;
    int rc = rbd_get_size(img, &bytes);
    if (rc < 0) rbd::fail(rc, "cannot read the size of", who);
    DeviceInfo d;
    d.path = s.str();
    d.bytes = bytes;
    d.logical_block_bytes = 512;
    d.direct = false;
    d.zero_copy = true;
    infos_.push_back(d);
  }

  // The single-writer lease: RBD's exclusive lock, taken explicitly so librbd never hands it over to
  // another client on request. While another client owns it: wait up to lock_wait_ms for it to go, then
  // EBUSY naming the owner. The owners are checked first because rbd_lock_acquire itself would wait for an
  // unresponsive owner's watch to time out (18-30 s measured) and then break its lock silently.
  // break_lock=true breaks the owner's lock at once, which blocklists that client: its writes still in
  // flight or issued later are refused by the OSDs (fencing).
  void lock(rbd_image_t img, const rbd::Spec& s, const std::string& who) {
    uint64_t features = 0;
    rbd_get_features(img, &features);
    if (!(features & RBD_FEATURE_EXCLUSIVE_LOCK)) {
      rbd::fail(EINVAL, "cannot take the single-writer lock: the exclusive-lock feature is off on", who);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.lock_wait_ms);
    for (;;) {
      std::string owner = owners(img);
      int rc = -EBUSY;
      if (!owner.empty() && opts_.break_lock) {
        break_owners(img, who);
        owner.clear();
      }
      if (owner.empty()) {
        rc = rbd_lock_acquire(img, RBD_LOCK_MODE_EXCLUSIVE);
        if (rc == 0) return;
        if (rc != -EROFS && rc != -EBUSY && rc != -EAGAIN) rbd::fail(rc, "cannot take the single-writer lock of", who);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        if (owner.empty()) owner = owners(img);
        throw IoError(EBUSY, "volume '" + s.str() + "' is locked by another writer (" +
                                 (owner.empty() ? "owner unknown" : owner) + "); " + client_->name() + " waited " +
                                 std::to_string(opts_.lock_wait_ms) +
                                 " ms: open it read-only, wait longer (lock_wait_s / rbd=dict(lock_wait_ms=...)) "
                                 "or, if that writer is dead, take over with break_lock=True (it gets fenced)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  std::string owners(rbd_image_t img) {
    rbd_lock_mode_t mode;
    size_t n = 8;
    std::vector<char*> o(n);
    if (rbd_lock_get_owners(img, &mode, o.data(), &n) < 0 || n == 0) return "";
    std::string s;
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::string(o[i]);
    rbd_lock_get_owners_cleanup(o.data(), n);
    return s;
  }

  void break_owners(rbd_image_t img, const std::string& who) {
    rbd_lock_mode_t mode;
    size_t n = 8;
    std::vector<char*> o(n);
    int rc = rbd_lock_get_owners(img, &mode, o.data(), &n);
    if (rc == -ENOENT || (rc == 0 && n == 0)) return;
    if (rc < 0) rbd::fail(rc, "cannot read the lock owners of", who);
    for (size_t i = 0; i < n && rc >= 0; ++i) rc = rbd_lock_break(img, RBD_LOCK_MODE_EXCLUSIVE, o[i]);
    rbd_lock_get_owners_cleanup(o.data(), n);
    if (rc < 0 && rc != -ENOENT) rbd::fail(rc, "cannot break the lock of", who);
  }

  void close_all() {
    for (rbd_image_t img : images_) rbd_close(img);  // releases the lock
    for (rados_ioctx_t io : ioctxs_) rados_ioctx_destroy(io);
    images_.clear();
    ioctxs_.clear();
  }

  RbdOptions opts_;
  bool writable_;
  std::unique_ptr<rbd::RadosClient> client_;
  std::vector<rados_ioctx_t> ioctxs_;
  std::vector<rbd_image_t> images_;
  std::vector<rbd::Spec> specs_;
  std::vector<DeviceInfo> infos_;
};

}  // namespace
}  // namespace gpuio::detail

// libgpuio_rbd.so.1's entry point for detail::make_rbd_backend (io/rbd_loader.cpp).
extern "C" __attribute__((visibility("default"))) gpuio::IoBackend* gpuio_rbd_make_backend(
    const std::vector<std::string>& paths, const gpuio::BackendOptions& o) {
  return new gpuio::detail::RbdBackend(paths, o);
}

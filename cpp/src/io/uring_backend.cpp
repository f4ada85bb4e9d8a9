// io_uring backend: O_DIRECT, registered files (the devices given at creation; devices opened later are named by
// their file descriptor, since a registered file stays referenced by every ring until each owner thread updates it),
// fixed (registered) staging buffers, batched submission, optional SQPOLL and IOPOLL. IOPOLL is enabled only after a probe read shows the device supports it;
// describe() says what was requested and what runs.
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "gpuio/status.hpp"
#include "io/backends.hpp"
#include "io/devices.hpp"

namespace gpuio::detail {
namespace {

class UringQueue final : public IoQueue {
 public:
  UringQueue(const DeviceSet& devs, uint32_t depth, const std::vector<FixedBuffer>& fixed, bool sqpoll,
             bool iopoll)
      : devs_(devs), depth_(depth) {
    // The owner thread is the only one that ever enters this ring (IoQueue contract), so the kernel may skip
    // cross-thread locking (SINGLE_ISSUER) and run completion work when the owner asks for events instead of
    // interrupting it for each one (DEFER_TASKRUN). Kernels before 6.1 reject the flags: the ring is made without.
    // Not with SQPOLL (the kernel thread issues) or IOPOLL. GPUIO_URING_TASKRUN=default turns it off.
    const char* env = std::getenv("GPUIO_URING_TASKRUN");
    unsigned defer = (sqpoll || iopoll || (env && std::string(env) == "default"))
                         ? 0u
                         : unsigned{IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN};
    int rc = -EINVAL;
    for (unsigned extra : {defer, 0u}) {
      io_uring_params p{};
      if (sqpoll) {
        p.flags |= IORING_SETUP_SQPOLL;
        p.sq_thread_idle = 2000;
      }
      if (iopoll) p.flags |= IORING_SETUP_IOPOLL;
      p.flags |= IORING_SETUP_CQSIZE | extra;
      p.cq_entries = depth * 2;
      rc = io_uring_queue_init_params(depth, &ring_, &p);
      defer_ = extra != 0 && rc == 0;
      if (rc != -EINVAL || extra == 0) break;
    }
    if (rc < 0) throw IoError(-rc, "io_uring_queue_init(depth=" + std::to_string(depth) + ") failed: " + errno_name(-rc));
    const std::vector<int> fds = devs.initial_fds();
    if (!fds.empty()) {
      rc = io_uring_register_files(&ring_, fds.data(), static_cast<unsigned>(fds.size()));
      if (rc < 0) {
        io_uring_queue_exit(&ring_);
        throw IoError(-rc, "io_uring_register_files failed: " + errno_name(-rc));
      }
      registered_ = static_cast<uint32_t>(fds.size());
    }
    if (!fixed.empty()) {
      std::vector<iovec> iov;
      for (const FixedBuffer& f : fixed) iov.push_back({f.base, f.bytes});
      rc = io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size()));
      // Registration can fail under RLIMIT_MEMLOCK; plain reads still work, so fall back and say so.
      fixed_ok_ = rc == 0;
    }
  }
  ~UringQueue() override { io_uring_queue_exit(&ring_); }

  bool prepare(const IoRequest& r) override {
    if (inflight_ >= depth_) return false;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) return false;
    bool fixed = fixed_ok_ && r.buf_index >= 0;
    const bool registered = r.device < registered_;
    const int file = registered ? int{r.device} : devs_.fd(r.device);
    if (r.op == IoOp::read) {
      if (fixed)
        io_uring_prep_read_fixed(sqe, file, r.buf, r.len, r.offset, r.buf_index);
      else
        io_uring_prep_read(sqe, file, r.buf, r.len, r.offset);
    } else {
      if (fixed)
        io_uring_prep_write_fixed(sqe, file, r.buf, r.len, r.offset, r.buf_index);
      else
        io_uring_prep_write(sqe, file, r.buf, r.len, r.offset);
    }
    if (registered) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, r.user_data);
    ++inflight_;
    ++prepared_;
    return true;
  }

  int submit() override {
    if (prepared_ == 0) return 0;
    int rc = io_uring_submit(&ring_);
    if (rc >= 0) prepared_ = 0;
    return rc;
  }

  int reap(IoCompletion* out, int max, int wait_min) override {
    int n = 0;
    bool asked = events_fresh_;  // DEFER_TASKRUN: completions reach the CQ only when this thread asks for events
    events_fresh_ = false;
    while (n < max) {
      io_uring_cqe* cqe = nullptr;
      int rc;
      if (n < wait_min) {
        rc = io_uring_wait_cqe(&ring_, &cqe);
        if (rc == -EINTR) continue;
      } else {
        rc = io_uring_peek_cqe(&ring_, &cqe);
        if (rc == -EAGAIN && defer_ && !asked && inflight_ > 0) {
          asked = true;
          io_uring_get_events(&ring_);
          continue;
        }
        if (rc == -EAGAIN) break;
      }
      if (rc < 0) return n > 0 ? n : rc;
      out[n].user_data = io_uring_cqe_get_data64(cqe);
      out[n].res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --inflight_;
      ++n;
    }
    return n;
  }

  // One io_uring_enter both submits and waits, where submit() followed by a blocking reap() took two.
  int submit_and_reap(IoCompletion* out, int max, int wait_min) override {
    if (prepared_ > 0 || wait_min > 0) {
      int rc = wait_min > 0 ? io_uring_submit_and_wait(&ring_, 1)
               : defer_     ? io_uring_submit_and_get_events(&ring_)
                            : io_uring_submit(&ring_);
      if (rc >= 0) {
        prepared_ = 0;
        events_fresh_ = defer_;
      } else if (rc != -EAGAIN && rc != -EBUSY && rc != -EINTR && rc != -ETIME) {
        return rc;
      }
    }
    return reap(out, max, 0);  // what is there now; a wait cut short (EINTR) just loops in the caller
  }

  uint32_t depth() const override { return depth_; }
  uint32_t inflight() const override { return inflight_; }
  bool fixed_buffers() const { return fixed_ok_; }
  bool defer_taskrun() const { return defer_; }

 private:
  io_uring ring_{};
  const DeviceSet& devs_;
  uint32_t registered_ = 0;  // devices [0, registered_) are the ring's registered files
  uint32_t depth_;
  uint32_t inflight_ = 0;
  uint32_t prepared_ = 0;
  bool fixed_ok_ = false;
  bool defer_ = false;         // SINGLE_ISSUER | DEFER_TASKRUN took
  bool events_fresh_ = false;  // the last enter already ran the deferred completion work
};

// One aligned read with IOPOLL on device 0: EOPNOTSUPP (or a setup error) means the device cannot poll.
bool iopoll_supported(const DeviceSet& devs) {
  if (devs.size() == 0 || !devs.info(0).direct || devs.info(0).bytes < 4096) return false;
  io_uring ring{};
  if (io_uring_queue_init(2, &ring, IORING_SETUP_IOPOLL) < 0) return false;
  void* buf = nullptr;
  bool ok = false;
  if (posix_memalign(&buf, 4096, 4096) == 0) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, devs.fd(0), buf, 4096, 0);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_submit(&ring) == 1 && io_uring_wait_cqe(&ring, &cqe) == 0) {
      ok = cqe->res >= 0;
      io_uring_cqe_seen(&ring, cqe);
    }
    std::free(buf);
  }
  io_uring_queue_exit(&ring);
  return ok;
}

class UringBackend final : public FdBackend {
 public:
  UringBackend(const std::vector<std::string>& paths, const BackendOptions& o)
      : FdBackend(paths, o), sqpoll_(o.sqpoll), iopoll_requested_(o.iopoll) {
    iopoll_ = iopoll_requested_ && iopoll_supported(devs_);
  }
  const char* name() const override { return "uring"; }
  std::unique_ptr<IoQueue> create_queue(uint32_t depth, const std::vector<FixedBuffer>& fixed) override {
    auto q = std::make_unique<UringQueue>(devs_, depth, fixed, sqpoll_, iopoll_);
    fixed_ok_ = q->fixed_buffers();
    defer_ = q->defer_taskrun();
    return q;
  }
  std::string describe() const override {
    std::string s = describe_devices();
    s += devs_.initial() == 0 ? " registered-files=off" : " registered-files=on";
    s += " fixed-buffers=";
    s += fixed_ok_ ? "on" : "off";
    s += " sqpoll=";
    s += sqpoll_ ? "on" : "off";
    s += " iopoll=";
    s += iopoll_ ? "on" : (iopoll_requested_ ? "unsupported" : "off");
    s += defer_ ? " taskrun=single-issuer+defer" : " taskrun=default";
    return s;
  }

 private:
  bool sqpoll_;
  bool iopoll_requested_;
  bool iopoll_ = false;
  bool fixed_ok_ = false;
  bool defer_ = false;
};

}  // namespace

std::unique_ptr<IoBackend> make_uring_backend(const std::vector<std::string>& paths, const BackendOptions& o) {
  return std::make_unique<UringBackend>(paths, o);
}

}  // namespace gpuio::detail

// posix backend: a pool of threads doing blocking pread/pwrite, the CPU-managed baseline the CAM paper
// compares against. Each queue owns its threads, so queues on different workers share nothing.
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "gpuio/status.hpp"
#include "io/backends.hpp"
#include "io/devices.hpp"

namespace gpuio::detail {
namespace {

class PosixQueue final : public IoQueue {
 public:
  PosixQueue(const DeviceSet& devs, uint32_t depth, uint32_t threads) : devs_(devs), depth_(depth) {
    for (uint32_t i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        pthread_setname_np(pthread_self(), "gpuio-posix");
        run();
      });
    }
  }
  ~PosixQueue() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  bool prepare(const IoRequest& r) override {
    if (inflight_ >= depth_) return false;
    prepared_.push_back(r);
    ++inflight_;
    return true;
  }

  int submit() override {
    int n = static_cast<int>(prepared_.size());
    if (n == 0) return 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (const IoRequest& r : prepared_) work_.push_back(r);
    }
    prepared_.clear();
    if (n == 1)
      work_cv_.notify_one();
    else
      work_cv_.notify_all();
    return n;
  }

  int reap(IoCompletion* out, int max, int wait_min) override {
    std::unique_lock<std::mutex> g(mu_);
    if (wait_min > 0) done_cv_.wait(g, [&] { return done_.size() >= static_cast<size_t>(std::min(wait_min, max)); });
    int n = 0;
    while (n < max && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    inflight_ -= static_cast<uint32_t>(n);
    return n;
  }

  uint32_t depth() const override { return depth_; }
  uint32_t inflight() const override { return inflight_; }

 private:
  void run() {
    std::unique_lock<std::mutex> g(mu_);
    for (;;) {
      work_cv_.wait(g, [&] { return stop_ || !work_.empty(); });
      if (stop_ && work_.empty()) return;
      IoRequest r = work_.front();
      work_.pop_front();
      g.unlock();
      int fd = devs_.fd(r.device);
      ssize_t res;
      do {
        res = r.op == IoOp::read ? ::pread(fd, r.buf, r.len, static_cast<off_t>(r.offset))
                                 : ::pwrite(fd, r.buf, r.len, static_cast<off_t>(r.offset));
      } while (res < 0 && errno == EINTR);
      IoCompletion c{r.user_data, res < 0 ? -errno : static_cast<int32_t>(res)};
      g.lock();
      done_.push_back(c);
      done_cv_.notify_one();
    }
  }

  const DeviceSet& devs_;
  uint32_t depth_;
  uint32_t inflight_ = 0;  // owner thread only
  std::vector<IoRequest> prepared_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<IoRequest> work_;
  std::deque<IoCompletion> done_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class PosixBackend final : public FdBackend {
 public:
  PosixBackend(const std::vector<std::string>& paths, const BackendOptions& o)
      : FdBackend(paths, o), threads_(o.posix_threads) {
    GPUIO_EXPECT(threads_ >= 1, "posix_threads must be >= 1, got 0");
  }
  const char* name() const override { return "posix"; }
  std::unique_ptr<IoQueue> create_queue(uint32_t depth, const std::vector<FixedBuffer>&) override {
    return std::make_unique<PosixQueue>(devs_, depth, std::min(threads_, depth));
  }
  std::string describe() const override {
    return describe_devices() + " threads-per-queue=" + std::to_string(threads_);
  }

 private:
  uint32_t threads_;
};

}  // namespace

std::unique_ptr<IoBackend> make_posix_backend(const std::vector<std::string>& paths, const BackendOptions& o) {
  return std::make_unique<PosixBackend>(paths, o);
}

}  // namespace gpuio::detail

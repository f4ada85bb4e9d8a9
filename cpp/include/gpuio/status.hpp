// Errors: user mistakes vs failures of the system vs bugs.
// - Bad arguments throw std::invalid_argument (ValueError in Python) or std::out_of_range (IndexError).
// - Failed I/O throws gpuio::IoError: it carries errno and names the first failing block, device and offset
//   (OSError in Python, errno preserved).
// - Broken invariants are GPUIO_ASSERT: they stay on in every build (tests and simulator rely on them).
#pragma once
#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gpuio {

class IoError : public std::runtime_error {
 public:
  IoError(int err, const std::string& what) : std::runtime_error(what), errno_(err) {}
  int error_code() const noexcept { return errno_; }

 private:
  int errno_;
};

namespace detail {
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const char* msg);
std::string errno_name(int err);  // "EIO (Input/output error)"
}  // namespace detail

}  // namespace gpuio

#define GPUIO_ASSERT(cond, msg)                                                    \
  do {                                                                             \
    if (!(cond)) ::gpuio::detail::assert_fail(#cond, __FILE__, __LINE__, (msg));   \
  } while (0)

// User-facing precondition: throws std::invalid_argument with the given message.
#define GPUIO_EXPECT(cond, msg)                                \
  do {                                                         \
    if (!(cond)) throw std::invalid_argument(std::string(msg)); \
  } while (0)

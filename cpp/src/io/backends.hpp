// Constructors of the concrete backends; make_backend() (io/backend_factory.cpp) picks one by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "gpuio/io.hpp"

namespace gpuio::detail {

std::unique_ptr<IoBackend> make_uring_backend(const std::vector<std::string>& paths, const BackendOptions& o);
std::unique_ptr<IoBackend> make_posix_backend(const std::vector<std::string>& paths, const BackendOptions& o);
std::unique_ptr<IoBackend> make_sim_backend(const std::vector<std::string>& paths, const BackendOptions& o);
std::unique_ptr<IoBackend> make_rbd_backend(const std::vector<std::string>& paths, const BackendOptions& o);
std::unique_ptr<IoBackend> make_fault_backend(std::unique_ptr<IoBackend> inner, const FaultOptions& o);

}  // namespace gpuio::detail

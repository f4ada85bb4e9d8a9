// gpuio._core.EngineCore: the Python object that owns a C++ Engine. Bindings that keep a reference to the
// engine (GpuRuntime, the array caches) take this object with nb::keep_alive<1, 2>, so the engine (and its
// Python owner) lives at least as long as they do; no binding takes an engine as an integer address.
#pragma once
#include <memory>

#include "gpuio/engine.hpp"

namespace gpuio::bindings {

struct EngineHolder {
  std::unique_ptr<Engine> engine;
  Engine* operator->() const { return engine.get(); }
  Engine& operator*() const { return *engine; }
};

}  // namespace gpuio::bindings

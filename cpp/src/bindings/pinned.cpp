// gpuio._core bindings of the process's one pinned pool (gpuio/pinned_pool.hpp): pinned_take hands Python a block
// (PinnedBlock: its bytes as a NumPy array that keeps the block alive, so torch.from_numpy views it with an owner);
// pinned_pool_stats reports every page-locked byte gpuio holds, pinned_pool_release lets go of the free blocks.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "bindings/registry.hpp"
#include "engine/pinned_pool.hpp"
#include "gpuio/pinned_pool.hpp"

namespace nb = nanobind;

namespace {

using gpuio::detail::PinnedBlock;
using gpuio::detail::PinnedReuse;

// The pool counts uses by name with static storage: Python's names are kept here (a handful, never freed).
const char* intern(const std::string& use) {
  static std::mutex mu;
  static auto* names = new std::set<std::string>;
  std::lock_guard<std::mutex> g(mu);
  return names->insert(use).first->c_str();
}

// A block held by Python. give() hands it back before the object goes (pooled: to the free list for the next take
// of its size; owned: unregistered and unmapped); otherwise that happens when the object and every array viewing
// it are gone.
struct PyBlock {
  std::unique_ptr<PinnedBlock> block;
  size_t nbytes = 0;       // as asked (the block is rounded up to 2 MiB)
  uintptr_t address = 0;   // kept after give(), for lookups by address
  bool pooled = true;

  PinnedBlock& live(const char* what) const {
    if (!block) throw std::invalid_argument(std::string("PinnedBlock.") + what + " after give()");
    return *block;
  }
};

nb::dict use_dict(const gpuio::PinnedUseStats& u) {
  nb::dict d;
  d["made_bytes"] = u.made_bytes;
  d["registered_bytes"] = u.registered_bytes;
  d["free_bytes"] = u.free_bytes;
  return d;
}

}  // namespace

GPUIO_BIND(pinned, 22) {
  nb::class_<PyBlock>(m, "PinnedBlock", nb::is_weak_referenceable(),
                      "A block of the process's one pinned pool (pinned_take).")
      .def_ro("nbytes", &PyBlock::nbytes, "bytes asked for (array() has this many)")
      .def_ro("address", &PyBlock::address, "address of the first byte")
      .def_ro("pooled", &PyBlock::pooled)
      .def_prop_ro("capacity", [](const PyBlock& b) { return b.live("capacity").bytes(); },
                   "bytes of the block (nbytes rounded up to 2 MiB)")
      .def_prop_ro("registered", [](const PyBlock& b) { return b.block && b.block->registered(); },
                   "page-locked with CUDA (portable and mapped)")
      .def_prop_ro("alive", [](const PyBlock& b) { return static_cast<bool>(b.block); }, "not given back yet")
      .def(
          "array",
          [](nb::handle self) {
            PyBlock& b = nb::cast<PyBlock&>(self);
            size_t shape[1] = {b.nbytes};
            // owner = self: every array (and torch tensor made from it) keeps the block alive
            return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(b.live("array").data(), 1, shape, self);
          },
          "The block's first nbytes as a writable uint8 NumPy array that keeps the block alive.")
      .def(
          "register",
          [](PyBlock& b) {
            PinnedBlock& p = b.live("register");
            nb::gil_scoped_release nogil;
            return p.register_now();
          },
          "Page-locks the block with CUDA in place (if it is not); False where CUDA refuses or is not built.")
      .def(
          "unregister",
          [](PyBlock& b) {
            PinnedBlock& p = b.live("unregister");
            nb::gil_scoped_release nogil;
            p.unregister_now();
          },
          "Undoes register().")
      .def(
          "give",
          [](PyBlock& b) {
            std::unique_ptr<PinnedBlock> p = std::move(b.block);
            nb::gil_scoped_release nogil;
            p.reset();
          },
          "Hands the block back now (pooled: for the next take of its size; owned: unmapped). Arrays still "
          "viewing it must not be used any more. A second give() does nothing.");

  m.def(
      "pinned_take",
      [](size_t nbytes, bool registered, bool pooled, const std::string& use, bool touch) {
        if (nbytes == 0) throw std::invalid_argument("pinned_take of 0 bytes");
        const char* name = intern(use);
        auto b = std::make_unique<PyBlock>();
        {
          nb::gil_scoped_release nogil;  // mapping, faulting in and registering large blocks takes a while
          b->block = PinnedBlock::take(nbytes, registered, pooled ? PinnedReuse::pooled : PinnedReuse::owned, name,
                                       touch ? SIZE_MAX : 0);
        }
        b->nbytes = nbytes;
        b->address = reinterpret_cast<uintptr_t>(b->block->data());
        b->pooled = pooled;
        return b.release();
      },
      nb::arg("nbytes"), nb::arg("registered") = true, nb::arg("pooled") = true, nb::arg("use") = "python",
      nb::arg("touch") = true, nb::rv_policy::take_ownership,
      "A block of at least nbytes (2 MiB pages, 2 MiB aligned) from the process's one pinned pool, counted under "
      "`use`: registered with CUDA where asked and possible (.registered says); pooled: back to the pool's free "
      "list when given back (else unmapped); touch: faulted in now (pooled and registered blocks always are).");
  m.def("pinned_pool_stats", [] {
    gpuio::PinnedPoolStats s = gpuio::pinned_pool_stats();
    nb::dict d, uses;
    d["pools"] = s.pools;
    d["made_bytes"] = s.made_bytes;
    d["registered_bytes"] = s.registered_bytes;
    d["free_bytes"] = s.free_bytes;
    d["owned_bytes"] = s.owned_bytes;
    d["owned_registered_bytes"] = s.owned_registered_bytes;
    d["fixed_bytes"] = s.fixed_bytes;
    d["page_locked_bytes"] = s.page_locked_bytes;
    for (const auto& [name, u] : s.uses) uses[name.c_str()] = use_dict(u);
    d["uses"] = uses;
    return d;
  }, "The process's one pinned pool: pooled blocks (made, registered, free bytes), owned blocks, the GPU layer's "
     "fixed page-locked allocations, page_locked_bytes (all page-locked bytes together) and the same by use.");
  m.def("pinned_pool_release", [] { return gpuio::pinned_pool_release(); }, nb::call_guard<nb::gil_scoped_release>(),
        "Unmaps (and unregisters) the pool's free blocks; returns their bytes.");
  m.def("pinned_pool_free_blocks", [] {
    nb::list out;
    for (const auto& [address, bytes] : gpuio::detail::pinned_pool_free_blocks()) out.append(nb::make_tuple(address, bytes));
    return out;
  }, "(address, bytes) of each free pooled block: for diagnostics (huge-page checks), not for a load's path.");
}

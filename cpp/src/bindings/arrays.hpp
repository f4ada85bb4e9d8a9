// Arrays from Python for the bindings: nanobind imports them (DLPack for NumPy, PyTorch and any other DLPack
// producer; the buffer protocol for bytes, bytearray, memoryview and array.array) and checks them against
// the nb::ndarray types below, without converting anything (convert=false: a read must land in the
// caller's memory, never in a copy, and converting CUDA ids would launch work on a stream behind the
// caller's back). When that check fails, the same array is imported once more without constraints to say
// in one line what was wrong, naming the argument: TypeError for a wrong dtype or a non-array, ValueError
// for shape, strides, device, read-only memory or size. The returned ndarray owns a reference to the Python
// object for as long as it lives; requests that outlive the call keep their arrays alive (keep_alive, or the
// Python handle).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gpuio::bindings {

namespace nb = nanobind;

using IdArray = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig>;  // block ids: int64, 1-D, contiguous
using RoArray = nb::ndarray<nb::ro, nb::c_contig>;                      // bytes to write: any dtype
using RwArray = nb::ndarray<nb::c_contig>;                              // bytes to read into: writable
using AnyArray = nb::ndarray<nb::ro>;                                   // for the diagnosis only

enum class Mem { host, cuda, either };

// Host memory: plain CPU or pinned (cudaHostAlloc) memory; CUDA memory: device or managed allocations.
inline bool is_host(int device_type) {
  return device_type == nb::device::cpu::value || device_type == nb::device::cuda_host::value;
}
inline bool is_cuda(int device_type) {
  return device_type == nb::device::cuda::value || device_type == nb::device::cuda_managed::value;
}

inline std::string dtype_name(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const char* kind = "dtype";
  switch (static_cast<C>(t.code)) {
    case C::Int: kind = "int"; break;
    case C::UInt: kind = "uint"; break;
    case C::Float: kind = "float"; break;
    case C::Bfloat: kind = "bfloat"; break;
    case C::Complex: kind = "complex"; break;
    case C::Bool: return "bool";
    default: return "dtype code " + std::to_string(t.code) + " of " + std::to_string(t.bits) + " bits";
  }
  return kind + std::to_string(t.bits);
}

template <typename A>
std::string tuple_text(const A& a, bool strides) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) {
    if (i) s += ", ";
    s += strides ? std::to_string(a.stride(i)) : std::to_string(a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// str(x) (PyObject_Str; a NumPy dtype is no str, so no checked nb::str conversion).
inline std::string text(nb::handle x) {
  nb::object s = nb::steal(PyObject_Str(x.ptr()));
  if (!s.is_valid()) throw nb::python_error();
  return nb::cast<std::string>(s);
}

inline std::string class_name(nb::handle x) { return text(x.type().attr("__name__")); }

inline bool c_contiguous(const AnyArray& a) {
  int64_t want = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != want) return a.size() <= 1;
    want *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

// Throws the one-line reason h was refused by the typed import (called only after it failed).
[[noreturn]] inline void refuse(nb::handle h, const char* name, bool ids, bool writable) {
  std::string n = name;
  AnyArray a;
  if (!nb::try_cast(h, a, false)) {
    std::string type = class_name(h);
    if (nb::hasattr(h, "dtype")) {  // an array whose data cannot be exported (NumPy object arrays, meta tensors)
      std::string what = type + ", dtype " + text(h.attr("dtype"));
      if (nb::hasattr(h, "device")) what += ", device " + text(h.attr("device"));
      throw nb::type_error((n + " (" + what + ") exports neither DLPack nor a buffer: gpuio moves plain numbers in "
                            "host or CUDA memory")
                               .c_str());
    }
    throw nb::type_error(
        (n + " must be a NumPy array, a tensor or a buffer (bytes, bytearray, memoryview), got " + type).c_str());
  }
  if (ids && !(a.dtype() == nb::dtype<int64_t>()))
    throw nb::type_error((n + " must be int64, got " + dtype_name(a.dtype())).c_str());
  if (ids && a.ndim() != 1) throw std::invalid_argument(n + " must be 1-D, got shape " + tuple_text(a, false));
  if (!c_contiguous(a))
    throw std::invalid_argument(n + " must be contiguous, got shape " + tuple_text(a, false) + " with strides " +
                                tuple_text(a, true) + " (in elements)");
  nb::ndarray<> w;
  if (writable && !nb::try_cast(h, w, false))
    throw std::invalid_argument(n + " is read-only (" + class_name(h) + "); a read needs a writable buffer");
  throw nb::type_error((n + " was refused as an array (dtype " + dtype_name(a.dtype()) + ", shape " +
                        tuple_text(a, false) + ")")
                           .c_str());
}

inline void check_memory(int device_type, int device_id, const char* name, Mem mem) {
  bool host = is_host(device_type), cuda = is_cuda(device_type);
  if ((mem == Mem::host && host) || (mem == Mem::cuda && cuda) || (mem == Mem::either && (host || cuda))) return;
  std::string where = host ? "host memory"
                      : cuda ? "CUDA memory (cuda:" + std::to_string(device_id) + ")"
                             : "memory of DLPack device type " + std::to_string(device_type);
  const char* want = mem == Mem::host ? "host memory" : mem == Mem::cuda ? "CUDA memory" : "host or CUDA memory";
  throw std::invalid_argument(std::string(name) + " is in " + where + ", expected " + want);
}

// Block ids: int64, 1-D, contiguous, in `mem`.
struct Ids {
  IdArray array;
  const int64_t* data() const { return array.data(); }
  size_t size() const { return array.shape(0); }
  bool cuda() const { return is_cuda(array.device_type()); }
};

inline Ids ids_arg(nb::handle h, const char* name, Mem mem) {
  Ids r;
  if (!nb::try_cast(h, r.array, false)) refuse(h, name, true, false);
  check_memory(r.array.device_type(), r.array.device_id(), name, mem);
  return r;
}

// Bytes to read into (writable) or to write from (read-only memory accepted): any dtype, any shape,
// contiguous, in `mem`, of exactly `nbytes` when nbytes_of names what the count is.
struct Data {
  RwArray rw;
  RoArray ro;
  void* ptr = nullptr;
  size_t nbytes = 0;
  int device_type = 0, device_id = 0;
  bool cuda() const { return is_cuda(device_type); }
};

inline Data data_arg(nb::handle h, const char* name, bool writable, Mem mem) {
  Data r;
  if (writable) {
    if (!nb::try_cast(h, r.rw, false)) refuse(h, name, false, true);
    r.ptr = r.rw.data();
    r.nbytes = r.rw.nbytes();
    r.device_type = r.rw.device_type();
    r.device_id = r.rw.device_id();
  } else {
    if (!nb::try_cast(h, r.ro, false)) refuse(h, name, false, false);
    r.ptr = const_cast<void*>(r.ro.data());
    r.nbytes = r.ro.nbytes();
    r.device_type = r.ro.device_type();
    r.device_id = r.ro.device_id();
  }
  check_memory(r.device_type, r.device_id, name, mem);
  return r;
}

// ValueError naming the argument when it does not hold exactly `want` bytes (`what` says why that many).
inline void check_nbytes(const Data& d, const char* name, size_t want, const char* what) {
  if (d.nbytes != want)
    throw std::invalid_argument(std::string(name) + " holds " + std::to_string(d.nbytes) + " bytes, expected " +
                                std::to_string(want) + " (" + what + ")");
}

}  // namespace gpuio::bindings

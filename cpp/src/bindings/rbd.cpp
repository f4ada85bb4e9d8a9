// gpuio._core.RbdClient: the Ceph volume operations beside the data path (python/gpuio/volumes/), on the
// same librados/librbd the rbd backend uses, so the product needs no python3-rados. Both live in
// libgpuio_rbd.so.1, loaded when the first client or rbd engine is made (io/rbd.hpp): rbd_built says whether
// this build has it, rbd_unavailable() why it cannot load here ("" when it can). Volume names parse without
// it. Calls release the GIL (they talk to the cluster).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings/registry.hpp"
#include "gpuio/io.hpp"
#include "io/rbd.hpp"

namespace nb = nanobind;
using namespace gpuio;

GPUIO_BIND(rbd, 30) {
  m.attr("rbd_built") = rbd_built();
  m.def("rbd_unavailable", &rbd::unavailable, nb::call_guard<nb::gil_scoped_release>(),
        "Why volumes cannot be used in this process (the rbd backend's library or Ceph's missing), or ''.");
  using rbd::Client;
  using rbd::Spec;
  using release = nb::call_guard<nb::gil_scoped_release>;
  nb::class_<Client>(m, "RbdClient")
      .def(nb::new_([](const std::string& conf, const std::string& user, const std::string& keyring,
                       uint32_t timeout_s) {
             RbdOptions o;
             o.conf = conf;
             o.user = user;
             o.keyring = keyring;
             o.timeout_s = timeout_s;
             nb::gil_scoped_release unlocked;
             return rbd::connect(o);
           }),
           nb::arg("conf") = "", nb::arg("user") = "", nb::arg("keyring") = "", nb::arg("timeout_s") = 30)
      .def_prop_ro("name", &Client::name)
      .def_prop_ro("instance_id", &Client::instance_id)
      .def_prop_ro("address", &Client::address)
      .def("mon_command",
           [](const Client& c, const std::string& json) {
             rbd::MonReply r;
             {
               nb::gil_scoped_release unlocked;
               r = c.mon_command(json);
             }
             return std::make_tuple(r.rc, nb::bytes(r.out.data(), r.out.size()), r.status);
           })
      .def("create", [](const Client& c, const std::string& v, uint64_t bytes, uint64_t obj) {
             c.create(Spec::parse(v), bytes, obj);
           }, release())
      .def("resize", [](const Client& c, const std::string& v, uint64_t bytes) { c.resize(Spec::parse(v), bytes); },
           release())
      .def("remove", [](const Client& c, const std::string& v) { c.remove(Spec::parse(v)); }, release())
      .def("list", &Client::list, release())
      .def("create_namespace", &Client::create_namespace, release())
      .def("info",
           [](const Client& c, const std::string& v) {
             rbd::VolumeInfo i;
             {
               nb::gil_scoped_release unlocked;
               i = c.info(Spec::parse(v));
             }
             nb::dict d;
             d["bytes"] = i.bytes;
             d["object_bytes"] = i.object_bytes;
             d["object_prefix"] = i.object_prefix;
             d["features"] = i.features;
             return d;
           })
      .def("lock_owners", [](const Client& c, const std::string& v) { return c.lock_owners(Spec::parse(v)); },
           release())
      .def("break_locks", [](const Client& c, const std::string& v) { return c.break_locks(Spec::parse(v)); },
           release())
      .def_static("parse", [](const std::string& v) {
        Spec s = Spec::parse(v);
        return std::make_tuple(s.pool, s.ns, s.image);
      });
}

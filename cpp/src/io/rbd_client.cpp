#include "io/rbd_client.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "gpuio/status.hpp"

namespace gpuio::rbd {
namespace {

// --id/--user/-i, --name/-n, --conf/-c and --keyring/-k from CEPH_ARGS, the way the ceph tools read them.
struct EnvArgs {
  std::string user, conf, keyring;
};

EnvArgs env_args() {
  EnvArgs a;
  const char* env = std::getenv("CEPH_ARGS");
  if (!env) return a;
  std::istringstream in(env);
  std::vector<std::string> t;
  for (std::string w; in >> w;) t.push_back(w);
  for (size_t i = 0; i < t.size(); ++i) {
    std::string key = t[i], value;
    size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < t.size()) {
      value = t[i + 1];
    }
    bool used = eq == std::string::npos;
    if (key == "--id" || key == "--user" || key == "-i") {
      a.user = value;
    } else if (key == "--name" || key == "-n") {
      a.user = value.rfind("client.", 0) == 0 ? value.substr(7) : value;
    } else if (key == "--conf" || key == "-c") {
      a.conf = value;
    } else if (key == "--keyring" || key == "-k") {
      a.keyring = value;
    } else {
      used = false;
    }
    if (used) ++i;
  }
  return a;
}

std::string hint(int err) {
  if (err == EPERM || err == EACCES) return " (the client's cephx caps do not allow this; see `gpuio volume grant`)";
  if (err == ENOENT) return " (no such volume or pool)";
  if (err == ETIMEDOUT) return " (is the cluster up? `gpuio cluster up`, CEPH_CONF)";
  return "";
}

}  // namespace

void fail(int rc, const std::string& what, const std::string& who) {
  int err = rc < 0 ? -rc : rc;
  throw IoError(err, what + " " + who + ": " + detail::errno_name(err) + hint(err));
}

RadosClient::RadosClient(const RbdOptions& o) {
  EnvArgs env = env_args();
  std::string user = !o.user.empty() ? o.user : (!env.user.empty() ? env.user : "admin");
  if (user.rfind("client.", 0) == 0) user = user.substr(7);
  name_ = "client." + user;
  std::string conf = !o.conf.empty() ? o.conf : env.conf;
  std::string keyring = !o.keyring.empty() ? o.keyring : env.keyring;
  std::string who = "as " + name_ + (conf.empty() ? "" : " with conf '" + conf + "'");
  int rc = rados_create(&cluster_, user.c_str());
  if (rc < 0) fail(rc, "cannot create a RADOS client", who);
  auto set = [&](const char* key, const std::string& value) {
    int r = rados_conf_set(cluster_, key, value.c_str());
    if (r < 0) fail(r, std::string("cannot set '") + key + "'", who);
  };
  try {
    rc = rados_conf_read_file(cluster_, conf.empty() ? nullptr : conf.c_str());  // nullptr: CEPH_CONF, /etc/ceph
    if (rc < 0) fail(rc, "cannot read the Ceph configuration", who);
    rc = rados_conf_parse_env(cluster_, nullptr);  // CEPH_ARGS
    if (rc < 0) fail(rc, "cannot parse CEPH_ARGS", who);
    if (!keyring.empty()) set("keyring", keyring);
    // Acknowledged means on the OSDs: no client write-back cache between the engine and the replicas.
    set("rbd_cache", "false");
    set("client_mount_timeout", std::to_string(o.timeout_s));
    set("rados_mon_op_timeout", std::to_string(o.timeout_s));
    set("rados_osd_op_timeout", std::to_string(o.op_timeout_s));
    set("log_to_stderr", "false");
    set("err_to_stderr", "false");
    rc = rados_connect(cluster_);
    if (rc < 0) fail(rc, "cannot connect to the Ceph cluster", who);
  } catch (...) {
    rados_shutdown(cluster_);
    throw;
  }
}

RadosClient::~RadosClient() {
  if (cluster_) rados_shutdown(cluster_);
}

uint64_t RadosClient::instance_id() const { return rados_get_instance_id(cluster_); }

std::string RadosClient::address() const {
  char* addr = nullptr;
  if (rados_getaddrs(cluster_, &addr) < 0 || !addr) return "";
  std::string s = addr;
  std::free(addr);
  return s;
}

rados_ioctx_t RadosClient::open_ioctx(const Spec& s) const {
  rados_ioctx_t io = nullptr;
  int rc = rados_ioctx_create(cluster_, s.pool.c_str(), &io);
  if (rc < 0) fail(rc, "cannot open pool '" + s.pool + "' for", who(s));
  rados_ioctx_set_namespace(io, s.ns.c_str());
  return io;
}

MonReply RadosClient::mon_command(const std::string& json) const {
  const char* cmd[] = {json.c_str()};
  char *out = nullptr, *status = nullptr;
  size_t out_len = 0, status_len = 0;
  MonReply r;
  r.rc = rados_mon_command(cluster_, cmd, 1, "", 0, &out, &out_len, &status, &status_len);
  if (out) r.out.assign(out, out_len);
  if (status) r.status.assign(status, status_len);
  rados_buffer_free(out);
  rados_buffer_free(status);
  return r;
}

namespace {
// An ioctx + open image for one admin call, closed on every path.
struct Opened {
  rados_ioctx_t io = nullptr;
  rbd_image_t image = nullptr;
  ~Opened() {
    if (image) rbd_close(image);
    if (io) rados_ioctx_destroy(io);
  }
};
}  // namespace

rbd_image_t open_image(rados_ioctx_t io, const Spec& s, bool read_only, const std::string& who) {
  rbd_image_t image = nullptr;
  int rc = read_only ? rbd_open_read_only(io, s.image.c_str(), &image, nullptr)
                     : rbd_open(io, s.image.c_str(), &image, nullptr);
  if (rc < 0) fail(rc, read_only ? "cannot open for reading" : "cannot open for writing", who);
  return image;
}

void RadosClient::create(const Spec& s, uint64_t bytes, uint64_t object_bytes) const {
  GPUIO_EXPECT(object_bytes >= 4096 && (object_bytes & (object_bytes - 1)) == 0,
               "object_size=" + std::to_string(object_bytes) + " must be a power of two >= 4096");
  if (!s.ns.empty()) create_namespace(s.pool, s.ns);
  Opened o;
  o.io = open_ioctx(s);
  rbd_image_options_t opts;
  rbd_image_options_create(&opts);
  uint64_t order = 0;
  while ((1ull << order) < object_bytes) ++order;
  // layering + exclusive-lock: the lock is the single-writer lease (rbd_lock_acquire).
  uint64_t features = RBD_FEATURE_LAYERING | RBD_FEATURE_EXCLUSIVE_LOCK;
  rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_ORDER, order);
  rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_FEATURES, features);
  int rc = rbd_create4(o.io, s.image.c_str(), bytes, opts);
  rbd_image_options_destroy(opts);
  if (rc == -EEXIST) fail(rc, "cannot create (it exists)", who(s));
  if (rc < 0) fail(rc, "cannot create", who(s));
}

void RadosClient::resize(const Spec& s, uint64_t bytes) const {
  Opened o;
  o.io = open_ioctx(s);
  o.image = open_image(o.io, s, false, who(s));
  int rc = rbd_resize(o.image, bytes);
  if (rc < 0) fail(rc, "cannot resize", who(s));
}

void RadosClient::remove(const Spec& s) const {
  Opened o;
  o.io = open_ioctx(s);
  int rc = rbd_remove(o.io, s.image.c_str());
  if (rc < 0) fail(rc, "cannot remove", who(s));
}

std::vector<std::string> RadosClient::list(const std::string& pool, const std::string& ns) const {
  Spec s{pool, ns, "*"};
  Opened o;
  o.io = open_ioctx(s);
  size_t n = 64;
  std::vector<rbd_image_spec_t> specs;
  int rc;
  for (;;) {
    specs.resize(n);
    rc = rbd_list2(o.io, specs.data(), &n);
    if (rc != -ERANGE) break;
  }
  if (rc < 0) fail(rc, "cannot list the volumes of", "pool '" + pool + "' namespace '" + ns + "' (" + name_ + ")");
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(specs[i].name);
  rbd_image_spec_list_cleanup(specs.data(), n);
  return names;
}

VolumeInfo RadosClient::info(const Spec& s) const {
  Opened o;
  o.io = open_ioctx(s);
  o.image = open_image(o.io, s, true, who(s));
  rbd_image_info_t st{};
  int rc = rbd_stat(o.image, &st, sizeof(st));
  if (rc < 0) fail(rc, "cannot stat", who(s));
  VolumeInfo v;
  v.bytes = st.size;
  v.object_bytes = st.obj_size;
  char prefix[RBD_MAX_BLOCK_NAME_SIZE] = {};
  rc = rbd_get_block_name_prefix(o.image, prefix, sizeof(prefix));
  if (rc < 0) fail(rc, "cannot read the object prefix of", who(s));
  v.object_prefix = prefix;
  rbd_get_features(o.image, &v.features);
  return v;
}

void RadosClient::create_namespace(const std::string& pool, const std::string& ns) const {
  Spec s{pool, "", "*"};
  Opened o;
  o.io = open_ioctx(s);
  bool exists = false;
  int rc = rbd_namespace_exists(o.io, ns.c_str(), &exists);
  if (rc == 0 && exists) return;
  rc = rbd_namespace_create(o.io, ns.c_str());
  if (rc < 0 && rc != -EEXIST) fail(rc, "cannot create namespace '" + ns + "' in pool '" + pool + "'", "as " + name_);
}

std::vector<std::string> RadosClient::lock_owners(const Spec& s) const {
  Opened o;
  o.io = open_ioctx(s);
  o.image = open_image(o.io, s, false, who(s));
  rbd_lock_mode_t mode;
  size_t n = 8;
  std::vector<char*> owners(n);
  int rc = rbd_lock_get_owners(o.image, &mode, owners.data(), &n);
  if (rc == -ENOENT) return {};
  if (rc < 0) fail(rc, "cannot read the lock owners of", who(s));
  std::vector<std::string> r(owners.begin(), owners.begin() + static_cast<long>(n));
  rbd_lock_get_owners_cleanup(owners.data(), n);
  return r;
}

int RadosClient::break_locks(const Spec& s) const {
  const std::vector<std::string> owners = lock_owners(s);
  if (owners.empty()) return 0;
  Opened o;
  o.io = open_ioctx(s);
  o.image = open_image(o.io, s, false, who(s));
  int broken = 0;
  for (const std::string& owner : owners) {
    int rc = rbd_lock_break(o.image, RBD_LOCK_MODE_EXCLUSIVE, owner.c_str());
    if (rc == 0) ++broken;
    else if (rc != -ENOENT) fail(rc, "cannot break the lock of", who(s));  // ENOENT: released meanwhile
  }
  return broken;
}

}  // namespace gpuio::rbd

// libgpuio_rbd.so.1's entry points for rbd::connect and the loader's build check (io/rbd_loader.cpp).
extern "C" __attribute__((visibility("default"))) gpuio::rbd::Client* gpuio_rbd_connect(const gpuio::RbdOptions& o) {
  return new gpuio::rbd::RadosClient(o);
}

extern "C" __attribute__((visibility("default"))) const char* gpuio_rbd_abi() {
  static const std::string abi = gpuio::rbd::plugin_abi();
  return abi.c_str();
}

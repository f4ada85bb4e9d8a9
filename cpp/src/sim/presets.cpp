// SSD presets and config validation. Figures are public datasheet-class numbers, rounded; page_bytes is
// the mapping unit (4 KiB) for both, so 4 KiB host requests map to one flash page.
#include <stdexcept>
#include <string>

#include "gpuio/sim.hpp"

namespace gpuio::sim {

std::vector<std::string> preset_names() { return {"znand", "tlc"}; }

SsdConfig preset(const std::string& name) {
  SsdConfig c;
  c.name = name;
  if (name == "znand") {  // Z-NAND SLC: 3 us read, 100 us program (ZnG's flash; SZ985-class SSD)
    c.geometry = Geometry{8, 1, 4, 2, 512, 256, 4096};
    c.timings = Timings{3000, 100000, 1000000, 800, 3200, 2000, 500};
    c.overprovision = 0.07;
    return c;
  }
  if (name == "tlc") {  // datacenter TLC: ~60 us read, ~700 us program, 3.5 ms erase, PCIe Gen4 x4
    c.geometry = Geometry{8, 2, 4, 2, 512, 384, 4096};
    c.timings = Timings{60000, 700000, 3500000, 1200, 7000, 3000, 500};
    c.overprovision = 0.07;
    c.write_buffer_pages = 8192;
    return c;
  }
  std::string known;
  for (const std::string& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown SSD preset '" + name + "': expected one of " + known);
}

void validate(const SsdConfig& c) {
  auto bad = [&](const std::string& field, const std::string& why) {
    throw std::invalid_argument("SSD config '" + c.name + "': " + field + " " + why);
  };
  const Geometry& g = c.geometry;
  if (g.channels == 0) bad("geometry.channels", "must be > 0");
  if (g.packages_per_channel == 0) bad("geometry.packages_per_channel", "must be > 0");
  if (g.dies_per_package == 0) bad("geometry.dies_per_package", "must be > 0");
  if (g.planes_per_die == 0) bad("geometry.planes_per_die", "must be > 0");
  if (g.blocks_per_plane < 4) bad("geometry.blocks_per_plane=" + std::to_string(g.blocks_per_plane), "must be >= 4");
  if (g.pages_per_block == 0) bad("geometry.pages_per_block", "must be > 0");
  if (g.page_bytes < 512 || (g.page_bytes & (g.page_bytes - 1)))
    bad("geometry.page_bytes=" + std::to_string(g.page_bytes), "must be a power of two >= 512");
  if (g.pages() >= 0xFFFFFFFFull) bad("geometry", "has " + std::to_string(g.pages()) + " pages; at most 2^32-2");
  if (!(c.overprovision > 0.0 && c.overprovision < 0.9))
    bad("overprovision=" + std::to_string(c.overprovision), "must lie in (0, 0.9)");
  if (c.gc_free_blocks_min < 2 || c.gc_free_blocks_min >= g.blocks_per_plane / 2)
    bad("gc_free_blocks_min=" + std::to_string(c.gc_free_blocks_min), "must lie in [2, blocks_per_plane/2)");
  // Each plane needs its GC reserve beyond the host's share, or GC could find only fully valid victims.
  double reserve = static_cast<double>(c.gc_free_blocks_min + 2) / g.blocks_per_plane;
  if (c.overprovision <= reserve)
    bad("overprovision=" + std::to_string(c.overprovision),
        "must exceed the GC reserve (gc_free_blocks_min+2)/blocks_per_plane=" + std::to_string(reserve));
  if (c.host_queues == 0 || c.host_queues > 1024) bad("host_queues=" + std::to_string(c.host_queues), "must lie in [1, 1024]");
  if (c.queue_depth == 0 || c.queue_depth > 65536) bad("queue_depth=" + std::to_string(c.queue_depth), "must lie in [1, 65536]");
  if (c.prefill < 0.0 || c.prefill > 1.0) bad("prefill=" + std::to_string(c.prefill), "must lie in [0, 1]");
  const Timings& t = c.timings;
  if (t.channel_mb_s == 0) bad("timings.channel_mb_s", "must be > 0");
  if (t.host_mb_s == 0) bad("timings.host_mb_s", "must be > 0");
}

}  // namespace gpuio::sim

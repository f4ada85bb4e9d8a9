// SSD model: FTL mapping, GC victim choice, WAF bookkeeping, determinism, trace parsing errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "gpuio/sim.hpp"
#include "sim/ftl.hpp"

namespace gs = gpuio::sim;

namespace {

gs::SsdConfig tiny() {  // 2 planes x 8 blocks x 4 pages: GC happens after a few dozen writes
  gs::SsdConfig c;
  c.name = "tiny";
  c.geometry = gs::Geometry{1, 1, 1, 2, 8, 4, 4096};
  c.overprovision = 0.6;  // 25 logical pages; above the GC reserve (2+2)/8
  c.gc_free_blocks_min = 2;
  c.write_buffer_pages = 0;
  c.queue_depth = 1;
  return c;
}

gs::Request wr(uint64_t page, uint64_t t = 0) { return gs::Request{t, page * 4096, 4096, true, 0}; }

}  // namespace

TEST(SimFtl, MapsRoundRobinOverPlanesAndRemapsOnOverwrite) {
  gs::Geometry g{1, 1, 1, 2, 8, 4, 4096};
  gs::detail::Ftl ftl(g, 0.5, 2);
  EXPECT_EQ(ftl.logical_pages(), 32u);
  gs::detail::GcWork gc;
  uint32_t a = ftl.write(0, gc), b = ftl.write(1, gc);
  EXPECT_EQ(ftl.plane_of(a), 0u);
  EXPECT_EQ(ftl.plane_of(b), 1u);
  EXPECT_EQ(ftl.lookup(0), a);
  EXPECT_EQ(ftl.lookup(5), gs::detail::Ftl::kUnmapped);
  uint32_t a2 = ftl.write(0, gc);  // overwrite: new page, old one invalid
  EXPECT_NE(a2, a);
  EXPECT_EQ(ftl.lookup(0), a2);
  EXPECT_EQ(ftl.valid_pages(a / 4), 0u + (a2 / 4 == a / 4 ? 1u : 0u));
  EXPECT_EQ(ftl.programs(), 3u);
}

TEST(SimFtl, GreedyGcPicksTheBlockWithFewestValidPages) {
  gs::Geometry g{1, 1, 1, 1, 8, 4, 4096};  // one plane of 8 blocks x 4 pages; 16 logical pages
  gs::detail::Ftl ftl(g, 0.5, 2);
  gs::detail::GcWork gc;
  // Blocks fill in index order: 0:{0,1,2,3} 1:{4,5,6,7} 2:{8,9,10,11} 3:{4,5,6,12} 4:{13,14,15,8}
  // 5:{9,1,2,10} 6:{13,...}. Valid pages then: b0=2, b1=1, b2=1, b3=4, b4=3. Opening block 6 leaves one
  // free block, so the next write runs GC: greedy takes b1 (fewest valid, lowest index on the tie with b2);
  // a FIFO policy would have taken b0.
  for (uint64_t l : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 12, 13, 14, 15, 8, 9, 1, 2, 10, 13})
    ftl.write(l, gc);
  EXPECT_EQ(gc.blocks_erased, 0u);
  EXPECT_EQ(ftl.free_blocks(0), 1u);
  EXPECT_EQ(ftl.valid_pages(0), 2u);
  EXPECT_EQ(ftl.valid_pages(1), 1u);
  EXPECT_EQ(ftl.valid_pages(2), 1u);
  EXPECT_EQ(ftl.lookup(7) / 4, 1u);
  ftl.write(14, gc);
  EXPECT_EQ(gc.blocks_erased, 1u);
  EXPECT_EQ(gc.pages_moved, 1u);         // only lpn 7 was still valid in b1
  EXPECT_EQ(ftl.valid_pages(1), 0u);
  EXPECT_EQ(ftl.lookup(7) / 4, 6u);      // lpn 7 moved to the active block and stays mapped
  EXPECT_EQ(ftl.valid_pages(0), 2u);     // b0 untouched
  EXPECT_EQ(ftl.free_blocks(0), 2u);
}

TEST(SimSsd, WafCountsHostAndGcPrograms) {
  gs::SsdConfig c = tiny();
  gs::Ssd ssd(c);
  for (uint64_t i = 0; i < 200; ++i) ssd.submit(wr((i * 7) % 25, i * 1000));
  gs::Stats s = ssd.stats();
  EXPECT_EQ(s.host_pages_written, 200u);
  EXPECT_GT(s.gc_runs, 0u);
  EXPECT_EQ(s.flash_pages_programmed, s.host_pages_written + s.gc_pages_moved);
  EXPECT_DOUBLE_EQ(s.waf, static_cast<double>(s.flash_pages_programmed) / 200.0);
  EXPECT_EQ(s.erases, s.gc_runs);
  for (uint64_t l = 0; l < 25; ++l) EXPECT_NE(ssd.physical_page(l), UINT64_MAX) << l;
}

TEST(SimSsd, WriteBufferCoalescesAndServesReads) {
  gs::SsdConfig c = tiny();
  c.write_buffer_pages = 4;
  c.queue_depth = 8;
  gs::Ssd ssd(c);
  ssd.submit(wr(3)), ssd.submit(wr(3)), ssd.submit(wr(3));
  ssd.submit(gs::Request{0, 3 * 4096, 4096, false, 0});
  gs::Stats s = ssd.stats();
  EXPECT_EQ(s.buffer_coalesced, 2u);
  EXPECT_EQ(s.buffer_read_hits, 1u);
  EXPECT_EQ(s.flash_pages_programmed, 0u);  // nothing left the buffer yet
  ssd.flush(1000000);
  EXPECT_EQ(ssd.stats().flash_pages_programmed, 1u);
  EXPECT_LT(ssd.stats().waf, 1.0);
}

TEST(SimSsd, ReadLatencyFollowsTimings) {
  gs::SsdConfig c = gs::preset("znand");
  c.write_buffer_pages = 0;
  gs::Ssd ssd(c);
  uint64_t wdone = ssd.submit(wr(10));
  const gs::Timings& t = c.timings;
  uint64_t rdone = ssd.submit(gs::Request{wdone, 10 * 4096, 4096, false, 0});
  uint64_t bus = (4096 * 1000 + t.channel_mb_s - 1) / t.channel_mb_s;
  uint64_t host = (4096 * 1000 + t.host_mb_s - 1) / t.host_mb_s;
  EXPECT_EQ(rdone - wdone, t.controller_ns + t.read_ns + bus + host);
}

TEST(SimSsd, HostQueueDepthLimitsOutstandingRequests) {
  gs::SsdConfig c = gs::preset("znand");
  c.queue_depth = 2;
  gs::Ssd ssd(c);
  uint64_t d1 = ssd.submit(wr(1)), d2 = ssd.submit(wr(2));
  ssd.submit(gs::Request{0, 0, 4096, false, 0});
  EXPECT_EQ(ssd.last_issue_ns(), std::min(d1, d2));  // waited for a slot
  EXPECT_EQ(ssd.stats().queue_full_waits, 1u);
}

TEST(SimSsd, SameSeedAndConfigGiveByteIdenticalStats) {
  gs::SsdConfig c = gs::preset("tlc");
  c.prefill = 0.9;
  c.geometry.blocks_per_plane = 80;
  c.geometry.channels = 2;
  gs::Workload w;
  w.requests = 20000;
  w.read_ratio = 0.7;
  w.seed = 42;
  std::string a = gs::run_workload(c, w).to_json(), b = gs::run_workload(c, w).to_json();
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("\"gc_runs\": "), std::string::npos);
  w.seed = 43;
  EXPECT_NE(gs::run_workload(c, w).to_json(), a);
}

TEST(SimSsd, PrefilledDriveRunsGcUnderRandomWrites) {
  gs::SsdConfig c = gs::preset("znand");
  c.geometry.blocks_per_plane = 16;
  c.overprovision = 0.3;
  c.prefill = 1.0;
  gs::Workload w;
  w.requests = 30000;
  w.read_ratio = 0.0;
  gs::Stats s = gs::run_workload(c, w);
  EXPECT_GT(s.gc_runs, 0u);
  EXPECT_GT(s.waf, 1.0);
  EXPECT_GT(s.write.p99_ns, s.write.p50_ns);
}

TEST(SimConfig, RejectsUnknownPresetAndBadFields) {
  try {
    gs::preset("qlc9000");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("qlc9000"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("znand"), std::string::npos);
  }
  gs::SsdConfig c = gs::preset("znand");
  c.overprovision = 1.5;
  EXPECT_THROW(gs::validate(c), std::invalid_argument);
}

TEST(SimTrace, ParsesDiskSimAndNamesTheBadLine) {
  std::string path = ::testing::TempDir() + "/t.trace";
  {
    std::ofstream f(path);
    f << "100 0 8 16 1\n# comment\n\n200 1 16 8 0";  // no trailing newline
  }
  auto r = gs::parse_disksim(path);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].offset, 8u * 512);
  EXPECT_EQ(r[0].bytes, 16u * 512);
  EXPECT_FALSE(r[0].write);
  EXPECT_TRUE(r[1].write);
  EXPECT_EQ(r[1].queue, 1u);
  EXPECT_EQ(gs::detect_trace_format(path), "disksim");
  {
    std::ofstream f(path);
    f << "100 0 8 16 1\n200 0 x9 16 1\n";
  }
  try {
    gs::parse_disksim(path);
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(":2:"), std::string::npos) << m;
    EXPECT_NE(m.find("x9"), std::string::npos) << m;
  }
}

TEST(SimTrace, DiskSimTimesAreMillisecondsWhenAFractionIsThere) {
  std::string path = ::testing::TempDir() + "/ms.trace";
  {
    std::ofstream f(path);
    f << "0.000000 0 8 16 1\n0.5 0 16 8 0\n1250.000250 1 24 8 1\n";  // DiskSim's own float milliseconds
  }
  auto r = gs::parse_disksim(path);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].arrival_ns, 500000u);
  EXPECT_EQ(r[2].arrival_ns, 1250000250u);  // exact: no floating point
  EXPECT_EQ(gs::parse_disksim(path, "ms")[2].arrival_ns, 1250000250u);
  EXPECT_THROW(gs::parse_disksim(path, "ns"), std::invalid_argument);  // '0.000000' is no integer of ns
  {
    std::ofstream f(path);
    f << "0 0 8 16 1\n500000 0 16 8 0\n";  // integer nanoseconds (no '.' anywhere)
  }
  EXPECT_EQ(gs::parse_disksim(path)[1].arrival_ns, 500000u);
  EXPECT_EQ(gs::parse_disksim(path, "ms")[1].arrival_ns, 500000000000u);
  EXPECT_THROW(gs::parse_disksim(path, "seconds"), std::invalid_argument);
  for (const char* bad : {".", "1.2.3", "-1.0", "1e3"}) {
    {
      std::ofstream f(path);
      f << bad << " 0 8 16 1\n";
    }
    EXPECT_THROW(gs::parse_disksim(path, "ms"), std::invalid_argument) << bad;
  }
}

TEST(SimWorkload, RequestCountBeyondTheLimitIsRefusedBeforeAllocating) {
  gs::Workload w;
  w.requests = gs::workload_requests_max + 1;
  try {
    gs::synthesize(w, 1ull << 30);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(gs::workload_requests_max)), std::string::npos) << e.what();
  }
}

TEST(SimTrace, ParsesBlkparseQueueEvents) {
  std::string path = ::testing::TempDir() + "/t.blk";
  {
    std::ofstream f(path);
    f << "  8,0    3        1     0.000000000   697  Q   R 223490 + 8 [kjournald]\n"
         "  8,0    3        2     0.000001000   697  G   R 223490 + 8 [kjournald]\n"
         "  8,0    1        3     1.500000000   700  Q  WS 100 + 16 [dd]\n"
         "  8,0    1        4     1.600000000   700  Q  FN [dd]\n"
         "CPU0 (8,0):\n Reads Queued: 1\n";
  }
  auto r = gs::parse_blkparse(path);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].offset, 223490u * 512);
  EXPECT_FALSE(r[0].write);
  EXPECT_EQ(r[1].arrival_ns, 1500000000u);
  EXPECT_TRUE(r[1].write);
  EXPECT_EQ(r[1].bytes, 16u * 512);
  EXPECT_EQ(gs::detect_trace_format(path), "blkparse");
}

// Shared by the backend tests: reap exactly n completions from a queue (a reap that returns nothing fails the test).
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "gpuio/io.hpp"

namespace gpuio::test {

inline std::vector<gpuio::IoCompletion> drain(gpuio::IoQueue& q, int n) {
  std::vector<gpuio::IoCompletion> out(n);
  int got = 0;
  while (got < n) {
    int r = q.reap(out.data() + got, n - got, n - got);
    EXPECT_GT(r, 0);
    if (r <= 0) break;
    got += r;
  }
  return out;
}

}  // namespace gpuio::test

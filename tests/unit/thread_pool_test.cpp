// ThreadPool (core/thread_pool.h): every task runs exactly once for any pool size, exceptions reach
// the caller, nested and concurrent calls run inline instead of deadlocking, and the thread count
// comes from AVDIT_THREADS / OPENBLAS_NUM_THREADS with bad values refused.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace avdit {
namespace {

TEST(ThreadPool, EveryTaskRunsOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 20; ++rep)
        pool.run(n, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
      for (auto& h : hits) ASSERT_EQ(h.load(), 20) << threads << " threads, " << n << " tasks";
    }
  }
}

TEST(ThreadPool, ExceptionsReachTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(4);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run(100,
                        [&](int64_t i) {
                          ran++;
                          if (i == 37) throw std::runtime_error("task 37");
                        }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 100);
  std::atomic<int64_t> sum{0};
  pool.run(100, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, NestedAndConcurrentCallsDoNotDeadlock) {
  ThreadPool pool(3);
  std::atomic<int> inner{0};
  pool.run(6, [&](int64_t) { pool.run(5, [&](int64_t) { inner++; }); });
  EXPECT_EQ(inner.load(), 30);
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) pool.run(10, [&](int64_t) { total++; });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 10);
}

TEST(ThreadPool, ThreadCountFromTheEnvironment) {
  ::setenv("AVDIT_THREADS", "3", 1);
  EXPECT_EQ(default_thread_count(), 3);
  ::unsetenv("AVDIT_THREADS");
  ::setenv("OPENBLAS_NUM_THREADS", "2", 1);
  EXPECT_EQ(default_thread_count(), 2);
  for (const char* bad : {"0", "-1", "2x", "99999", ""}) {
    ::setenv("AVDIT_THREADS", bad, 1);
    if (*bad) {
      EXPECT_THROW(default_thread_count(), BadInput) << bad;
    } else {
      EXPECT_EQ(default_thread_count(), 2);  // empty: unset
    }
  }
  ::unsetenv("AVDIT_THREADS");
  ::unsetenv("OPENBLAS_NUM_THREADS");
  EXPECT_GE(default_thread_count(), 1);
}

}  // namespace
}  // namespace avdit

// A small pool of worker threads that runs indexed tasks. Work is split into tasks by the caller,
// never by the pool, so a result that depends only on the tasks is the same for any thread count
// (the CPU oracle's GEMMs rely on this: ops/cpu/gemm_fixed.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace avdit {

class ThreadPool {
 public:
  // `threads` >= 1 runs tasks on the caller plus threads - 1 workers.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) for every i in [0, n) and returns when all have run. The first exception thrown
  // by a task is rethrown here (the remaining tasks still run). Called from inside a task, or
  // while another thread is using the pool, the tasks run on the calling thread alone.
  void run(int64_t n, const std::function<void(int64_t)>& task);

 private:
  // One run() call. Workers hold it by shared_ptr, so one that wakes late finds no task left
  // instead of reading a later job's fields.
  struct Job {
    const std::function<void(int64_t)>* task;
    int64_t count;
    std::atomic<int64_t> next{0};
    int64_t finished = 0;  // under the pool's m_
    std::exception_ptr error;
  };
  void worker_loop();
  void drain(Job& job);  // takes tasks of `job` until none are left

  std::vector<std::thread> workers_;
  std::mutex busy_;  // one job at a time

  std::mutex m_;
  std::condition_variable wake_, done_;
  std::shared_ptr<Job> job_;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// Threads for the CPU backend: AVDIT_THREADS, else OPENBLAS_NUM_THREADS, else the core count.
// BadInput when the variable is set to something other than an integer in [1, 1024].
int default_thread_count();

}  // namespace avdit

// ThreadPool (see thread_pool.h): a job is a task count and a function; the caller and the workers
// take task indices from one atomic counter until none are left.
#include "core/thread_pool.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "core/error.h"

namespace avdit {

namespace {
thread_local bool t_in_task = false;  // a task that calls run() again runs the inner tasks inline
}

ThreadPool::ThreadPool(int threads) {
  AVDIT_CHECK(threads >= 1, "ThreadPool of {} threads", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::drain(Job& job) {
  const bool outer = t_in_task;
  t_in_task = true;
  int64_t done = 0;
  std::exception_ptr error;
  for (int64_t i; (i = job.next.fetch_add(1)) < job.count;) {
    try {
      (*job.task)(i);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    ++done;
  }
  t_in_task = outer;
  if (done == 0) return;
  std::lock_guard<std::mutex> lock(m_);
  if (error && !job.error) job.error = error;
  job.finished += done;
  if (job.finished == job.count) done_.notify_all();
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(m_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    if (job) drain(*job);
  }
}

void ThreadPool::run(int64_t n, const std::function<void(int64_t)>& task) {
  if (n <= 0) return;
  std::unique_lock<std::mutex> busy(busy_, std::defer_lock);
  if (workers_.empty() || n == 1 || t_in_task || !busy.try_lock()) {
    for (int64_t i = 0; i < n; ++i) task(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->task = &task;
  job->count = n;
  {
    std::lock_guard<std::mutex> lock(m_);
    job_ = job;
    ++generation_;
  }
  wake_.notify_all();
  drain(*job);
  {
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return job->finished == job->count; });
    job_.reset();
  }
  if (job->error) std::rethrow_exception(job->error);
}

int default_thread_count() {
  for (const char* name : {"AVDIT_THREADS", "OPENBLAS_NUM_THREADS"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    const std::string_view s(v);
    int n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    AVDIT_REQUIRE(ec == std::errc() && end == s.data() + s.size() && n >= 1 && n <= 1024,
                  "{}={}: expected a thread count in [1, 1024]", name, s);
    return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min(hw, 1024u));
}

}  // namespace avdit

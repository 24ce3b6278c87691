// CommThread: runs communication jobs one at a time, in the order they were posted, on a thread of
// its own, so that gradient reductions overlap the backward pass that produces them (PyTorch DDP's
// reducer and DeepSpeed's overlap_comm do the same). A job on CUDA tensors runs on a stream of the
// thread's own that first waits, by an event, for the work queued so far on the poster's current
// stream: the bytes it sends are the ones backward wrote. Its captures are freed on that stream, and
// the waiter's stream waits for it by another event. Shared by DistributedDataParallel and ZeroPartition.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "tensor/device.h"

namespace ember::cuda {
class Event;
}

namespace ember::dist {

class CommThread {
 public:
  CommThread() = default;
  // Lets the posted jobs finish, then ends the thread.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `job`, whose tensors live on `device`, and returns its number for wait(); the thread starts
  // with the first post. The job runs under NoGradGuard; an exception it throws is kept.
  size_t post(std::function<void()> job, Device device);
  // Waits until job `ticket` and every one before it have run, and orders the caller's current
  // stream after their GPU work; raises the first failure kept (and forgets it).
  void wait(size_t ticket);
  // Waits until every posted job has run, ordering the caller's current stream after their GPU work;
  // returns the first failure kept (null if none) and forgets it.
  std::exception_ptr drain();

 private:
  struct Job {
    std::function<void()> run;
    std::shared_ptr<cuda::Event> produced;  // CUDA: where the poster's stream stood
    int device = -1;
  };
  void loop();
  void order_after_finished(std::unique_lock<std::mutex>& lock);  // unlocks

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  size_t posted_ = 0, finished_ = 0;
  std::exception_ptr error_;
  std::map<int, std::shared_ptr<cuda::Event>> finished_events_;  // per device: after the last finished job
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace ember::dist

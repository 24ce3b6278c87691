#include "dist/comm_thread.h"

#include <map>

#include "autograd/grad_mode.h"
#include "tensor/capture.h"
#include "tensor/cuda_stream.h"

namespace ember::dist {

CommThread::~CommThread() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

size_t CommThread::post(std::function<void()> job, Device device) {
  // Before any event is recorded: the job's collectives could not be captured anyway, and on this
  // thread no CaptureError would reach the step.
  capture::refuse("a gradient reduction of DDP or ZeRO (its communication thread) inside a captured step: "
                  "collectives are not captured (run the step eagerly: no --compile with a process group)");
  Job j{std::move(job), nullptr, -1};
  if (device.is_cuda()) {
    j.device = device.index;
    j.produced = std::make_shared<cuda::Event>(false);
    j.produced->record(device.index);
  }
  size_t ticket;
  {
    std::lock_guard lock(mutex_);
    if (!worker_.joinable()) worker_ = std::thread([this] { loop(); });
    queue_.push_back(std::move(j));
    ticket = ++posted_;
  }
  changed_.notify_all();
  return ticket;
}

// The callers' current streams wait for the comm streams' work up to the last job that finished:
// a job's host side ends before its GPU work does.
void CommThread::order_after_finished(std::unique_lock<std::mutex>& lock) {
  const std::map<int, std::shared_ptr<cuda::Event>> done = finished_events_;
  lock.unlock();
  for (const auto& [device, event] : done) event->wait(device);
}

void CommThread::wait(size_t ticket) {
  std::exception_ptr failure;
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_ >= ticket; });
  std::swap(failure, error_);
  order_after_finished(lock);
  if (failure) std::rethrow_exception(failure);
}

std::exception_ptr CommThread::drain() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_ == posted_; });
  std::exception_ptr failure = error_;
  error_ = nullptr;
  order_after_finished(lock);
  return failure;
}

void CommThread::loop() {
  autograd::NoGradGuard no_grad;
  std::map<int, std::unique_ptr<cuda::Stream>> streams;  // one per device the jobs used
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr failure;
    std::shared_ptr<cuda::Event> done;  // recorded on the comm stream after the job's work
    const int device = job.device;
    try {
      if (job.produced) {
        cuda::set_device(job.device);  // a new thread starts on cuda:0, whatever device the job is on
        auto& stream = streams[job.device];
        if (!stream) stream = std::make_unique<cuda::Stream>(job.device);
        stream->wait(*job.produced);
        const cuda::StreamGuard on_stream(*stream);
        try {
          job.run();
        } catch (...) {
          failure = std::current_exception();
        }
        // The tensors the job captured are freed here, in the comm stream's order, not the legacy stream's.
        job.run = nullptr;
        done = std::make_shared<cuda::Event>(false);
        done->record(*stream);
      } else {
        job.run();
      }
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    job = Job();  // the tensors it captured are freed before anyone learns that it finished
    {
      std::lock_guard lock(mutex_);
      if (failure && !error_) error_ = failure;
      if (done) finished_events_[device] = done;
      ++finished_;
    }
    changed_.notify_all();
  }
}

}  // namespace ember::dist

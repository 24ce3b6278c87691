#include "dist/comm_thread.h"

#include <map>

#include "autograd/grad_mode.h"
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

void CommThread::wait(size_t ticket) {
  std::exception_ptr failure;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished_ >= ticket; });
    std::swap(failure, error_);
  }
  if (failure) std::rethrow_exception(failure);
}

std::exception_ptr CommThread::drain() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_ == posted_; });
  std::exception_ptr failure = error_;
  error_ = nullptr;
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
    try {
      if (job.produced) {
        auto& stream = streams[job.device];
        if (!stream) stream = std::make_unique<cuda::Stream>(job.device);
        stream->wait(*job.produced);
        const cuda::StreamGuard on_stream(*stream);
        job.run();
      } else {
        job.run();
      }
    } catch (...) {
      failure = std::current_exception();
    }
    job = Job();  // the tensors it captured are freed before anyone learns that it finished
    {
      std::lock_guard lock(mutex_);
      if (failure && !error_) error_ = failure;
      ++finished_;
    }
    changed_.notify_all();
  }
}

}  // namespace ember::dist

#include "dist/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <thread>
#include <type_traits>

#include "dist/prefix_store.h"
#include "dist/socket.h"
#include "dist/staging.h"
#include "tensor/ops.h"
#include "tensor/printable.h"
#include "tensor/stored_add.h"

namespace ember::dist {

namespace {

// Gloo's slot prefixes 0x01..0x08 belong to its collectives; ember's send/recv use their own.
constexpr uint8_t kSendRecvSlotPrefix = 0x40;

// Gloo's rendezvous reads and writes ember's store through this adapter.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(std::shared_ptr<dist::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_->get(key);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<dist::Store> store_;
};

// Gloo's message without its "[file.cc:123] " prefix.
std::string gloo_message(const std::exception& e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    const size_t close = m.find("] ");
    if (close != std::string::npos) m.erase(0, close + 2);
  }
  return "Gloo: " + m;
}

// Gloo's reduction callback: c[i] = combine(a[i], b[i]) over n elements of T.
template <class T, class Combine>
gloo::AllreduceOptions::Func elementwise(Combine combine) {
  return [combine](void* c, const void* a, const void* b, size_t n) {
    auto *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
    auto* z = static_cast<T*>(c);
    for (size_t i = 0; i < n; ++i) z[i] = combine(x[i], y[i]);
  };
}

// Integer sums wrap; bool's sum and max are "or", its min is "and" (std::min of bools).
template <class T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:  // summed here, divided once by the world size afterwards
      return elementwise<T>([](T x, T y) { return add_stored(x, y); });
    case ReduceOp::max: return elementwise<T>([](T x, T y) { return std::max(x, y); });
    case ReduceOp::min: return elementwise<T>([](T x, T y) { return std::min(x, y); });
  }
  throw ValueError("all_reduce: unknown reduce op");
}

// The interface Gloo listens on: GLOO_SOCKET_IFNAME, else the route toward the master, else the hostname.
gloo::transport::tcp::attr device_attr(const GlooOptions& options) {
  gloo::transport::tcp::attr attr;
  if (!options.socket_ifname.empty()) {
    // Gloo would fail on an unknown name with an assertion of its own; name the variable and the choices.
    if (::if_nametoindex(options.socket_ifname.c_str()) == 0) {
      std::string names;
      if (struct if_nameindex* all = ::if_nameindex()) {
        for (struct if_nameindex* i = all; i->if_index != 0; ++i) names += (names.empty() ? "" : ", ") + std::string(i->if_name);
        ::if_freenameindex(all);
      }
      throw ValueError("GLOO_SOCKET_IFNAME=" + printable(options.socket_ifname, 40) +
                       ": no such network interface on this machine (it has " + names + ")");
    }
    attr.iface = options.socket_ifname;
    return attr;
  }
  attr.hostname = options.master_addr.empty() ? "" : local_address_toward(options.master_addr);
  if (attr.hostname.empty()) {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    attr.hostname = name;
  }
  return attr;
}

// Gloo writes to its sockets without MSG_NOSIGNAL: a peer that died would raise SIGPIPE, whose default
// action ends this process before Gloo can report the error. Ignore it unless the program set a handler.
void ignore_sigpipe_by_default() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

class GlooProcessGroup;

// send/recv: posted at once; wait() waits for Gloo to finish the transfer. Gloo offers no
// non-blocking test, so is_completed() turns true only once wait() returned (as in PyTorch).
class TransferWork : public Work {
 public:
  TransferWork(std::string description, GlooProcessGroup& group, Tensor tensor, Tensor staging,
               std::unique_ptr<gloo::transport::UnboundBuffer> buffer, bool is_recv, int peer, milliseconds timeout)
      : Work(std::move(description)), group_(group), tensor_(std::move(tensor)), staging_(std::move(staging)),
        buffer_(std::move(buffer)), is_recv_(is_recv), peer_(peer), timeout_(timeout) {}
  void wait(std::optional<milliseconds> timeout) override;

 private:
  GlooProcessGroup& group_;
  Tensor tensor_, staging_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  const bool is_recv_;
  const int peer_;
  const milliseconds timeout_;
  std::mutex waiting_;
};

class GlooProcessGroup : public ProcessGroup {
 public:
  GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size, const GlooOptions& options)
      : ProcessGroup(store, rank, size, options.timeout, options.debug) {
    ignore_sigpipe_by_default();
    try {
      auto device = gloo::transport::tcp::CreateDevice(device_attr(options));
      auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
      context->setTimeout(options.timeout);
      GlooStoreAdapter rendezvous(std::make_shared<PrefixStore>("gloo", store));
      context->connectFullMesh(rendezvous, device);
      context_ = std::move(context);
    } catch (const gloo::Exception& e) {
      throw DistributedError(rank_text() + ": connecting the Gloo group failed: " + gloo_message(e));
    }
    worker_ = std::thread([this] { work_loop(); });
  }

  ~GlooProcessGroup() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    queued_cv_.notify_all();
    worker_.join();
  }

  std::string backend_name() const override { return "gloo"; }
  Device device() const override { return kCPU; }

  // Breaks the group after a failure: closes every connection so that peers blocked on this rank
  // fail at once instead of waiting out their timeout. Returns false when it was broken already.
  bool break_group(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (!broken_.empty()) return false;
    broken_ = reason;
    context_->closeConnections();
    return true;
  }

  std::string broken_reason() {
    std::lock_guard lock(mutex_);
    return broken_;
  }

  // The message of a failed send/recv (`what` names it), which breaks the group.
  std::string transfer_failure(const std::string& what, int peer, milliseconds timeout, const std::exception& e) {
    const std::string message = what + " failed (timeout " + std::to_string(timeout.count()) + " ms): rank " +
                                std::to_string(peer) + " did not answer (" + gloo_message(e) + ")";
    break_group(message);
    return message;
  }

 protected:
  void check_device(const Tensor& tensor, const char* op) const override {
    if (!tensor.device().is_cpu())
      throw DeviceError(std::string(op) + ": the Gloo process group serves CPU tensors, got one on " +
                        tensor.device().str() + " (CUDA tensors need an NCCL group)");
  }

  std::shared_ptr<Work> run_all_reduce(const Tensor& tensor, ReduceOp op, const Collective& c) override {
    return enqueue(c, [this, tensor = tensor.detach(), op](const Collective& c) {
      Tensor staging = staged(tensor, opmath_dtype(tensor.dtype()));
      all_reduce_in_place(staging, op, c);
      write_back(tensor, staging);
    });
  }

  // Gloo has no options-style reduce_scatter: all-reduce a copy of the whole input, keep this rank's
  // slice. It sends twice the bytes of a ring reduce-scatter, (2(N-1)/N vs (N-1)/N) x the input.
  std::shared_ptr<Work> run_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op,
                                           const Collective& c) override {
    return enqueue(c, [this, output = output.detach(), input = input.detach(), op](const Collective& c) {
      Tensor staging = empty({input.numel()}, opmath_dtype(input.dtype()));
      copy_(staging, input.reshape({input.numel()}));
      all_reduce_in_place(staging, op, c);
      Tensor out = output;
      copy_(out, staging.narrow(0, rank() * output.numel(), output.numel()).view(output.shape()));
    });
  }

  std::shared_ptr<Work> run_all_gather(const Tensor& output, const Tensor& input, const Collective& c) override {
    return enqueue(c, [this, output = output.detach(), input = input.detach()](const Collective& c) {
      if (input.numel() == 0) return;
      Tensor in = staged(input), out = staged(output);
      gloo::AllgatherOptions opts(context_);
      opts.setInput<uint8_t>(bytes_of(in), nbytes(in));
      opts.setOutput<uint8_t>(bytes_of(out), nbytes(out));
      opts.setTag(tag_of(c));
      opts.setTimeout(c.timeout);
      gloo::allgather(opts);
      write_back(output, out);
    });
  }

  // Rank r's input lands in outputs[r]: Gloo's allgatherv into one buffer, then copied out.
  std::shared_ptr<Work> run_all_gather_list(const std::vector<Tensor>& outputs, const Tensor& input,
                                            const Collective& c) override {
    std::vector<Tensor> targets;
    for (const auto& o : outputs) targets.push_back(o.detach());
    return enqueue(c, [this, targets, input = input.detach()](const Collective& c) {
      std::vector<size_t> counts;
      int64_t total = 0;
      for (const auto& t : targets) {
        counts.push_back(nbytes(t));
        total += t.numel();
      }
      if (total == 0) return;
      Tensor in = staged(input), gathered = empty({total}, input.dtype());
      gloo::AllgathervOptions opts(context_);
      opts.setInput<uint8_t>(bytes_of(in), nbytes(in));
      opts.setOutput<uint8_t>(bytes_of(gathered), counts);
      opts.setTag(tag_of(c));
      opts.setTimeout(c.timeout);
      gloo::allgatherv(opts);
      int64_t at = 0;
      for (auto t : targets) {
        copy_(t, gathered.narrow(0, at, t.numel()).view(t.shape()));
        at += t.numel();
      }
    });
  }

  std::shared_ptr<Work> run_broadcast(const Tensor& tensor, int root, const Collective& c) override {
    return enqueue(c, [this, tensor = tensor.detach(), root](const Collective& c) {
      if (tensor.numel() == 0) return;
      Tensor staging = staged(tensor);
      gloo::BroadcastOptions opts(context_);
      opts.setOutput<uint8_t>(bytes_of(staging), nbytes(staging));
      opts.setRoot(root);
      opts.setTag(tag_of(c));
      opts.setTimeout(c.timeout);
      gloo::broadcast(opts);
      write_back(tensor, staging);
    });
  }

  std::shared_ptr<Work> run_barrier(const Collective& c) override {
    return enqueue(c, [this](const Collective& c) {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag_of(c));
      opts.setTimeout(c.timeout);
      gloo::barrier(opts);
    });
  }

  std::shared_ptr<Work> run_send(const Tensor& tensor, int dst, int tag, milliseconds timeout) override {
    return post_transfer(tensor.detach(), dst, tag, timeout, false);
  }

  std::shared_ptr<Work> run_recv(const Tensor& tensor, int src, int tag, milliseconds timeout) override {
    return post_transfer(tensor.detach(), src, tag, timeout, true);
  }

 private:
  struct Job {
    Collective collective;
    std::shared_ptr<Work> work;
    std::function<void(const Collective&)> body;
  };

  static uint32_t tag_of(const Collective& c) { return static_cast<uint32_t>(c.sequence); }

  // Sums (or max, min) a contiguous tensor across ranks in place; avg divides the sum once.
  void all_reduce_in_place(Tensor& t, ReduceOp op, const Collective& c) {
    if (t.numel() == 0) return;
    visit(t.dtype(), [&]<class T>() {
      if constexpr (!is_reduced_float_v<T>) {  // 16-bit floats arrive widened to f32
        gloo::AllreduceOptions opts(context_);
        opts.setOutput<T>(t.data<T>(), static_cast<size_t>(t.numel()));
        opts.setReduceFunction(reduce_function<T>(op));
        opts.setTag(tag_of(c));
        opts.setTimeout(c.timeout);
        gloo::allreduce(opts);
        if constexpr (std::is_floating_point_v<T>)
          if (op == ReduceOp::avg)
            for (T* p = t.data<T>(), *end = p + t.numel(); p != end; ++p) *p /= static_cast<T>(size());
      }
    });
  }

  std::shared_ptr<Work> enqueue(const Collective& c, std::function<void(const Collective&)> body) {
    auto work = std::make_shared<Work>(describe(c));
    {
      std::lock_guard lock(mutex_);
      queue_.push_back({c, work, std::move(body)});
    }
    queued_cv_.notify_one();
    return work;
  }

  void work_loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        queued_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        if (stopping_) {
          job.work->finish(std::make_exception_ptr(DistributedError(job.work->description() + ": the group was destroyed first")));
          continue;
        }
      }
      const std::exception_ptr error = execute(job);
      job.body = nullptr;  // the tensors it holds are freed before the caller learns that it finished
      job.work->finish(error);
    }
  }

  // Runs one collective; returns its error (nullptr on success).
  std::exception_ptr execute(const Job& job) {
    const Collective& c = job.collective;
    if (const std::string reason = broken_reason(); !reason.empty())
      return std::make_exception_ptr(DistributedError(describe(c) + ": the group is broken by an earlier failure: " + reason));
    if (debug()) {
      try {
        check_same_collective(c);
      } catch (const CollectiveMismatchError&) {
        return std::current_exception();  // every rank sees it and skips the collective: the group still works
      } catch (const DistributedError& e) {
        break_group(e.what());  // a rank did not come: the others must not wait for it again
        return std::current_exception();
      } catch (const Error& e) {
        return failure(c, e.what());
      }
    }
    try {
      job.body(c);
      return nullptr;
    } catch (const gloo::Exception& e) {
      return failure(c, gloo_message(e));
    } catch (const Error& e) {
      return failure(c, e.what());
    }
  }

  std::exception_ptr failure(const Collective& c, const std::string& cause) {
    const bool first = break_group(describe(c) + " failed");
    const std::string peers = first ? unanswered_peers(c) : "the group was broken meanwhile";
    return std::make_exception_ptr(DistributedError(describe(c) + " failed (timeout " + std::to_string(c.timeout.count()) +
                                                    " ms): " + peers + " (" + cause + ")"));
  }

  std::shared_ptr<Work> post_transfer(const Tensor& tensor, int peer, int tag, milliseconds timeout, bool is_recv) {
    const std::string what = std::string(is_recv ? "recv from" : "send to") + " rank " + std::to_string(peer) + " (tag " +
                             std::to_string(tag) + ", " + tensor_text(tensor) + ")";
    const std::string description = rank_text() + ": " + what;
    if (const std::string reason = broken_reason(); !reason.empty())
      throw DistributedError(description + ": the group is broken by an earlier failure: " + reason);
    Tensor staging = staged(tensor);
    auto buffer = context_->createUnboundBuffer(staging.raw_data(), nbytes(staging));
    const uint64_t slot = gloo::Slot::build(kSendRecvSlotPrefix, static_cast<uint32_t>(tag));
    try {
      if (is_recv) buffer->recv(peer, slot);
      else buffer->send(peer, slot);
    } catch (const gloo::Exception& e) {  // the peer's connection failed before this transfer
      throw DistributedError(transfer_failure(description, peer, timeout, e));
    }
    return std::make_shared<TransferWork>(description, *this, tensor, staging, std::move(buffer), is_recv, peer, timeout);
  }

  std::shared_ptr<gloo::Context> context_;
  std::mutex mutex_;
  std::condition_variable queued_cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::string broken_;  // why the group is broken; empty while it works
  std::thread worker_;
};

void TransferWork::wait(std::optional<milliseconds> timeout) {
  {
    std::lock_guard lock(waiting_);
    if (!is_completed()) {
      const milliseconds bound = timeout.value_or(timeout_);
      try {
        if (is_recv_) buffer_->waitRecv(bound);
        else buffer_->waitSend(bound);
        if (is_recv_) write_back(tensor_, staging_);
        finish();
      } catch (const gloo::Exception& e) {
        finish(std::make_exception_ptr(DistributedError(group_.transfer_failure(description(), peer_, bound, e))));
      } catch (...) {
        finish(std::current_exception());
      }
    }
  }
  Work::wait();
}

}  // namespace

bool has_gloo() { return true; }

std::shared_ptr<ProcessGroup> make_gloo_process_group(std::shared_ptr<Store> store, int rank, int size,
                                                      const GlooOptions& options) {
  return std::make_shared<GlooProcessGroup>(std::move(store), rank, size, options);
}

}  // namespace ember::dist

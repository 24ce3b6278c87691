#include "dist/nccl_process_group.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "cuda/context.h"
#include "dist/staging.h"
#include "tensor/capture.h"
#include "tensor/cuda_stream.h"
#include "tensor/host_sync.h"
#include "tensor/storage.h"

namespace ember::dist {

namespace {

using clock = std::chrono::steady_clock;

// How often a waiting thread asks whether an operation finished: short, as a collective of a few
// KiB takes tens of microseconds.
constexpr auto kPollInterval = std::chrono::microseconds(20);

std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string m = std::string("NCCL: ") + ncclGetErrorString(result);
  if (comm)
    if (const char* last = ncclGetLastError(comm); last && *last) m += ": " + std::string(last);
  return m;
}

// The NCCL type of a reduction's elements (16-bit floats arrive widened to f32, so never seen here).
ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8:
    case DType::boolean: return ncclUint8;
  }
  throw DTypeError(std::string("NCCL: no NCCL type for ") + dtype_name(d));
}

// bool's sum and max are "or" and its min "and", as with Gloo; integers wrap.
ncclRedOp_t nccl_op(ReduceOp op, DType d) {
  if (d == DType::boolean) return op == ReduceOp::min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  throw ValueError("NCCL: unknown reduce op");
}

int usable_device(int device) {
  const int count = backend::cuda_device_count();
  if (count == 0) throw DeviceError("NCCL process group: no CUDA device is visible (CPU tensors need a Gloo group)");
  if (device < 0 || device >= count)
    throw DeviceError("NCCL process group: cuda:" + std::to_string(device) + " does not exist; this process sees " +
                      std::to_string(count) + " GPU(s)");
  return device;
}

class NcclProcessGroup;

// An operation queued on the group's stream; finished by the group once its event fired or it failed.
class NcclWork : public Work {
 public:
  NcclWork(std::string description, NcclProcessGroup& group, milliseconds timeout, std::function<std::string()> silent_peers)
      : Work(std::move(description)), group_(group), timeout_(timeout), silent_peers_(std::move(silent_peers)) {}

  // Blocks the host until the operation finished on the GPU (counted as a host synchronisation).
  void wait(std::optional<milliseconds> timeout) override;
  // Asking settles the work's state (a finished event, a timeout): logically const.
  bool is_completed() const override;

 private:
  friend class NcclProcessGroup;
  NcclProcessGroup& group_;
  const milliseconds timeout_;
  const std::function<std::string()> silent_peers_;  // "rank(s) 1 did not answer", asked after a failure
  cuda::Event done_{false};                          // recorded on the group's stream after the operation
  std::vector<Tensor> tensors_;                      // read or written by the operation: kept until it finished
  clock::time_point issued_;
};

class NcclProcessGroup : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size, const NcclOptions& options)
      : ProcessGroup(std::move(store), rank, size, options.timeout, options.debug),
        device_(usable_device(options.device)),
        stream_(device_) {
    form_communicator(options.timeout);
  }

  ~NcclProcessGroup() override {
    // Every operation finishes or fails within its timeout; only then may the communicator go.
    for (;;) {
      std::shared_ptr<NcclWork> work;
      {
        std::lock_guard lock(mutex_);
        if (in_flight_.empty()) break;
        work = in_flight_.front();
      }
      while (!settle(*work)) std::this_thread::sleep_for(kPollInterval);
    }
    std::lock_guard lock(mutex_);
    if (!comm_) return;  // aborted after a failure
    try {
      cuda::DeviceGuard device(device_);
      wait_ready(ncclCommFinalize(comm_), "ncclCommFinalize", clock::now() + timeout());
      release_comm_locked(ncclCommDestroy, "ncclCommDestroy");
    } catch (const Error&) {
      release_comm_locked(ncclCommAbort, "ncclCommAbort");  // a peer is gone: nothing to flush to
    }
  }

  std::string backend_name() const override { return "nccl"; }
  Device device() const override { return {DeviceType::cuda, device_}; }

  // Whether work finished (successfully or not), finishing it when its event fired, when NCCL
  // reported an error or when its timeout passed (which aborts the communicator).
  bool settle(NcclWork& work) {
    std::lock_guard lock(mutex_);
    return settle_locked(work);
  }

 protected:
  void check_device(const Tensor& tensor, const char* op) const override {
    if (!tensor.device().is_cuda() || tensor.device().index != device_)
      throw DeviceError(std::string(op) + ": this NCCL process group serves tensors on cuda:" + std::to_string(device_) +
                        ", got one on " + tensor.device().str() + (tensor.device().is_cuda() ? "" : " (CPU tensors need a Gloo group)"));
  }

  std::shared_ptr<Work> run_all_reduce(const Tensor& tensor, ReduceOp op, const Collective& c) override {
    return launch_collective(c, {tensor}, [this, tensor, op](cudaStream_t stream, clock::time_point deadline) {
      Tensor staging = staged(tensor, opmath_dtype(tensor.dtype()));
      if (staging.numel() > 0)
        call(ncclAllReduce(staging.raw_data(), staging.raw_data(), static_cast<size_t>(staging.numel()),
                           nccl_type(staging.dtype()), nccl_op(op, tensor.dtype()), comm_, stream),
             "ncclAllReduce", deadline);
      write_back(tensor, staging);
      return std::vector<Tensor>{staging};
    });
  }

  std::shared_ptr<Work> run_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op,
                                           const Collective& c) override {
    return launch_collective(c, {output, input}, [this, output, input, op](cudaStream_t stream, clock::time_point deadline) {
      const DType wire = opmath_dtype(input.dtype());
      Tensor whole = staged(input, wire), part = staged(output, wire);
      if (part.numel() > 0)
        call(ncclReduceScatter(whole.raw_data(), part.raw_data(), static_cast<size_t>(part.numel()), nccl_type(wire),
                               nccl_op(op, input.dtype()), comm_, stream),
             "ncclReduceScatter", deadline);
      write_back(output, part);
      return std::vector<Tensor>{whole, part};
    });
  }

  std::shared_ptr<Work> run_all_gather(const Tensor& output, const Tensor& input, const Collective& c) override {
    return launch_collective(c, {output, input}, [this, output, input](cudaStream_t stream, clock::time_point deadline) {
      Tensor in = staged(input), out = staged(output);
      if (in.numel() > 0)
        call(ncclAllGather(in.raw_data(), out.raw_data(), nbytes(in), ncclUint8, comm_, stream), "ncclAllGather", deadline);
      write_back(output, out);
      return std::vector<Tensor>{in, out};
    });
  }

  // Sizes may differ between ranks: one broadcast per rank into a flat buffer, in one NCCL group.
  std::shared_ptr<Work> run_all_gather_list(const std::vector<Tensor>& outputs, const Tensor& input,
                                            const Collective& c) override {
    std::vector<Tensor> tensors = outputs;
    tensors.push_back(input);
    return launch_collective(c, std::move(tensors), [this, outputs, input](cudaStream_t stream, clock::time_point deadline) {
      int64_t total = 0;
      for (const auto& t : outputs) total += t.numel();
      Tensor in = staged(input), gathered = empty({total}, TensorOptions(input.dtype()).with_device(input.device()));
      call(ncclGroupStart(), "ncclGroupStart", deadline);
      int64_t at = 0;
      for (int r = 0; r < size(); ++r) {
        Tensor slot = gathered.narrow(0, at, outputs[r].numel());
        if (slot.numel() > 0)
          call(ncclBroadcast(r == rank() ? in.raw_data() : slot.raw_data(), slot.raw_data(), nbytes(slot), ncclUint8, r, comm_, stream),
               "ncclBroadcast", deadline);
        at += slot.numel();
      }
      call(ncclGroupEnd(), "ncclGroupEnd", deadline);
      at = 0;
      for (const auto& t : outputs) {
        Tensor target = t;
        copy_(target, gathered.narrow(0, at, t.numel()).view(t.shape()));
        at += t.numel();
      }
      return std::vector<Tensor>{in, gathered};
    });
  }

  std::shared_ptr<Work> run_broadcast(const Tensor& tensor, int root, const Collective& c) override {
    return launch_collective(c, {tensor}, [this, tensor, root](cudaStream_t stream, clock::time_point deadline) {
      Tensor staging = staged(tensor);
      if (staging.numel() > 0)
        call(ncclBroadcast(staging.raw_data(), staging.raw_data(), nbytes(staging), ncclUint8, root, comm_, stream),
             "ncclBroadcast", deadline);
      write_back(tensor, staging);
      return std::vector<Tensor>{staging};
    });
  }

  // A one-element all-reduce: its wait returns once every rank contributed.
  std::shared_ptr<Work> run_barrier(const Collective& c) override {
    return launch_collective(c, {}, [this](cudaStream_t stream, clock::time_point deadline) {
      Tensor token = zeros({1}, TensorOptions(DType::f32).with_device(Device{DeviceType::cuda, device_}));
      call(ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclFloat32, ncclSum, comm_, stream), "ncclAllReduce",
           deadline);
      return std::vector<Tensor>{token};
    });
  }

  std::shared_ptr<Work> run_send(const Tensor& tensor, int dst, int tag, milliseconds timeout) override {
    return run_batch({{P2POp::Kind::send, tensor, dst, tag}}, timeout);
  }

  std::shared_ptr<Work> run_recv(const Tensor& tensor, int src, int tag, milliseconds timeout) override {
    return run_batch({{P2POp::Kind::recv, tensor, src, tag}}, timeout);
  }

  // Every send and receive of the batch in one NCCL group, so they progress together.
  std::shared_ptr<Work> run_batch(const std::vector<P2POp>& ops, milliseconds timeout) override {
    std::string what;
    std::vector<int> peers;
    std::vector<Tensor> tensors;
    for (const P2POp& op : ops) {
      const bool send = op.kind == P2POp::Kind::send;
      what += (what.empty() ? "" : ", ") + std::string(send ? "send to rank " : "recv from rank ") + std::to_string(op.peer) +
              " (" + tensor_text(op.tensor) + ")";
      if (std::find(peers.begin(), peers.end(), op.peer) == peers.end()) peers.push_back(op.peer);
      tensors.push_back(op.tensor);
    }
    std::string silent = "rank(s) ";
    for (size_t i = 0; i < peers.size(); ++i) silent += (i ? ", " : "") + std::to_string(peers[i]);
    silent += " did not answer";
    const std::string description = rank_text() + ": " + what;
    return launch(description, timeout, [silent] { return silent; }, std::move(tensors),
                  [this, ops](cudaStream_t stream, clock::time_point deadline) {
                    std::vector<Tensor> buffers;
                    call(ncclGroupStart(), "ncclGroupStart", deadline);
                    for (const P2POp& op : ops) {
                      Tensor buffer = staged(op.tensor);
                      buffers.push_back(buffer);
                      if (buffer.numel() == 0) continue;
                      if (op.kind == P2POp::Kind::send)
                        call(ncclSend(buffer.raw_data(), nbytes(buffer), ncclUint8, op.peer, comm_, stream), "ncclSend", deadline);
                      else
                        call(ncclRecv(buffer.raw_data(), nbytes(buffer), ncclUint8, op.peer, comm_, stream), "ncclRecv", deadline);
                    }
                    call(ncclGroupEnd(), "ncclGroupEnd", deadline);
                    for (size_t i = 0; i < ops.size(); ++i)
                      if (ops[i].kind == P2POp::Kind::recv) write_back(ops[i].tensor, buffers[i]);
                    return buffers;
                  });
  }

 private:
  using Enqueue = std::function<std::vector<Tensor>(cudaStream_t, clock::time_point)>;

  // Every rank records that it joined, rank 0 publishes the unique id through the store, and the
  // non-blocking communicator forms within the timeout or is aborted, naming who did not join.
  void form_communicator(milliseconds timeout) {
    const auto deadline = clock::now() + timeout;
    const std::string where = rank_text() + ": forming the NCCL communicator on cuda:" + std::to_string(device_);
    // Keys of this group's own: a second NCCL group on the same store would otherwise read the first
    // one's unique id. Every rank forms its groups in the same order (creating one is collective), so
    // the count agrees across ranks, as c10d's per-communicator counter does.
    static std::atomic<uint64_t> groups_formed{0};
    const std::string key = "nccl/" + std::to_string(groups_formed++) + "/";
    store()->set(key + "joined/" + std::to_string(rank()), "1");
    ncclUniqueId id{};
    if (rank() == 0) {
      call(ncclGetUniqueId(&id), "ncclGetUniqueId", deadline);
      store()->set(key + "unique_id", std::string(id.internal, sizeof(id.internal)));
    } else {
      try {
        store()->wait({key + "unique_id"}, timeout);
      } catch (const DistributedError& e) {
        throw DistributedError(where + " failed: rank 0 did not publish the unique id (" + e.what() + ")");
      }
      const std::string value = store()->get(key + "unique_id");
      if (value.size() != sizeof(id.internal))
        throw DistributedError(where + " failed: the store's unique id has " + std::to_string(value.size()) +
                               " bytes, expected " + std::to_string(sizeof(id.internal)));
      std::memcpy(id.internal, value.data(), sizeof(id.internal));
    }
    cuda::DeviceGuard device(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every wait below is ours, bounded by the timeout
    try {
      wait_ready(ncclCommInitRankConfig(&comm_, size(), id, rank(), &config), "ncclCommInitRankConfig", deadline);
    } catch (const DistributedError& e) {
      std::vector<std::string> absent;
      for (int r = 0; r < size(); ++r)
        if (!store()->check({key + "joined/" + std::to_string(r)})) absent.push_back(std::to_string(r));
      if (comm_) release_comm_locked(ncclCommAbort, "ncclCommAbort");
      std::string names;
      for (const auto& a : absent) names += (names.empty() ? "" : ", ") + a;
      throw DistributedError(where + " failed within " + std::to_string(timeout.count()) + " ms: " +
                             (absent.empty() ? std::string("every rank joined") : "rank(s) " + names + " did not join") +
                             " (" + e.what() + ")");
    }
  }

  // Destroys or aborts the communicator. Either can fail (a driver error) where nothing is left to
  // raise to (a destructor, a failure being reported): the failure is said on stderr.
  void release_comm_locked(ncclResult_t (*release)(ncclComm_t), const char* name) {
    const ncclResult_t result = release(comm_);
    if (result != ncclSuccess)
      std::fprintf(stderr, "ember: %s: %s failed: %s\n", rank_text().c_str(), name, nccl_text(result, nullptr).c_str());
    comm_ = nullptr;
  }

  // Raises for a failed NCCL call; waits out ncclInProgress (a non-blocking communicator still
  // working on the call) until the deadline.
  void call(ncclResult_t result, const char* name, clock::time_point deadline) {
    if (result == ncclSuccess) return;
    if (result != ncclInProgress) throw DistributedError(std::string(name) + " failed: " + nccl_text(result, comm_));
    wait_ready(result, name, deadline);
  }

  void wait_ready(ncclResult_t result, const char* name, clock::time_point deadline) {
    while (result == ncclInProgress) {
      if (clock::now() >= deadline) throw DistributedError(std::string(name) + " still in progress at the timeout");
      std::this_thread::sleep_for(kPollInterval);
      ncclCommGetAsyncError(comm_, &result);
    }
    if (result != ncclSuccess) throw DistributedError(std::string(name) + " failed: " + nccl_text(result, comm_));
  }

  // A collective: the debug check first (on this thread, through the store), then launch.
  std::shared_ptr<Work> launch_collective(const Collective& c, std::vector<Tensor> tensors, Enqueue enqueue) {
    if (debug()) {
      try {
        check_same_collective(c);
      } catch (const CollectiveMismatchError&) {
        throw;  // every rank sees it and skips the collective: the group still works
      } catch (const DistributedError& e) {
        std::lock_guard lock(mutex_);
        break_group_locked(e.what());  // a rank did not come: the others must not wait for it again
        throw;
      }
    }
    return launch(describe(c), c.timeout, [this, c] { return unanswered_peers(c); }, std::move(tensors), std::move(enqueue));
  }

  // Queues an operation on the group's stream after the caller's current stream, and returns its Work.
  std::shared_ptr<Work> launch(std::string description, milliseconds timeout, std::function<std::string()> silent_peers,
                               std::vector<Tensor> tensors, Enqueue enqueue) {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < in_flight_.size();)  // settle what finished meanwhile (and what timed out)
      if (!settle_locked(*in_flight_[i])) ++i;
    if (!broken_.empty()) throw DistributedError(description + ": the group is broken by an earlier failure: " + broken_);
    auto work = std::make_shared<NcclWork>(std::move(description), *this, timeout, std::move(silent_peers));
    try {
      cuda::DeviceGuard device(device_);
      cuda::Event ready(false);
      ready.record(device_);  // the caller's current stream: what produced the inputs
      stream_.wait(ready);
      cuda::StreamGuard on_group_stream(stream_);  // staging copies and allocations run on the group's stream
      for (Tensor& t : enqueue(static_cast<cudaStream_t>(stream_.handle()), clock::now() + timeout)) tensors.push_back(std::move(t));
      work->done_.record(stream_);
    } catch (const Error& e) {
      throw DistributedError(fail_locked(*work, e.what()));
    }
    work->tensors_ = std::move(tensors);
    work->issued_ = clock::now();
    in_flight_.push_back(work);
    return work;
  }

  bool settle_locked(NcclWork& work) {
    if (work.Work::is_completed()) return true;
    if (!broken_.empty()) {
      forget_locked(work);
      work.finish(std::make_exception_ptr(DistributedError(work.description() + ": the group is broken by an earlier failure: " + broken_)));
      return true;
    }
    try {
      if (work.done_.query()) {
        work.tensors_.clear();  // the GPU is done with them: their memory may be reused
        forget_locked(work);
        work.finish();
        return true;
      }
    } catch (const Error& e) {
      fail_locked(work, e.what());
      return true;
    }
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      fail_locked(work, "NCCL reported " + nccl_text(state, comm_));
      return true;
    }
    if (clock::now() - work.issued_ > work.timeout_) {
      fail_locked(work, "not completed within the timeout");
      return true;
    }
    return false;
  }

  // Fails work with a message naming the peers that did not answer, breaks the group and returns
  // the message. Its tensors stay referenced by the failed Work: the aborted kernels released them.
  std::string fail_locked(NcclWork& work, const std::string& cause) {
    const std::string message = work.description() + " failed (timeout " + std::to_string(work.timeout_.count()) +
                                " ms): " + work.silent_peers_() + " (" + cause + ")";
    break_group_locked(message);
    forget_locked(work);
    work.finish(std::make_exception_ptr(DistributedError(message)));
    return message;
  }

  // Aborts the communicator (its kernels stop, peers waiting on this rank fail at once) and fails
  // every operation still in flight.
  void break_group_locked(const std::string& reason) {
    if (!broken_.empty()) return;
    broken_ = reason;
    if (comm_) release_comm_locked(ncclCommAbort, "ncclCommAbort");
    for (const auto& w : in_flight_)
      w->finish(std::make_exception_ptr(DistributedError(w->description() + ": the group is broken by an earlier failure: " + reason)));
    in_flight_.clear();
  }

  void forget_locked(const NcclWork& work) {
    std::erase_if(in_flight_, [&](const std::shared_ptr<NcclWork>& w) { return w.get() == &work; });
  }

  const int device_;
  cuda::Stream stream_;     // where every operation of the group runs
  ncclComm_t comm_ = nullptr;
  std::mutex mutex_;        // guards comm_'s calls, in_flight_ and broken_
  std::vector<std::shared_ptr<NcclWork>> in_flight_;
  std::string broken_;      // why the group is broken; empty while it works
};

void NcclWork::wait(std::optional<milliseconds> timeout) {
  if (capture::active()) capture::check_host_wait("Work::wait on " + description());
  count_host_sync("Work::wait");
  const auto deadline = timeout ? clock::now() + *timeout : clock::time_point::max();
  while (!Work::is_completed() && !group_.settle(*this)) {
    if (clock::now() >= deadline)
      throw DistributedError(description() + ": not completed within the wait's " + std::to_string(timeout->count()) +
                             " ms (the operation goes on under its own timeout)");
    std::this_thread::sleep_for(kPollInterval);
  }
  Work::wait();
}

bool NcclWork::is_completed() const {
  return Work::is_completed() || group_.settle(const_cast<NcclWork&>(*this));
}

}  // namespace

bool has_nccl() { return true; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<Store> store, int rank, int size,
                                                      const NcclOptions& options) {
  return std::make_shared<NcclProcessGroup>(std::move(store), rank, size, options);
}

}  // namespace ember::dist

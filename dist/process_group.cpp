#include "dist/process_group.h"

#include <thread>

#include "tensor/capture.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"

namespace ember::dist {

namespace {

// How long a failed rank waits for the others to report the same failure before naming those
// that did not: short, because a failing rank closes its connections and its peers fail at once.
constexpr milliseconds kFailureGrace(1000);
constexpr milliseconds kFailurePoll(20);

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

void check_defined(const Tensor& t, const char* op, const char* which) {
  if (!t.defined()) throw ValueError(std::string(op) + ": the " + which + (*which ? " " : "") + "tensor is undefined");
}

void check_reducible(const Tensor& t, ReduceOp op, const char* name) {
  if (op == ReduceOp::avg && !is_floating(t.dtype()))
    throw DTypeError(std::string(name) + ": avg needs a floating dtype, got " + dtype_name(t.dtype()) +
                     " (reduce with sum and divide)");
}

void check_same_dtype(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name, const char* op) {
  if (a.dtype() != b.dtype())
    throw DTypeError(std::string(op) + ": " + a_name + " is " + dtype_name(a.dtype()) + " but " + b_name + " is " +
                     dtype_name(b.dtype()));
}

}  // namespace

std::string tensor_text(const Tensor& t) { return std::string(dtype_name(t.dtype())) + " " + to_string(t.shape()); }

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

ProcessGroup::ProcessGroup(std::shared_ptr<Store> store, int rank, int size, milliseconds timeout, bool debug)
    : store_(std::move(store)), rank_(rank), size_(size), debug_(debug), timeout_(timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    throw ValueError("ProcessGroup: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(size) + ")");
  set_timeout(timeout);
}

void ProcessGroup::set_timeout(milliseconds timeout) {
  if (timeout.count() <= 0)
    throw ValueError("ProcessGroup::set_timeout: the timeout must be positive, got " + std::to_string(timeout.count()) + " ms");
  timeout_ = timeout;
}

ProcessGroup::Collective ProcessGroup::next_collective(const char* name, const std::string& signature,
                                                       const std::string& tensor, const CollectiveOptions& options) {
  const milliseconds t = options.timeout.value_or(timeout());
  if (t.count() <= 0) throw ValueError(std::string(name) + ": the timeout must be positive, got " + std::to_string(t.count()) + " ms");
  return {name, ++issued_, std::string(name) + " " + signature, tensor, t};
}

void ProcessGroup::check_sharded(const char* op, const Tensor& whole, const char* whole_name, const Tensor& part,
                                 const char* part_name) const {
  for (const auto& [t, name] : {std::pair{&whole, whole_name}, std::pair{&part, part_name}}) {
    check_defined(*t, op, name);
    check_device(*t, op);
  }
  check_same_dtype(whole, whole_name, part, part_name, op);
  if (whole.numel() != part.numel() * size_)
    throw ShapeError(std::string(op) + ": " + whole_name + " " + to_string(whole.shape()) + " has " +
                     std::to_string(whole.numel()) + " elements, expected world size " + std::to_string(size_) + " x " +
                     part_name + " " + to_string(part.shape()) + " = " + std::to_string(part.numel() * size_));
}

void ProcessGroup::check_transfer(const Tensor& tensor, int peer, int tag, const char* op, const char* role) const {
  check_defined(tensor, op, "");
  check_device(tensor, op);
  if (tag < 0) throw ValueError(std::string(op) + ": tag " + std::to_string(tag) + " is negative");
  if (peer < 0 || peer >= size_)
    throw IndexError(std::string(op) + ": " + role + " " + std::to_string(peer) + " is not a rank of this group of " +
                     std::to_string(size_));
  if (peer == rank_) throw ValueError(std::string(op) + ": " + role + " " + std::to_string(peer) + " is this rank itself");
}

// A collective inside a captured step: on a GPU its events and the group's stream would join the
// capture unjoined (cudaErrorCapturedEvent, then an aborted communicator); on the CPU the peers would
// not replay with it. Refused before anything is queued.
void ProcessGroup::refuse_in_capture(const char* op) const {
  if (capture::active())
    capture::refuse(backend_name() + " " + op + " inside a captured step: collectives are not captured (run the step "
                    "eagerly: no --compile with a process group)");
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& tensor, ReduceOp op, const CollectiveOptions& options) {
  refuse_in_capture("all_reduce");
  const nvtx::Range range(backend_name(), ":all_reduce");  // profiler timelines: "nccl:all_reduce"
  check_defined(tensor, "all_reduce", "input");
  check_device(tensor, "all_reduce");
  check_reducible(tensor, op, "all_reduce");
  const std::string t = tensor_text(tensor);
  return run_all_reduce(tensor, op, next_collective("all_reduce", t + " " + reduce_op_name(op), t, options));
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(const Tensor& output, const Tensor& input, ReduceOp op,
                                                         const CollectiveOptions& options) {
  refuse_in_capture("reduce_scatter");
  const nvtx::Range range(backend_name(), ":reduce_scatter");
  check_sharded("reduce_scatter", input, "input", output, "output");
  check_reducible(input, op, "reduce_scatter");
  const std::string t = tensor_text(input);
  return run_reduce_scatter(output, input, op,
                            next_collective("reduce_scatter", t + " -> " + to_string(output.shape()) + " " + reduce_op_name(op), t, options));
}

std::shared_ptr<Work> ProcessGroup::all_gather_async(const Tensor& output, const Tensor& input,
                                                     const CollectiveOptions& options) {
  refuse_in_capture("all_gather");
  const nvtx::Range range(backend_name(), ":all_gather");
  check_sharded("all_gather", output, "output", input, "input");
  const std::string t = tensor_text(input);
  return run_all_gather(output, input, next_collective("all_gather", t + " -> " + to_string(output.shape()), t, options));
}

std::shared_ptr<Work> ProcessGroup::all_gather_async(const std::vector<Tensor>& outputs, const Tensor& input,
                                                     const CollectiveOptions& options) {
  refuse_in_capture("all_gather");
  const nvtx::Range range(backend_name(), ":all_gather");
  check_defined(input, "all_gather", "input");
  check_device(input, "all_gather");
  if (static_cast<int>(outputs.size()) != size_)
    throw ValueError("all_gather: " + std::to_string(outputs.size()) + " output tensors for a group of " +
                     std::to_string(size_) + " ranks");
  std::string counts;
  for (int r = 0; r < size_; ++r) {
    check_defined(outputs[r], "all_gather", "output");
    check_device(outputs[r], "all_gather");
    check_same_dtype(outputs[r], "output", input, "input", "all_gather");
    counts += (r ? ", " : "") + std::to_string(outputs[r].numel());
  }
  if (outputs[rank_].numel() != input.numel())
    throw ShapeError("all_gather: outputs[" + std::to_string(rank_) + "] " + to_string(outputs[rank_].shape()) +
                     " (this rank's slot) has " + std::to_string(outputs[rank_].numel()) + " elements but the input " +
                     to_string(input.shape()) + " has " + std::to_string(input.numel()));
  return run_all_gather_list(outputs, input,
                             next_collective("all_gather", std::string(dtype_name(input.dtype())) + " -> [" + counts + "] elements",
                                        tensor_text(input), options));
}

std::shared_ptr<Work> ProcessGroup::broadcast_async(const Tensor& tensor, int root, const CollectiveOptions& options) {
  refuse_in_capture("broadcast");
  const nvtx::Range range(backend_name(), ":broadcast");
  check_defined(tensor, "broadcast", "input");
  check_device(tensor, "broadcast");
  if (root < 0 || root >= size_)
    throw IndexError("broadcast: root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(size_));
  const std::string t = tensor_text(tensor);
  return run_broadcast(tensor, root, next_collective("broadcast", t + " from " + std::to_string(root), t, options));
}

std::shared_ptr<Work> ProcessGroup::barrier_async(const CollectiveOptions& options) {
  refuse_in_capture("barrier");
  const nvtx::Range range(backend_name(), ":barrier");
  return run_barrier(next_collective("barrier", "", "no tensor", options));
}

std::shared_ptr<Work> ProcessGroup::send_async(const Tensor& tensor, int dst, int tag, const CollectiveOptions& options) {
  refuse_in_capture("send");
  const nvtx::Range range(backend_name(), ":send");
  check_transfer(tensor, dst, tag, "send", "dst");
  return run_send(tensor, dst, tag, options.timeout.value_or(timeout()));
}

std::shared_ptr<Work> ProcessGroup::recv_async(const Tensor& tensor, int src, int tag, const CollectiveOptions& options) {
  refuse_in_capture("recv");
  const nvtx::Range range(backend_name(), ":recv");
  check_transfer(tensor, src, tag, "recv", "src");
  return run_recv(tensor, src, tag, options.timeout.value_or(timeout()));
}

std::shared_ptr<Work> ProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops, const CollectiveOptions& options) {
  refuse_in_capture("batch_isend_irecv");
  const nvtx::Range range(backend_name(), ":batch_isend_irecv");
  for (const P2POp& op : ops) {
    const bool send = op.kind == P2POp::Kind::send;
    check_transfer(op.tensor, op.peer, op.tag, send ? "batch_isend_irecv: send" : "batch_isend_irecv: recv",
                   send ? "dst" : "src");
  }
  return run_batch(ops, options.timeout.value_or(timeout()));
}

std::shared_ptr<Work> ProcessGroup::run_batch(const std::vector<P2POp>& ops, milliseconds timeout) {
  std::vector<std::shared_ptr<Work>> parts;
  std::string what;
  for (const P2POp& op : ops) {
    const bool send = op.kind == P2POp::Kind::send;
    parts.push_back(send ? run_send(op.tensor, op.peer, op.tag, timeout) : run_recv(op.tensor, op.peer, op.tag, timeout));
    what += (what.empty() ? "" : ", ") + std::string(send ? "send to " : "recv from ") + std::to_string(op.peer);
  }
  return std::make_shared<WorkList>(rank_text() + ": batch (" + what + ")",
                                    std::move(parts));
}

std::string ProcessGroup::describe(const Collective& c) const {
  return rank_text() + ": " + c.name + " #" +
         std::to_string(c.sequence) + " of " + c.tensor;
}

void ProcessGroup::check_same_collective(const Collective& c) {
  const std::string prefix = "collective/" + std::to_string(c.sequence) + "/";
  store_->set(prefix + std::to_string(rank_), c.signature);
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    store_->wait(keys, c.timeout);
  } catch (const DistributedError&) {
    std::vector<int> absent;
    for (int r = 0; r < size_; ++r)
      if (!store_->check({keys[r]})) absent.push_back(r);
    throw DistributedError(describe(c) + ": rank(s) " + ranks_text(absent) + " did not issue collective #" +
                           std::to_string(c.sequence) + " within " + std::to_string(c.timeout.count()) +
                           " ms (debug check through the " + store_->describe() + ")");
  }
  // Every rank set its key for this collective, so every rank is done reading the previous one's:
  // this rank's key of it can go, and the store holds at most two per rank, however long the job.
  if (c.sequence > 1) store_->delete_key("collective/" + std::to_string(c.sequence - 1) + "/" + std::to_string(rank_));
  std::string differ;
  for (int r = 0; r < size_; ++r) {
    const std::string theirs = store_->get(keys[r]);
    if (theirs != c.signature) differ += "; rank " + std::to_string(r) + " issued " + theirs;
  }
  if (!differ.empty())
    throw CollectiveMismatchError(describe(c) + ": the ranks issued different collectives as #" + std::to_string(c.sequence) +
                           ": rank " + std::to_string(rank_) + " issued " + c.signature + differ);
}

std::string ProcessGroup::unanswered_peers(const Collective& c) {
  try {
    store_->set("failed/" + std::to_string(rank_), std::to_string(c.sequence));
    const auto deadline = std::chrono::steady_clock::now() + std::min(c.timeout, kFailureGrace);
    std::vector<int> silent;
    for (;;) {
      silent.clear();
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && !store_->check({"failed/" + std::to_string(r)})) silent.push_back(r);
      if (silent.empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(kFailurePoll);
    }
    if (silent.empty()) return "every peer reported the failure too";
    return "rank(s) " + ranks_text(silent) + " did not answer";
  } catch (const Error& e) {
    return std::string("the store could not tell which peers failed (") + e.what() + ")";
  }
}

}  // namespace ember::dist

/// @file
/// ProcessGroup: the ranks of a job and the collectives among them (all_reduce, reduce_scatter,
/// all_gather, broadcast, barrier) and point-to-point send/recv. This base checks arguments, numbers
/// the collectives and, in debug mode, checks through the store that every rank issued the same
/// one; a backend (Gloo for CPU tensors, NCCL for CUDA tensors) runs them.
///
/// Every form has an async variant returning a Work and a sync one (async, then wait). Semantics:
/// - Collectives run in issue order, one at a time: issue them in the same order on every rank.
///   send/recv are posted at once by the calling thread and may overlap collectives and each other
///   (a ring over send/recv posts a send and a recv, then waits for both).
/// - Tensors of any dtype. A non-contiguous tensor is copied to a contiguous buffer, and the result
///   copied back into it. Sums, averages, max and min of f16 and bf16 are computed in f32 and rounded
///   to 16 bits once, at the end (the buffer on the wire is f32).
/// - Fail fast: each collective is bounded by the group's timeout (10 min by default) or the call's
///   own. A failure (timeout, dead peer) raises DistributedError naming this rank, the collective,
///   its number, the tensor and the peers that did not answer; the group is then broken and every
///   later operation raises: make a new group (as after an NCCL abort).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/error.h"
#include "dist/store.h"
#include "dist/work.h"
#include "tensor/tensor.h"

namespace ember::dist {

/// How a collective combines the ranks' tensors (avg: the sum divided by size(), floating dtypes only).
enum class ReduceOp { sum, avg, max, min };
const char* reduce_op_name(ReduceOp op);  ///< "sum", "avg", ...
/// How messages name a tensor: "float32 (4, 3)".
std::string tensor_text(const Tensor& t);

/// One transfer of a batch_isend_irecv.
struct P2POp {
  /// A send or a receive.
  enum class Kind { send, recv };
  Kind kind;      ///< send or recv
  Tensor tensor;  ///< send: the values; recv: where they land (same element count and dtype as the send)
  int peer;       ///< send: the destination rank; recv: the source
  int tag = 0;    ///< matches a send with its receive (Gloo; NCCL matches in posting order)
};

/// Per-call settings of an operation.
struct CollectiveOptions {
  std::optional<milliseconds> timeout;  ///< unset: the group's timeout()
};

/// The ranks of a job and their collectives (torch.distributed.ProcessGroup; see the file's
/// description). make_gloo_process_group and make_nccl_process_group, or init_process_group, make one.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }  ///< This process's rank, in [0, size()).
  int size() const { return size_; }  ///< The number of ranks.
  /// How messages name this rank: "rank 1/4".
  std::string rank_text() const { return "rank " + std::to_string(rank_) + "/" + std::to_string(size_); }
  milliseconds timeout() const { return timeout_.load(); }  ///< The bound of each collective that sets none of its own.
  void set_timeout(milliseconds timeout);  ///< Sets timeout(); ValueError unless positive.
  bool debug() const { return debug_; }  ///< Whether every collective's signature is checked through the store.
  virtual std::string backend_name() const = 0;  ///< "gloo", "nccl"
  /// Where the group's tensors live: the CPU for Gloo, this rank's GPU for NCCL.
  virtual Device device() const = 0;
  /// The store the group rendezvoused through (its keys under the group's prefix).
  const std::shared_ptr<Store>& store() const { return store_; }

  /// Reduces tensor across ranks in place; every rank gets the result. avg needs a floating dtype.
  std::shared_ptr<Work> all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::sum,
                                         const CollectiveOptions& options = {});
  /// Reduces input (size() * output.numel() elements) across ranks; rank r keeps the r-th slice of
  /// the flattened result in output, as torch's reduce_scatter_tensor.
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::sum,
                                             const CollectiveOptions& options = {});
  /// Gathers every rank's input into output (size() * input.numel() elements, rank order).
  std::shared_ptr<Work> all_gather_async(const Tensor& output, const Tensor& input, const CollectiveOptions& options = {});
  /// Gathers rank r's input into outputs[r]; sizes may differ between ranks (outputs[rank()] has
  /// input's element count, and every rank passes the same list of counts).
  std::shared_ptr<Work> all_gather_async(const std::vector<Tensor>& outputs, const Tensor& input,
                                         const CollectiveOptions& options = {});
  /// Copies root's tensor into tensor on every rank.
  std::shared_ptr<Work> broadcast_async(const Tensor& tensor, int root, const CollectiveOptions& options = {});
  /// Sends tensor to rank dst; the matching recv on dst names this rank and the same tag.
  std::shared_ptr<Work> send_async(const Tensor& tensor, int dst, int tag = 0, const CollectiveOptions& options = {});
  /// Receives into tensor (same element count and dtype as the send) from rank src.
  std::shared_ptr<Work> recv_async(const Tensor& tensor, int src, int tag = 0, const CollectiveOptions& options = {});
  /// Posts every send and receive of ops together and returns one Work for all of them
  /// (torch.distributed.batch_isend_irecv). A send and a receive that wait for each other, as the two
  /// directions of an exchange between neighbours, belong in one batch: NCCL runs a transfer only
  /// once its peer posted the matching one, and runs separately posted ones in issue order.
  std::shared_ptr<Work> batch_isend_irecv(const std::vector<P2POp>& ops, const CollectiveOptions& options = {});
  /// Returns once every rank reached its barrier.
  std::shared_ptr<Work> barrier_async(const CollectiveOptions& options = {});

  /// all_reduce_async, then wait().
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum, const CollectiveOptions& options = {}) {
    all_reduce_async(tensor, op, options)->wait();
  }
  /// reduce_scatter_async, then wait().
  void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::sum,
                      const CollectiveOptions& options = {}) {
    reduce_scatter_async(output, input, op, options)->wait();
  }
  /// all_gather_async, then wait().
  void all_gather(const Tensor& output, const Tensor& input, const CollectiveOptions& options = {}) {
    all_gather_async(output, input, options)->wait();
  }
  /// all_gather_async of a list, then wait().
  void all_gather(const std::vector<Tensor>& outputs, const Tensor& input, const CollectiveOptions& options = {}) {
    all_gather_async(outputs, input, options)->wait();
  }
  /// broadcast_async, then wait().
  void broadcast(const Tensor& tensor, int root, const CollectiveOptions& options = {}) {
    broadcast_async(tensor, root, options)->wait();
  }
  /// send_async, then wait().
  void send(const Tensor& tensor, int dst, int tag = 0, const CollectiveOptions& options = {}) {
    send_async(tensor, dst, tag, options)->wait();
  }
  /// recv_async, then wait().
  void recv(const Tensor& tensor, int src, int tag = 0, const CollectiveOptions& options = {}) {
    recv_async(tensor, src, tag, options)->wait();
  }
  /// barrier_async, then wait().
  void barrier(const CollectiveOptions& options = {}) { barrier_async(options)->wait(); }

 protected:
  /// What a backend receives with each collective.
  struct Collective {
    std::string name;       ///< "all_reduce"
    uint64_t sequence;      ///< 1 for the group's first collective
    std::string signature;  ///< what every rank must agree on: "all_reduce float32 (4, 3) sum"
    std::string tensor;     ///< this rank's tensor, for messages: "float32 (4, 3)"
    milliseconds timeout;   ///< this call's bound
  };

  /// A group of `size` ranks meeting through `store`; ValueError for a rank outside [0, size) or a
  /// timeout that is not positive.
  ProcessGroup(std::shared_ptr<Store> store, int rank, int size, milliseconds timeout, bool debug);

  /// Runs a checked all_reduce.
  virtual std::shared_ptr<Work> run_all_reduce(const Tensor& tensor, ReduceOp op, const Collective& c) = 0;
  /// Runs a checked reduce_scatter.
  virtual std::shared_ptr<Work> run_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op,
                                                   const Collective& c) = 0;
  /// Runs a checked all_gather into one tensor.
  virtual std::shared_ptr<Work> run_all_gather(const Tensor& output, const Tensor& input, const Collective& c) = 0;
  /// Runs a checked all_gather into a list.
  virtual std::shared_ptr<Work> run_all_gather_list(const std::vector<Tensor>& outputs, const Tensor& input,
                                                    const Collective& c) = 0;
  /// Runs a checked broadcast.
  virtual std::shared_ptr<Work> run_broadcast(const Tensor& tensor, int root, const Collective& c) = 0;
  /// Runs a barrier.
  virtual std::shared_ptr<Work> run_barrier(const Collective& c) = 0;
  /// Posts a checked send.
  virtual std::shared_ptr<Work> run_send(const Tensor& tensor, int dst, int tag, milliseconds timeout) = 0;
  /// Posts a checked receive.
  virtual std::shared_ptr<Work> run_recv(const Tensor& tensor, int src, int tag, milliseconds timeout) = 0;
  /// The ops of a checked batch; by default each is posted through run_send / run_recv.
  virtual std::shared_ptr<Work> run_batch(const std::vector<P2POp>& ops, milliseconds timeout);
  /// A backend's check that it can serve the tensor's device (DeviceError naming it otherwise).
  virtual void check_device(const Tensor& tensor, const char* op) const = 0;
  /// CaptureError when the calling thread captures a step: collectives are not captured.
  void refuse_in_capture(const char* op) const;

  /// "rank 1/4: all_reduce #7 of float32 (4, 3)": how messages name a collective.
  std::string describe(const Collective& c) const;
  /// Debug mode: records c's signature in the store; raises CollectiveMismatchError naming the ranks
  /// that issued another collective as number c.sequence, DistributedError naming those that issued
  /// none within c.timeout.
  void check_same_collective(const Collective& c);
  /// After c failed on this rank: records the failure in the store and waits briefly for the other
  /// ranks to record theirs; returns "rank(s) 2, 3 did not answer", or what the store could not say.
  std::string unanswered_peers(const Collective& c);

 private:
  Collective next_collective(const char* name, const std::string& signature, const std::string& tensor,
                             const CollectiveOptions& options);
  // send/recv's tensor, tag and peer (role: "dst" or "src"), which must be another rank of the group.
  void check_transfer(const Tensor& tensor, int peer, int tag, const char* op, const char* role) const;
  // whole holds size() x part's elements, of part's dtype, on a device the backend serves.
  void check_sharded(const char* op, const Tensor& whole, const char* whole_name, const Tensor& part,
                     const char* part_name) const;

  std::shared_ptr<Store> store_;
  const int rank_, size_;
  const bool debug_;
  std::atomic<milliseconds> timeout_;
  std::atomic<uint64_t> issued_{0};
};

}  // namespace ember::dist

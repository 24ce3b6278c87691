#include "dist/ring_all_reduce.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensor/ops.h"
#include "tensor/stored_add.h"

namespace ember::dist {

namespace {

// The ring's send/recv tag, apart from the small tags programs give their own transfers. Messages
// between two ranks under one tag arrive in the order they were sent, so one tag serves every slice.
constexpr int kRingTag = 0x52494e47;  // "RING"

int ring_mod(int a, int n) { return ((a % n) + n) % n; }

// Chunk c of n elements split among `ranks`: n / ranks each, the first n % ranks one longer.
struct Span {
  int64_t begin, length;
};
Span chunk_span(int64_t n, int ranks, int c) {
  const int64_t base = n / ranks, extra = n % ranks;
  return {c * base + std::min<int64_t>(c, extra), base + (c < extra ? 1 : 0)};
}

// acc[i] = incoming[i] + acc[i]: the partial sum that arrived, then this rank's values (integers wrap).
template <class T>
void accumulate(T* acc, const T* incoming, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = add_stored(incoming[i], acc[i]);
}

// One run of the ring on flat contiguous buffers: `work` (the working dtype: f32 for 16-bit
// tensors) is reduced in place; `out` (the tensor's dtype; `work` itself unless 16-bit) receives
// the finished chunks.
class Ring {
 public:
  Ring(ProcessGroup& group, Tensor work, Tensor out, ReduceOp op, const RingOptions& options, std::string what)
      : group_(group), rank_(group.rank()), ranks_(group.size()), work_(std::move(work)), out_(std::move(out)),
        op_(op), options_(options), what_(std::move(what)) {
    const int64_t slice = std::max<int64_t>(1, options.slice_bytes / dtype_size(work_.dtype()));
    const int64_t longest = chunk_span(work_.numel(), ranks_, 0).length;
    slice_elements_ = std::min(slice, longest);
    for (auto& s : staging_) s = empty({slice_elements_}, work_.dtype());
  }

  void run() {
    // The 2(N-1) steps as one list of received slices, so the pipeline runs across step and phase
    // boundaries: step t receives chunk (r-t-1); steps 0..N-2 reduce it, steps N-1.. copy it.
    std::vector<Slice> received;
    for (int t = 0; t < 2 * (ranks_ - 1); ++t) append_slices(received, t, ring_mod(rank_ - t - 1, ranks_));
    // Step 0 sends this rank's own chunk r; every later send forwards a slice just received.
    std::vector<Slice> own;
    append_slices(own, 0, rank_);
    for (const Slice& s : own) post_send(s);

    std::vector<std::shared_ptr<Work>> recvs(received.size());
    if (!received.empty()) recvs[0] = post_recv(received[0], 0);
    for (size_t i = 0; i < received.size(); ++i) {
      const Slice& s = received[i];
      // Post the next receive first: the network fills it while this slice is reduced.
      if (i + 1 < received.size()) recvs[i + 1] = post_recv(received[i + 1], i + 1);
      guarded(s, "recv from rank " + std::to_string(prev()), [&] { recvs[i]->wait(); });
      recvs[i].reset();
      if (reducing(s.step)) {
        visit(work_.dtype(), [&]<class T>() {
          if constexpr (!is_reduced_float_v<T> && !std::is_same_v<T, bool>)  // widened to f32; refused
            accumulate(work_.data<T>() + s.begin, staging_[i % 2].data<T>(), s.length);
        });
        if (s.step == ranks_ - 2) finish(s);  // the last reduce step: this rank's own chunk is complete
      }
      if (s.step < 2 * ranks_ - 3) post_send({s.step + 1, s.chunk, s.slice, s.slices, s.begin, s.length});
    }
    wait_sends();
  }

 private:
  // Slice `slice` of `slices` of chunk `chunk` at ring step `step`: elements [begin, begin + length).
  struct Slice {
    int step, chunk;
    int64_t slice, slices, begin, length;
  };
  struct PendingSend {
    Slice slice;
    std::shared_ptr<Work> work;
  };

  int next() const { return (rank_ + 1) % ranks_; }
  int prev() const { return (rank_ + ranks_ - 1) % ranks_; }
  bool reducing(int step) const { return step < ranks_ - 1; }

  void append_slices(std::vector<Slice>& list, int step, int chunk) const {
    const Span span = chunk_span(work_.numel(), ranks_, chunk);
    const int64_t slices = (span.length + slice_elements_ - 1) / slice_elements_;  // 0 for an empty chunk
    for (int64_t k = 0; k < slices; ++k) {
      const int64_t begin = span.begin + k * slice_elements_;
      list.push_back({step, chunk, k, slices, begin, std::min(slice_elements_, span.begin + span.length - begin)});
    }
  }

  // "reduce-scatter step 2/3, slice 1/4 of chunk 0 (elements [8, 12))"
  std::string where(const Slice& s) const {
    const bool reduce = reducing(s.step);
    const int step = reduce ? s.step + 1 : s.step - (ranks_ - 1) + 1;
    return std::string(reduce ? "reduce-scatter" : "all-gather") + " step " + std::to_string(step) + "/" +
           std::to_string(ranks_ - 1) + ", slice " + std::to_string(s.slice + 1) + "/" + std::to_string(s.slices) +
           " of chunk " + std::to_string(s.chunk) + " (elements [" + std::to_string(s.begin) + ", " +
           std::to_string(s.begin + s.length) + "))";
  }

  // Runs f, naming the ring step in a DistributedError it raises.
  template <class F>
  void guarded(const Slice& s, const std::string& transfer, F&& f) const {
    try {
      f();
    } catch (const DistributedError& e) {
      throw DistributedError(what_ + ": " + where(s) + ", " + transfer + ": " + e.what());
    }
  }

  // Reduce steps receive partial sums into a staging slice; all-gather steps straight into place.
  std::shared_ptr<Work> post_recv(const Slice& s, size_t index) {
    // The first all-gather receive overwrites chunks this rank sent during the reduce-scatter
    // (from the same memory when work_ is out_): those sends must be done. Only those: an all-gather
    // send completes once the next rank posts its receive, which it may do only after its own wait here.
    if (!reducing(s.step) && !reduce_sends_done_) {
      wait_sends(true);
      reduce_sends_done_ = true;
    }
    Tensor target = reducing(s.step) ? staging_[index % 2].narrow(0, 0, s.length) : out_.narrow(0, s.begin, s.length);
    std::shared_ptr<Work> work;
    guarded(s, "posting the recv from rank " + std::to_string(prev()),
            [&] { work = group_.recv_async(target, prev(), kRingTag, options_); });
    return work;
  }

  // Reduce steps send partial sums from work_; all-gather steps finished values from out_.
  void post_send(const Slice& s) {
    const Tensor& source = reducing(s.step) ? work_ : out_;
    std::shared_ptr<Work> work;
    guarded(s, "posting the send to rank " + std::to_string(next()),
            [&] { work = group_.send_async(source.narrow(0, s.begin, s.length), next(), kRingTag, options_); });
    sends_.push_back({s, std::move(work)});
  }

  // Waits for the pending sends (those of reduce-scatter steps only, when asked) and forgets them.
  void wait_sends(bool reduce_only = false) {
    std::erase_if(sends_, [&](PendingSend& p) {
      if (reduce_only && !reducing(p.slice.step)) return false;
      guarded(p.slice, "send to rank " + std::to_string(next()), [&] { p.work->wait(); });
      return true;
    });
  }

  // This rank's chunk is summed over every rank: divide once for avg, round once to out_'s dtype.
  void finish(const Slice& s) {
    Tensor sum = work_.narrow(0, s.begin, s.length);
    if (op_ == ReduceOp::avg) div_(sum, Scalar(static_cast<double>(ranks_)));
    if (!out_.is_same(work_)) {
      Tensor target = out_.narrow(0, s.begin, s.length);
      copy_(target, sum);
    }
  }

  ProcessGroup& group_;
  const int rank_, ranks_;
  Tensor work_, out_;
  const ReduceOp op_;
  const RingOptions options_;
  const std::string what_;  // "rank 0/4: ring_all_reduce of float32 (4, 3) sum"
  int64_t slice_elements_ = 1;
  Tensor staging_[2];  // double buffer: one slice arrives while the other is reduced
  std::vector<PendingSend> sends_;
  bool reduce_sends_done_ = false;
};

}  // namespace

void ring_all_reduce(ProcessGroup& group, const Tensor& tensor, ReduceOp op, const RingOptions& options) {
  const std::string what = "rank " + std::to_string(group.rank()) + "/" + std::to_string(group.size()) +
                           ": ring_all_reduce of " + dtype_name(tensor.dtype()) + " " + to_string(tensor.shape()) +
                           " " + reduce_op_name(op);
  if (op != ReduceOp::sum && op != ReduceOp::avg)
    throw ValueError(what + ": the ring sums (sum, avg); use the group's all_reduce for " + reduce_op_name(op));
  if (tensor.dtype() == DType::boolean) throw DTypeError(what + ": bool is not summed by the ring");
  if (op == ReduceOp::avg && !is_floating(tensor.dtype()))
    throw DTypeError(what + ": avg needs a floating dtype (reduce with sum and divide)");
  if (options.slice_bytes <= 0)
    throw ValueError(what + ": slice_bytes must be positive, got " + std::to_string(options.slice_bytes));
  if (tensor.numel() == 0 || group.size() == 1) return;  // nothing to add: avg of one rank is the tensor

  // Non-contiguous tensors are reduced in a contiguous copy, copied back at the end.
  const Tensor detached = tensor.detach();
  const Tensor staged = contiguous(detached);
  Tensor out = staged.view({staged.numel()});
  Tensor work = is_reduced_float(out.dtype()) ? to(out, DType::f32) : out;
  Ring(group, work, out, op, options, what).run();
  if (!staged.is_same(detached)) {
    Tensor target = detached;
    copy_(target, staged);
  }
}

}  // namespace ember::dist

#include "dist/ring_all_reduce.h"

#include <algorithm>
#include <vector>

#include "tensor/ops.h"

namespace ember::dist {

namespace {

// The ring's send/recv tag, apart from the small tags programs give their own transfers. Messages
// between two ranks under one tag arrive in the order they were sent, so one tag serves every slice.
constexpr int kRingTag = 0x52494e47;  // "RING"

// Exchanges in flight at once: enough to keep the link busy while a slice is added.
constexpr size_t kPipelineDepth = 4;

int ring_mod(int a, int n) { return ((a % n) + n) % n; }

// Chunk c of n elements split among `ranks`: n / ranks each, the first n % ranks one longer.
struct Span {
  int64_t begin, length;
};
Span chunk_span(int64_t n, int ranks, int c) {
  const int64_t base = n / ranks, extra = n % ranks;
  return {c * base + std::min<int64_t>(c, extra), base + (c < extra ? 1 : 0)};
}

// One run of the ring on flat contiguous buffers: `work` (the working dtype: f32 for 16-bit
// tensors) is reduced in place; `out` (the tensor's dtype; `work` itself unless 16-bit) receives
// the finished chunks. The additions are tensor ops, so the ring runs wherever the group's tensors live.
class Ring {
 public:
  Ring(ProcessGroup& group, Tensor work, Tensor out, ReduceOp op, const RingOptions& options, std::string what)
      : group_(group), rank_(group.rank()), ranks_(group.size()), work_(std::move(work)), out_(std::move(out)),
        op_(op), options_(options), what_(std::move(what)) {
    const int64_t slice = std::max<int64_t>(1, options.slice_bytes / dtype_size(work_.dtype()));
    const int64_t longest = chunk_span(work_.numel(), ranks_, 0).length;
    slice_elements_ = std::min(slice, longest);
    for (auto& s : staging_) s = empty({slice_elements_}, TensorOptions(work_.dtype()).with_device(work_.device()));
  }

  // The ring as a list of exchanges: exchange i sends this rank's i-th outgoing slice to the next
  // rank and receives its i-th incoming slice from the previous one, in one batch. The next rank's
  // i-th incoming slice is this rank's i-th outgoing one, so exchange i on every rank pairs with
  // exchange i on its neighbours, and the ring cannot deadlock on any backend.
  void run() {
    // Incoming: step t brings chunk (r-t-1); steps 0..N-2 reduce it, steps N-1.. copy it into place.
    for (int t = 0; t < 2 * (ranks_ - 1); ++t) append_slices(incoming_, t, ring_mod(rank_ - t - 1, ranks_));
    // Outgoing: this rank's own chunk r at step 0, then every incoming slice but the last step's,
    // forwarded one step later once it is reduced (or, in the all-gather, once it arrived).
    append_slices(outgoing_, 0, rank_);
    own_slices_ = outgoing_.size();
    for (const Slice& s : incoming_)
      if (s.step < 2 * ranks_ - 3) outgoing_.push_back({s.step + 1, s.chunk, s.slice, s.slices, s.begin, s.length});

    // Up to kPipelineDepth exchanges in flight: exchange `done` is waited for and reduced while
    // later ones whose data is final already move.
    const size_t exchanges = std::max(incoming_.size(), outgoing_.size());
    std::vector<std::shared_ptr<Work>> posted(exchanges);
    size_t next_post = 0;
    for (size_t done = 0; done < exchanges; ++done) {
      while (next_post < exchanges && next_post < done + kPipelineDepth && can_post(next_post, done)) {
        posted[next_post] = post(next_post);
        ++next_post;
      }
      guarded(done, [&] { posted[done]->wait(); });
      posted[done].reset();
      if (done < incoming_.size() && reducing(incoming_[done].step)) reduce(done);
      if (forwards_own_receive(done)) guarded(done, [&] { post_send(done)->wait(); });
    }
  }

 private:
  // Slice `slice` of `slices` of chunk `chunk` at ring step `step`: elements [begin, begin + length).
  struct Slice {
    int step, chunk;
    int64_t slice, slices, begin, length;
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

  // Reduce steps receive partial sums into a staging slice and send from work_; all-gather steps receive straight into out_ and send from it.
  Tensor recv_target(size_t i) const {
    const Slice& s = incoming_[i];
    return reducing(s.step) ? staging_[i % kPipelineDepth].narrow(0, 0, s.length) : out_.narrow(0, s.begin, s.length);
  }
  const Tensor& send_source(const Slice& s) const { return reducing(s.step) ? work_ : out_; }

  // Whether exchange j may be posted while exchanges [done, j) are still in flight (or not yet
  // reduced): what it sends must be final (this rank's own chunk, or a slice an exchange before
  // `done` brought), its staging buffer free, and what it receives into out_ must not land on memory
  // that an unfinished exchange still sends from or adds into (out_ is work_ itself unless 16-bit).
  bool can_post(size_t j, size_t done) const {
    if (j == done) return true;
    if (own_slices_ == 0) return false;  // forwarding as it receives: one exchange at a time
    if (j < outgoing_.size() && j >= own_slices_ && j - own_slices_ >= done) return false;
    if (j >= incoming_.size() || reducing(incoming_[j].step)) return true;  // staging j % depth: free since j - done < depth
    const Slice& in = incoming_[j];
    const auto overlaps = [&](const Slice& s) { return in.begin < s.begin + s.length && s.begin < in.begin + in.length; };
    for (size_t k = done; k < j; ++k) {
      if (k < outgoing_.size() && send_source(outgoing_[k]).is_same(out_) && overlaps(outgoing_[k])) return false;
      if (k < incoming_.size() && reducing(incoming_[k].step) && work_.is_same(out_) && overlaps(incoming_[k])) return false;
    }
    return true;
  }

  // Whether exchange i sends the slice it receives: only when this rank's own chunk is empty (fewer
  // elements than ranks). Its send then follows its receive: the neighbour's exchange i still pairs
  // with it, and the empty-chunk rank merely forwards late.
  bool forwards_own_receive(size_t i) const {
    return own_slices_ == 0 && i < outgoing_.size() && i < incoming_.size();
  }

  // Exchange i: its send and its receive in one batch (the receive alone when the send must wait for it).
  std::shared_ptr<Work> post(size_t i) {
    std::vector<P2POp> ops;
    if (i < outgoing_.size() && !forwards_own_receive(i)) ops.push_back(send_op(i));
    if (i < incoming_.size()) ops.push_back({P2POp::Kind::recv, recv_target(i), prev(), kRingTag});
    std::shared_ptr<Work> work;
    guarded(i, [&] { work = group_.batch_isend_irecv(ops, options_); });
    return work;
  }

  std::shared_ptr<Work> post_send(size_t i) {
    std::shared_ptr<Work> work;
    guarded(i, [&] { work = group_.batch_isend_irecv({send_op(i)}, options_); });
    return work;
  }

  P2POp send_op(size_t i) const {
    const Slice& s = outgoing_[i];
    return {P2POp::Kind::send, send_source(s).narrow(0, s.begin, s.length), next(), kRingTag};
  }

  // acc = incoming + acc: the partial sum that arrived, then this rank's values (integers wrap).
  void reduce(size_t i) {
    const Slice& s = incoming_[i];
    Tensor acc = work_.narrow(0, s.begin, s.length);
    add_(acc, recv_target(i));
    if (s.step == ranks_ - 2) finish(s);  // the last reduce step: this rank's own chunk is complete
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

  // Runs f, naming exchange i's slices and peers in a DistributedError it raises.
  template <class F>
  void guarded(size_t i, F&& f) const {
    try {
      f();
    } catch (const DistributedError& e) {
      std::string where_;
      if (i < incoming_.size()) where_ = where(incoming_[i]) + ", recv from rank " + std::to_string(prev());
      if (i < outgoing_.size())
        where_ += (where_.empty() ? "" : "; ") + where(outgoing_[i]) + ", send to rank " + std::to_string(next());
      throw DistributedError(what_ + ": " + where_ + ": " + e.what());
    }
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
  Tensor staging_[kPipelineDepth];  // exchange i receives partial sums into staging_[i % kPipelineDepth]
  std::vector<Slice> incoming_, outgoing_;
  size_t own_slices_ = 0;  // outgoing_[0, own_slices_): this rank's own chunk
};

}  // namespace

void ring_all_reduce(ProcessGroup& group, const Tensor& tensor, ReduceOp op, const RingOptions& options) {
  const std::string what =
      group.rank_text() + ": ring_all_reduce of " + tensor_text(tensor) + " " + reduce_op_name(op);
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

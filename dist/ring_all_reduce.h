/// @file
/// ring_all_reduce: ember's own all-reduce, built only from a ProcessGroup's send and recv, to be
/// read and taught (`docs/design.md#distributed`, `docs/reference.md#bus-bandwidth`) and benchmarked
/// against the backend's all_reduce.
///
/// The algorithm, for N ranks in a ring (rank r sends to r+1 and receives from r-1, mod N) and a
/// buffer of S bytes split into N chunks of about S/N bytes (chunk c: elements [c*n/N, (c+1)*n/N),
/// the first n % N chunks one element longer):
///
/// 1. Reduce-scatter, N-1 steps. At step t rank r sends chunk (r-t) to r+1 and receives chunk
///    (r-t-1) from r-1, adding its own values to it. Chunk c thus starts on rank c and travels the
///    ring c, c+1, ..., c-1, gaining one rank's values per hop; after step N-2 rank r holds chunk
///    (r+1) summed over every rank. Each rank sent (N-1) chunks: (N-1)/N * S bytes.
/// 2. All-gather, N-1 more steps. Rank r sends its finished chunk (r+1) to r+1, then forwards each
///    finished chunk it receives, copying it into place: another (N-1)/N * S bytes.
/// In all each rank sends 2(N-1)/N * S bytes, the lower bound for an all-reduce, whatever N is:
/// t >= 2(N-1)/N * S / B on links of bandwidth B. (A naive all-reduce to one root sends (N-1) * S.)
///
/// Exchanges: every step is a list of exchanges, one per slice (RingOptions::slice_bytes): rank r
/// sends a slice to r+1 and receives one from r-1 in one batch_isend_irecv. Rank r's i-th outgoing
/// slice is rank r+1's i-th incoming one, so the exchanges pair up on every backend (NCCL runs a
/// transfer only once its peer posted the matching one). Pipelining: the next exchange is posted
/// before the current slice is added whenever its data is final, so the network carries one slice
/// while the CPU or GPU adds the previous one.
///
/// Determinism: every element of chunk c is summed in one fixed order, ((x_c + x_c+1) + ...) + x_c-1
/// (ring order from rank c), on every run; the all-gather copies bits, so every rank ends with the
/// same bits. The order differs from the backend's all_reduce: results agree within rounding.
///
/// 16-bit floats (f16, bf16) are summed in an f32 working copy and rounded to 16 bits once, by the
/// chunk's owner after the reduce-scatter: partial sums travel as f32 (twice the 16-bit bytes), the
/// finished chunks of the all-gather as 16 bits. Integers sum with wrap-around; avg (floating
/// dtypes) divides once, by the owner, before rounding.
#pragma once

#include <cstdint>

#include "dist/process_group.h"

namespace ember::dist {

/// ring_all_reduce's settings.
struct RingOptions : CollectiveOptions {  // timeout: each send and recv's bound (unset: the group's)
  int64_t slice_bytes = int64_t{1} << 20;  ///< pipeline slice, in bytes of the working dtype
};

/// All-reduces tensor (CPU or whatever the group's send/recv serve) in place over group's ring;
/// every rank calls it with the same shape, dtype and op. sum or avg; bool, max and min raise
/// DTypeError / ValueError. A failed or timed-out transfer raises DistributedError naming the ring
/// step, the slice and the peer.
void ring_all_reduce(ProcessGroup& group, const Tensor& tensor, ReduceOp op = ReduceOp::sum,
                     const RingOptions& options = {});

}  // namespace ember::dist

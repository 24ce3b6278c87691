// dist/: the stores (TCP and file), host lists and launcher environments, and every collective of
// the Gloo process group and ember's ring all-reduce run by real forked ranks (2, 3 and 4) against
// single-process references; failures: a rank that exits mid-collective, mismatched collectives,
// argument errors; the NCCL group on one GPU (the cuda suite). Ranks: tests/dist_ranks.h.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <thread>

#include "dist/comm_thread.h"
#include "dist/file_store.h"
#include "dist/gloo_process_group.h"
#include "dist/hostlist.h"
#include "dist/init.h"
#include "dist/nccl_process_group.h"
#include "dist/ring_all_reduce.h"
#include "dist/tcp_store.h"
#include "tensor/capture.h"
#include "tensor/cuda_stream.h"
#include "tensor/host_sync.h"
#include "tests/dist_ranks.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember::dist;
using namespace ember_test;
using std::chrono::milliseconds;

namespace {

// Rank r's deterministic input of n elements in dtype d: small integers, exact in every dtype, so
// sums in any order agree and 16-bit results are exact too.
std::vector<double> input_values(int rank, int64_t n, DType d) {
  auto v = random_values(n, d, -8, 8, true, 1000 + static_cast<uint64_t>(rank) * 7919 + static_cast<uint64_t>(d));
  return v;
}

double reduce_reference(ReduceOp op, DType d, const std::vector<double>& xs) {
  double acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    if (op == ReduceOp::max) acc = std::max(acc, xs[i]);
    else if (op == ReduceOp::min) acc = std::min(acc, xs[i]);
    else acc += xs[i];
  }
  if (op == ReduceOp::avg) acc /= static_cast<double>(xs.size());
  if (d == DType::boolean) return acc != 0 ? 1 : 0;
  return stored_as(d, acc);
}

// "" when got equals want within the dtype's tolerance, else where it differs.
std::string compare(const Tensor& got, const std::vector<double>& want, DType d, const std::string& what) {
  if (got.numel() != static_cast<int64_t>(want.size()))
    return what + ": " + std::to_string(got.numel()) + " elements, expected " + std::to_string(want.size());
  const auto g = got.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    if (!close(g[i], want[i], tolerance(d)))
      return what + ": element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", expected " + std::to_string(want[i]);
  return "";
}

// A tensor of `shape` holding values, non-contiguous (a transposed view) when asked and 2-D.
Tensor make_input(const std::vector<double>& values, const Shape& shape, DType d, bool transposed, Device dev = kCPU) {
  if (!transposed) return make_tensor(values, shape, d, dev);
  Tensor base = make_tensor(values, {shape[1], shape[0]}, d, dev).t();  // logical values: base's transpose
  return base;
}

TensorOptions on(DType d, Device dev) { return TensorOptions(d).with_device(dev); }

// The logical (row-major) values of make_input's tensor.
std::vector<double> logical(const Tensor& t) { return t.to_vector<double>(); }

const std::vector<DType> kDTypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::boolean};
const std::vector<Shape> kShapes = {{5}, {3, 4}, {0}, {1}};  // uneven, 2-D (transposed too), empty, one element

std::string check_all_reduce(ProcessGroup& pg) {
  const Device dev = pg.device();
  const int world = pg.size();
  for (DType d : kDTypes)
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
      if (op == ReduceOp::avg && !is_floating(d)) continue;
      for (const Shape& shape : kShapes)
        for (bool transposed : {false, true}) {
          if (transposed && shape.size() != 2) continue;
          const int64_t n = numel(shape);
          std::vector<std::vector<double>> per_rank;
          for (int r = 0; r < world; ++r) per_rank.push_back(logical(make_input(input_values(r, n, d), shape, d, transposed)));
          std::vector<double> want(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) {
            std::vector<double> xs;
            for (int r = 0; r < world; ++r) xs.push_back(per_rank[r][i]);
            want[i] = reduce_reference(op, d, xs);
          }
          Tensor t = make_input(input_values(pg.rank(), n, d), shape, d, transposed, dev);
          pg.all_reduce(t, op);
          const std::string what = std::string("all_reduce ") + reduce_op_name(op) + " " + dtype_name(d) + " " +
                                   to_string(shape) + (transposed ? " transposed" : "");
          if (auto e = compare(t, want, d, what); !e.empty()) return e;
          if (transposed && t.is_contiguous()) return what + ": the tensor lost its layout";
        }
    }
  return "";
}

std::string check_reduce_scatter(ProcessGroup& pg) {
  const Device dev = pg.device();
  const int world = pg.size();
  for (DType d : {DType::f32, DType::bf16, DType::i64})
    for (int64_t n : {int64_t{3}, int64_t{1}, int64_t{0}}) {
      // Every rank's input holds world * n elements; rank r keeps slice r of the sum.
      std::vector<double> want(static_cast<size_t>(n), 0.0);
      for (int r = 0; r < world; ++r) {
        const auto v = input_values(r, world * n, d);
        for (int64_t i = 0; i < n; ++i) want[i] += v[pg.rank() * n + i];
      }
      for (auto& w : want) w = stored_as(d, w);
      Tensor in = make_tensor(input_values(pg.rank(), world * n, d), {world, n}, d, dev);
      Tensor before = in.clone();
      Tensor out = zeros({n}, on(d, dev));
      pg.reduce_scatter(out, in, ReduceOp::sum);
      const std::string what = std::string("reduce_scatter ") + dtype_name(d) + " n=" + std::to_string(n);
      if (auto e = compare(out, want, d, what); !e.empty()) return e;
      if (auto e = compare(in, values(before), d, what + " left its input"); !e.empty()) return e;
    }
  return "";
}

std::string check_all_gather(ProcessGroup& pg) {
  const Device dev = pg.device();
  const int world = pg.size(), rank = pg.rank();
  for (DType d : {DType::f16, DType::f64, DType::i32, DType::boolean}) {
    // One output tensor, written through a transposed (non-contiguous) view.
    const int64_t n = 3;
    Tensor out_base = zeros({n, world}, on(d, dev));
    Tensor out = out_base.t();  // (world, n), non-contiguous
    pg.all_gather(out, make_tensor(input_values(rank, n, d), {n}, d, dev));
    std::vector<double> want;
    for (int r = 0; r < world; ++r)
      for (double x : input_values(r, n, d)) want.push_back(stored_as(d, x));
    const std::string what = std::string("all_gather ") + dtype_name(d);
    if (auto e = compare(out, want, d, what); !e.empty()) return e;
    // A list with uneven sizes: rank r contributes r + 1 elements except the last, which sends none.
    const auto count = [world](int r) { return r == world - 1 ? int64_t{0} : int64_t{r + 1}; };
    std::vector<Tensor> outs;
    for (int r = 0; r < world; ++r) outs.push_back(zeros({count(r)}, on(d, dev)));
    pg.all_gather(outs, make_tensor(input_values(rank, count(rank), d), {count(rank)}, d, dev));
    for (int r = 0; r < world; ++r) {
      std::vector<double> w;
      for (double x : input_values(r, count(r), d)) w.push_back(stored_as(d, x));
      if (auto e = compare(outs[r], w, d, what + " list, slot " + std::to_string(r)); !e.empty()) return e;
    }
  }
  return "";
}

std::string check_broadcast_barrier(ProcessGroup& pg) {
  const Device dev = pg.device();
  const int world = pg.size(), rank = pg.rank();
  for (DType d : {DType::f32, DType::bf16, DType::i64}) {
    const int root = world - 1;
    Tensor t = make_input(input_values(rank, 6, d), {2, 3}, d, true, dev);
    pg.broadcast(t, root);
    const auto want = logical(make_input(input_values(root, 6, d), {2, 3}, d, true));
    if (auto e = compare(t, want, d, std::string("broadcast ") + dtype_name(d)); !e.empty()) return e;
  }
  auto barrier = pg.barrier_async();
  barrier->wait(milliseconds(5000));
  return barrier->is_completed() ? "" : "barrier: not completed after wait()";
}

// Needs two ranks or more (a rank cannot send to itself).
std::string check_send_recv(ProcessGroup& pg) {
  const int world = pg.size(), rank = pg.rank();
  const Device dev = pg.device();
  // A ring: each rank sends to the next and receives from the previous, both posted before waiting.
  const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  Tensor mine = make_tensor(input_values(rank, 4, DType::f64), {4}, DType::f64, dev);
  Tensor got = zeros({2, 2}, on(DType::f64, dev)).t();  // received into a non-contiguous view
  auto sent = pg.send_async(mine, next, 7);
  auto received = pg.recv_async(got, prev, 7);
  received->wait();
  sent->wait();
  if (!received->is_completed() || !sent->is_completed()) return "send/recv: not completed after wait()";
  if (auto e = compare(got.contiguous().view({4}), input_values(prev, 4, DType::f64), DType::f64, "recv"); !e.empty()) return e;
  // A batch: both directions of both neighbours at once, one Work for all four transfers.
  Tensor to_next = make_tensor(input_values(rank, 5, DType::i32), {5}, DType::i32, dev);
  Tensor to_prev = make_tensor(input_values(rank + world, 3, DType::i32), {3}, DType::i32, dev);
  Tensor from_prev = zeros({5}, on(DType::i32, dev)), from_next = zeros({3}, on(DType::i32, dev));
  auto batch = pg.batch_isend_irecv({{P2POp::Kind::send, to_next, next, 3},
                                     {P2POp::Kind::recv, from_prev, prev, 3},
                                     {P2POp::Kind::send, to_prev, prev, 4},
                                     {P2POp::Kind::recv, from_next, next, 4}});
  batch->wait(milliseconds(5000));
  if (!batch->is_completed()) return "batch_isend_irecv: not completed after wait()";
  if (auto e = compare(from_prev, input_values(prev, 5, DType::i32), DType::i32, "batch recv from prev"); !e.empty()) return e;
  if (auto e = compare(from_next, input_values(next + world, 3, DType::i32), DType::i32, "batch recv from next"); !e.empty())
    return e;
  return "";
}

std::string every_collective(int rank, int world, int port) {
  auto pg = join_group(rank, world, port);
  for (auto check : {check_all_reduce, check_reduce_scatter, check_all_gather, check_broadcast_barrier, check_send_recv})
    if (auto e = check(*pg); !e.empty()) return e;
  return "";
}

// Passes when f throws E whose message contains every part; else says what happened.
template <class E>
std::string expect_thrown(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const E& e) {
    const std::string m = e.what();
    for (const auto& p : parts)
      if (m.find(p) == std::string::npos) return "message '" + m + "' lacks '" + p + "'";
    return "";
  } catch (const std::exception& e) {
    return std::string("threw another type: ") + e.what();
  }
  return "did not throw";
}

// ---- ring_all_reduce

// Rank r's ring input: fractions for floating dtypes (so the order of the sum shows in its bits),
// small integers otherwise.
std::vector<double> ring_values(int rank, int64_t n, DType d) {
  return random_values(n, d, -2, 2, !is_floating(d), 5000 + static_cast<uint64_t>(rank) * 104729 + static_cast<uint64_t>(d));
}

// v as the ring computes it: f32 for f32 and the 16-bit floats (exact in double, rounded to float
// after each operation), f64 and integers as they are.
double in_compute_type(DType d, double v) {
  return d == DType::f32 || is_reduced_float(d) ? static_cast<double>(static_cast<float>(v)) : v;
}

// The bits ring_all_reduce promises, computed by hand: element i of chunk c (the ring's split: n/N
// elements each, the first n % N one longer) is ((x_c + x_c+1) + ...) + x_c-1, divided once for avg,
// rounded once to d.
Tensor ring_reference(const std::vector<std::vector<double>>& inputs, ReduceOp op, DType d, const Shape& shape) {
  const int world = static_cast<int>(inputs.size());
  const int64_t n = numel(shape), base = n / world, extra = n % world;
  std::vector<double> out(static_cast<size_t>(n));
  for (int c = 0, begin = 0; c < world; ++c) {
    const int64_t length = base + (c < extra ? 1 : 0);
    for (int64_t i = begin; i < begin + length; ++i) {
      double acc = inputs[c][i];
      for (int j = 1; j < world; ++j) acc = in_compute_type(d, acc + inputs[(c + j) % world][i]);
      if (op == ReduceOp::avg) acc = in_compute_type(d, acc / world);
      out[i] = acc;
    }
    begin += static_cast<int>(length);
  }
  return make_tensor(out, shape, d);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  // An empty tensor has no data pointer, and memcmp on a null pointer is undefined even for 0 bytes.
  return x.dtype() == y.dtype() && x.numel() == y.numel() &&
         (x.numel() == 0 ||
          std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel() * dtype_size(x.dtype()))) == 0);
}

// Each case: the ring's result has the documented bits, agrees with the group's all_reduce within
// rounding, is the same on a second run, and (gathered) the same on every rank. Small slices make
// several per chunk, so the pipeline crosses slice, step and phase boundaries.
std::string check_ring(ProcessGroup& pg) {
  const int world = pg.size(), rank = pg.rank();
  const std::vector<Shape> shapes = {{0}, {1}, {2}, {5}, {3, 4}, {37}, {203}};
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      if (op == ReduceOp::avg && !is_floating(d)) continue;
      for (const Shape& shape : shapes)
        for (bool transposed : {false, true}) {
          if (transposed && shape.size() != 2) continue;
          const int64_t n = numel(shape);
          const std::string what = std::string("ring_all_reduce ") + reduce_op_name(op) + " " + dtype_name(d) + " " +
                                   to_string(shape) + (transposed ? " transposed" : "") + " on " + std::to_string(world) + " ranks";
          std::vector<std::vector<double>> inputs;
          for (int r = 0; r < world; ++r) inputs.push_back(logical(make_input(ring_values(r, n, d), shape, d, transposed)));
          RingOptions options;
          options.slice_bytes = 16;  // 4 f32 elements: chunks of 203 / N elements take many slices
          Tensor first = make_input(ring_values(rank, n, d), shape, d, transposed);
          ring_all_reduce(pg, first, op, options);
          if (transposed && first.is_contiguous()) return what + ": the tensor lost its layout";
          const Tensor reference = ring_reference(inputs, op, d, shape);
          if (!same_bits(first, reference))
            return what + ": other bits than the documented summation order gives (within tolerance: " +
                   (compare(first, values(reference), d, "").empty() ? "yes" : "no") + ")";
          Tensor second = make_input(ring_values(rank, n, d), shape, d, transposed);
          ring_all_reduce(pg, second, op, options);
          if (!same_bits(first, second)) return what + ": a second run gave other bits";
          Tensor backend = make_input(ring_values(rank, n, d), shape, d, transposed);
          pg.all_reduce(backend, op);
          if (auto e = compare(first, values(backend), d, what + " vs the group's all_reduce"); !e.empty()) return e;
          Tensor everyone = empty({world, n}, d);
          pg.all_gather(everyone, first.contiguous().view({n}));
          for (int r = 0; r < world; ++r)
            if (!same_bits(everyone.select(0, r), first.contiguous().view({n})))
              return what + ": rank " + std::to_string(r) + " holds other bits than rank " + std::to_string(rank);
        }
    }
  Tensor t = ones({4});
  if (auto e = expect_thrown<ValueError>([&] { ring_all_reduce(pg, t, ReduceOp::max); }, {"ring_all_reduce", "max"}); !e.empty())
    return "max: " + e;
  if (auto e = expect_thrown<DTypeError>([&] { ring_all_reduce(pg, ones({4}, DType::i32), ReduceOp::avg); }, {"avg", "int32"});
      !e.empty())
    return "avg of int32: " + e;
  return expect_thrown<DTypeError>([&] { ring_all_reduce(pg, ones({4}, DType::boolean)); }, {"bool"});
}

std::string ring_cases(int rank, int world, int port) {
  auto pg = join_group(rank, world, port, kRankTimeout, false);
  return check_ring(*pg);
}

// A port nobody listens on (the kernel's choice, then closed).
int closed_port() {
  TCPStoreServer probe(0);
  return probe.port();
}

// The Store semantics both implementations share.
void check_store(Store& a, Store& b) {
  a.set("k", std::string("v\0w", 3));
  CHECK(b.get("k") == std::string("v\0w", 3));
  CHECK(b.check({"k"}));
  CHECK_FALSE(b.check({"k", "absent"}));
  CHECK(a.add("n", 5) == 5);
  CHECK(b.add("n", -7) == -2);
  CHECK(a.get("n") == "-2");
  // delete_key: gone for every client, and says whether it was there.
  a.set("doomed", "x");
  CHECK(b.delete_key("doomed"));
  CHECK_FALSE(a.check({"doomed"}));
  CHECK_FALSE(a.delete_key("doomed"));
  a.set("doomed", "again");  // a deleted key can come back
  CHECK(b.get("doomed") == "again");
  // compare_set: swaps only on the expected value; an absent key with empty expected is created.
  CHECK(a.compare_set("c", "", "first") == "first");
  CHECK(b.compare_set("c", "wrong", "second") == "first");
  CHECK(b.compare_set("c", "first", "second") == "second");
  CHECK(a.compare_set("absent2", "x", "y") == "x");
  CHECK_FALSE(a.check({"absent2"}));
  a.set("word", "abc");
  expect_error<ValueError>("add to a non-number", [&] { b.add("word", 1); }, {"'word'", "not a decimal integer"});
  // A wait for a key set later by another thread returns; one for a key never set times out.
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(50));
    b.set("late", "1");
  });
  a.wait({"late"}, milliseconds(5000));
  later.join();
  const auto started = std::chrono::steady_clock::now();
  expect_error<DistributedError>("wait timeout", [&] { a.wait({"late", "never"}, milliseconds(150)); },
                                 {"150 ms", "'never'"});
  CHECK(std::chrono::steady_clock::now() - started < milliseconds(2000));
  a.set_timeout(milliseconds(100));
  expect_error<DistributedError>("get timeout", [&] { a.get("never"); }, {"100 ms", "'never'"});
}

}  // namespace

// A case that needs a process group: skipped in a build without Gloo.
#define GLOO_TEST_CASE(name) TEST_CASE(name * doctest::skip(!has_gloo()))

TEST_SUITE("dist") {

TEST_CASE("TCPStore: set, get, add, compare_set, check, waits and their timeouts") {
  TCPStore server("127.0.0.1", 0, {true, milliseconds(5000)});
  TCPStore client("127.0.0.1", server.port(), {false, milliseconds(5000)});
  CHECK(server.port() > 0);
  check_store(server, client);
  CHECK_MESSAGE(client.describe().find("127.0.0.1:" + std::to_string(server.port())) != std::string::npos, client.describe());
}

TEST_CASE("TCPStore: a refused connection and a vanished server become sentences naming host:port") {
  const int port = closed_port();
  const auto started = std::chrono::steady_clock::now();
  expect_error<DistributedError>("refused", [&] { TCPStore("127.0.0.1", port, {false, milliseconds(300)}); },
                                 {("127.0.0.1:" + std::to_string(port)).c_str(), "refused"});
  CHECK(std::chrono::steady_clock::now() - started < milliseconds(3000));
  auto server = std::make_unique<TCPStore>("127.0.0.1", 0, TCPStoreOptions{true, milliseconds(2000)});
  TCPStore client("127.0.0.1", server->port(), {false, milliseconds(300)});
  client.set("a", "1");
  server.reset();  // the server thread stops and closes every connection
  expect_error<DistributedError>("server gone", [&] { client.get("a"); }, {"TCP store at 127.0.0.1"});
  expect_error<ValueError>("client on port 0", [] { TCPStore("127.0.0.1", 0, {false, milliseconds(100)}); }, {"port"});
}

TEST_CASE("FileStore: the same semantics, and counters shared by processes") {
  TempDir dir;
  FileStore a(dir / "store"), b(dir / "store");
  check_store(a, b);
  // Two processes each add 50 times: appends under flock lose none.
  const std::string path = dir / "counter";
  auto reports = run_ranks(2, [&](int, int, int) -> std::string {
    FileStore s(path, milliseconds(2000));
    for (int i = 0; i < 50; ++i) s.add("n", 1);
    return "";
  });
  check_all_passed(reports);
  CHECK(FileStore(path).get("n") == "100");
}

TEST_CASE("Slurm host lists expand ranges, lists, padding and several brackets") {
  CHECK(expand_hostlist("gnode[10,20-22],other") == std::vector<std::string>{"gnode10", "gnode20", "gnode21", "gnode22", "other"});
  CHECK(expand_hostlist("n[008-010]") == std::vector<std::string>{"n008", "n009", "n010"});
  CHECK(expand_hostlist("r[1-2]-n[1,3]") == std::vector<std::string>{"r1-n1", "r1-n3", "r2-n1", "r2-n3"});
  CHECK(expand_hostlist("single") == std::vector<std::string>{"single"});
  expect_error<ValueError>("unbalanced", [] { expand_hostlist("n[1-2"); }, {"n[1-2", "unbalanced"});
  expect_error<ValueError>("backwards", [] { expand_hostlist("n[5-2]"); }, {"backwards"});
  expect_error<ValueError>("not a number", [] { expand_hostlist("n[a-2]"); }, {"'a-2'"});
  expect_error<ValueError>("empty", [] { expand_hostlist("a,,b"); }, {"empty host name"});
  expect_error<ValueError>("huge", [] { expand_hostlist("n[0-99999999]"); }, {"more than"});
}

TEST_CASE("resolve_init: explicit arguments, torchrun, Open MPI and Slurm, in that order") {
  // torchrun: the store one port above the agent's MASTER_PORT, or EMBER_STORE_PORT.
  Environment torchrun = {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29500"}};
  auto r = resolve_init({}, torchrun);
  CHECK(r.launcher == "torchrun");
  CHECK(r.rank == 3);
  CHECK(r.world_size == 8);
  CHECK(r.local_rank == 1);
  CHECK(r.local_world_size == 2);
  CHECK(r.host == "10.0.0.5");
  CHECK(r.port == 29501);
  torchrun["EMBER_STORE_PORT"] = "31000";
  CHECK(resolve_init({}, torchrun).port == 31000);
  InitOptions explicit_rank;
  explicit_rank.rank = 5;
  explicit_rank.store_port = 4000;
  explicit_rank.master_addr = "head";
  r = resolve_init(explicit_rank, torchrun);
  CHECK(r.rank == 5);
  CHECK(r.port == 4000);
  CHECK(r.host == "head");

  // Open MPI: MASTER_PORT itself (no agent holds it); without MASTER_ADDR a clear error.
  Environment mpi = {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MASTER_ADDR", "h0"}, {"MASTER_PORT", "29500"}};
  r = resolve_init({}, mpi);
  CHECK(r.launcher == "Open MPI");
  CHECK(r.rank == 2);
  CHECK(r.local_world_size == 2);
  CHECK(r.port == 29500);
  mpi.erase("MASTER_ADDR");
  expect_error<ValueError>("mpi without master", [&] { resolve_init({}, mpi); }, {"MASTER_ADDR"});

  // Slurm: the master is the first host of the step's node list; the port derives from the job id.
  Environment slurm = {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "2"},
                       {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"}, {"SLURM_STEP_NODELIST", "gnode[10,20-22],other"},
                       {"SLURM_JOB_ID", "123456"}};
  r = resolve_init({}, slurm);
  CHECK(r.launcher == "Slurm");
  CHECK(r.rank == 5);
  CHECK(r.local_rank == 1);
  CHECK(r.local_world_size == 2);
  CHECK(r.host == "gnode10");
  CHECK(r.port == 15000 + 123456 % 20000);
  slurm["SLURM_NTASKS_PER_NODE"] = "3";
  CHECK(resolve_init({}, slurm).local_world_size == 3);

  // torchrun's variables win over Slurm's when both are set (torchrun under srun).
  Environment both = slurm;
  both.insert(torchrun.begin(), torchrun.end());
  CHECK(resolve_init({}, both).launcher == "torchrun");

  // A world of one needs nothing at all.
  InitOptions single;
  single.rank = 0;
  single.world_size = 1;
  r = resolve_init(single, {});
  CHECK(r.port == 0);
  CHECK(r.host == "127.0.0.1");
}

TEST_CASE("resolve_init: strict numbers, ranges and init_method strings") {
  const Environment base = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  const auto with = [&](const std::string& k, const std::string& v) {
    Environment e = base;
    e[k] = v;
    return e;
  };
  expect_error<ValueError>("junk", [&] { resolve_init({}, with("RANK", "1x")); }, {"RANK='1x'", "not a decimal integer"});
  expect_error<ValueError>("empty", [&] { resolve_init({}, with("RANK", "")); }, {"RANK=''"});
  expect_error<ValueError>("rank >= size", [&] { resolve_init({}, with("RANK", "2")); }, {"RANK=2", "[0, 1]"});
  expect_error<ValueError>("wrap", [&] { resolve_init({}, with("WORLD_SIZE", "18446744073709551617")); }, {"WORLD_SIZE"});
  expect_error<ValueError>("negative", [&] { resolve_init({}, with("WORLD_SIZE", "-2")); }, {"WORLD_SIZE=-2"});
  expect_error<ValueError>("port", [&] { resolve_init({}, with("MASTER_PORT", "65535")); }, {"MASTER_PORT=65535"});
  expect_error<ValueError>("space", [&] { resolve_init({}, with("MASTER_PORT", " 29500")); }, {"MASTER_PORT"});
  expect_error<ValueError>("nothing", [] { resolve_init({}, {}); }, {"world_size", "WORLD_SIZE"});
  // A launcher's variables half set are named as such (here torchrun's, beside Open MPI's complete ones).
  expect_error<ValueError>("no RANK", [] {
    resolve_init({}, {{"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}});
  }, {"torchrun's WORLD_SIZE is set but RANK is not"});
  expect_error<ValueError>("no size", [] { resolve_init({}, {{"SLURM_PROCID", "1"}}); },
                           {"Slurm's SLURM_PROCID is set but SLURM_NTASKS is not"});
  // A value with terminal escapes or a megabyte of digits is shown escaped and cut.
  const std::string escaped = message_of<ValueError>([&] { resolve_init({}, with("RANK", "1\x1b[2J")); });
  CHECK_MESSAGE(escaped.find("RANK='1\\x1b[2J' is not a decimal integer") != std::string::npos, escaped);
  const std::string cut = message_of<ValueError>([&] { resolve_init({}, with("WORLD_SIZE", std::string(1 << 20, '9'))); });
  CHECK_MESSAGE(cut.find("... (1048576 bytes) is out of range") != std::string::npos, cut);
  CHECK(cut.size() < 400);

  InitOptions o;
  o.init_method = "tcp://[::1]:1234";
  auto r = resolve_init(o, base);
  CHECK(r.host == "::1");
  CHECK(r.port == 1234);
  o.init_method = "file:///shared/store";
  r = resolve_init(o, base);
  CHECK(r.rendezvous == ResolvedInit::Rendezvous::file);
  CHECK(r.path == "/shared/store");
  for (const char* bad : {"tcp://host", "tcp://:80", "tcp://h:0", "tcp://h:99999", "file://relative", "udp://h:1", "env:/"}) {
    o.init_method = bad;
    expect_error<ValueError>(bad, [&] { resolve_init(o, base); }, {bad});
  }
  o.init_method = "env://";
  o.backend = "mpi";
  expect_error<ValueError>("backend", [&] { resolve_init(o, base); }, {"'mpi'"});
}

GLOO_TEST_CASE("one rank: identity collectives and argument errors naming the values") {
  InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.timeout = milliseconds(5000);
  // Gloo reads GLOO_SOCKET_IFNAME from the environment (this test's process: set and unset around the call).
  ::setenv("GLOO_SOCKET_IFNAME", "nosuchif", 1);
  const std::string no_interface = message_of<ValueError>([&] { init_process_group(o); });
  ::unsetenv("GLOO_SOCKET_IFNAME");
  CHECK_MESSAGE(no_interface.find("GLOO_SOCKET_IFNAME=nosuchif: no such network interface on this machine (it has lo") !=
                    std::string::npos,
                no_interface);
  auto pg = init_process_group(o);
  CHECK(pg->backend_name() == "gloo");
  Tensor t = from_vector<float>({1, 2, 3}, {3});
  pg->all_reduce(t, ReduceOp::avg);
  CHECK(values(t) == std::vector<double>{1, 2, 3});
  Tensor i = from_vector<int32_t>({1, 2}, {2});
  expect_error<DTypeError>("avg of ints", [&] { pg->all_reduce(i, ReduceOp::avg); }, {"avg", "int32"});
  expect_error<ShapeError>("reduce_scatter sizes", [&] { pg->reduce_scatter(zeros({2}), zeros({3})); },
                           {"(3,)", "3 elements", "world size 1", "(2,)"});
  expect_error<DTypeError>("dtype mismatch", [&] { pg->all_gather(zeros({3}, DType::f64), zeros({3})); },
                           {"float64", "float32"});
  expect_error<ShapeError>("all_gather sizes", [&] { pg->all_gather(zeros({4}), zeros({3})); }, {"(4,)", "(3,)"});
  expect_error<ValueError>("list length", [&] { pg->all_gather(std::vector<Tensor>{zeros({3}), zeros({3})}, zeros({3})); },
                           {"2 output tensors", "1 ranks"});
  expect_error<IndexError>("root", [&] { pg->broadcast(t, 1); }, {"root 1", "group of 1"});
  expect_error<ValueError>("send to self", [&] { pg->send(t, 0); }, {"dst 0", "this rank itself"});
  expect_error<IndexError>("recv from nowhere", [&] { pg->recv(t, -1); }, {"src -1"});
  expect_error<ValueError>("batch recv from self", [&] { pg->batch_isend_irecv({{P2POp::Kind::recv, t, 0}}); },
                           {"batch_isend_irecv: recv", "src 0", "this rank itself"});
  expect_error<ValueError>("negative timeout", [&] { pg->barrier({milliseconds(-1)}); }, {"-1 ms"});
  if (has_cuda())
    expect_error<DeviceError>("cuda tensor", [&] { pg->all_reduce(zeros({2}, Device::parse("cuda"))); }, {"cuda:0", "Gloo"});
}

GLOO_TEST_CASE("debug mode keeps at most two signature keys per rank in the store, however many collectives") {
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, TCPStoreOptions{true, milliseconds(5000)});
  GlooOptions options;
  options.debug = true;
  options.master_addr = "127.0.0.1";
  auto pg = make_gloo_process_group(store, 0, 1, options);
  for (int i = 0; i < 5; ++i) pg->barrier();
  // Each collective's check removes this rank's key of the one before.
  for (int seq = 1; seq <= 4; ++seq) CHECK_FALSE(store->check({"collective/" + std::to_string(seq) + "/0"}));
  CHECK(store->check({"collective/5/0"}));
}

GLOO_TEST_CASE("inside a captured step every collective and DDP's communication thread are refused, naming them") {
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, TCPStoreOptions{true, milliseconds(5000)});
  GlooOptions options;
  options.master_addr = "127.0.0.1";
  auto pg = make_gloo_process_group(store, 0, 1, options);
  Tensor t = ones({4});
  const std::vector<std::pair<const char*, std::function<void()>>> calls = {
      {"gloo all_reduce", [&] { (void)pg->all_reduce_async(t); }},
      {"gloo reduce_scatter", [&] { (void)pg->reduce_scatter_async(t, t); }},
      {"gloo all_gather", [&] { (void)pg->all_gather_async(t, t); }},
      {"gloo all_gather", [&] { (void)pg->all_gather_async(std::vector<Tensor>{t}, t); }},
      {"gloo broadcast", [&] { (void)pg->broadcast_async(t, 0); }},
      {"gloo barrier", [&] { (void)pg->barrier_async(); }},
      {"gloo send", [&] { (void)pg->send_async(t, 0); }},
      {"gloo recv", [&] { (void)pg->recv_async(t, 0); }},
      {"gloo batch_isend_irecv", [&] { (void)pg->batch_isend_irecv({}); }},
      {"communication thread", [&] { (void)CommThread().post([] {}, kCPU); }},
  };
  {
    const capture::Guard capturing;
    for (const auto& [name, call] : calls)
      expect_error<CaptureError>(name, call, {name, "inside a captured step", "no --compile with a process group"});
  }
  CHECK(sum(t).item<double>() == 4.0);  // nothing ran
  pg->all_reduce(t);                    // outside a capture the group works
  CHECK(sum(t).item<double>() == 4.0);
}

GLOO_TEST_CASE("every collective and dtype on 2 ranks against a single-process reference") {
  check_all_passed(run_ranks(2, every_collective));
}

GLOO_TEST_CASE("every collective and dtype on 3 ranks against a single-process reference") {
  check_all_passed(run_ranks(3, every_collective));
}

GLOO_TEST_CASE("every collective and dtype on 4 ranks against a single-process reference") {
  check_all_passed(run_ranks(4, every_collective));
}

// Without the debug check, as in production: Gloo sees the closed connections, and the store tells
// which rank did not report the failure.
GLOO_TEST_CASE("a rank that exits mid-collective: the others raise within the 2 s timeout, naming it") {
  const auto reports = run_ranks(3, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port, milliseconds(2000), false);
    Tensor t = ones({2, 3});
    pg->all_reduce(t);
    if (rank == 2) ::_exit(0);  // gone before the second all_reduce
    const auto started = std::chrono::steady_clock::now();
    auto error = expect_thrown<DistributedError>([&] { pg->all_reduce(t); },
                                                 {"rank " + std::to_string(rank) + "/3", "all_reduce #2", "float32 (2, 3)",
                                                  "rank(s) 2 did not answer"});
    if (!error.empty()) return error;
    const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
    if (took > milliseconds(3500)) return "raised only after " + std::to_string(took.count()) + " ms";
    // The group is broken: the next collective raises at once.
    return expect_thrown<DistributedError>([&] { pg->barrier(); }, {"broken"});
  });
  CHECK_MESSAGE(reports[0].empty(), reports[0]);
  CHECK_MESSAGE(reports[1].empty(), reports[1]);
  CHECK(reports[2] == "<no report> (exit status 0)");
}

GLOO_TEST_CASE("mismatched collectives are named on every rank; the group goes on (rank 0 serves the store)") {
  const int port = closed_port();
  const auto reports = run_ranks(2, [port](int rank, int world, int) -> std::string {
    InitOptions o;
    o.rank = rank;
    o.world_size = world;
    o.master_addr = "127.0.0.1";
    o.store_port = port;
    o.timeout = milliseconds(5000);
    o.debug = true;
    auto pg = init_process_group(o);
    Tensor t = zeros({rank == 0 ? 4 : 3});
    auto error = expect_thrown<CollectiveMismatchError>(
        [&] { pg->all_reduce(t); }, {"#1", "all_reduce float32 (4,) sum", "all_reduce float32 (3,) sum", "rank 1 issued"});
    if (!error.empty()) return error;
    error = expect_thrown<CollectiveMismatchError>([&] { pg->all_reduce(zeros({2}), rank == 0 ? ReduceOp::sum : ReduceOp::max); },
                                                   {"#2", "sum", "max"});
    if (!error.empty()) return error;
    Tensor ok = full({2}, rank + 1.0);
    pg->all_reduce(ok);
    pg->barrier();  // rank 0 serves the store: it stays until rank 1 is done with it
    return compare(ok, {3, 3}, DType::f32, "all_reduce after the mismatches");
  });
  check_all_passed(reports);
}

GLOO_TEST_CASE("ring_all_reduce on 2, 3 and 4 ranks: documented bits, the group's all_reduce, same on every rank and run") {
  for (int world : {2, 3, 4}) {
    INFO(world, " ranks");
    check_all_passed(run_ranks(world, ring_cases));
  }
}

GLOO_TEST_CASE("ring_all_reduce: a rank that exits mid-ring; the others raise within the 2 s timeout, naming the step") {
  const auto reports = run_ranks(3, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port, milliseconds(2000), false);
    RingOptions options;
    options.slice_bytes = 64;
    Tensor t = ones({3000});
    ring_all_reduce(*pg, t, ReduceOp::sum, options);
    if (rank == 2) ::_exit(0);  // gone before the second ring
    const auto started = std::chrono::steady_clock::now();
    auto error = expect_thrown<DistributedError>([&] { ring_all_reduce(*pg, t, ReduceOp::sum, options); },
                                                 {"rank " + std::to_string(rank) + "/3: ring_all_reduce of float32 (3000,) sum",
                                                  "step", "slice", "rank"});
    if (!error.empty()) return error;
    const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
    return took > milliseconds(3500) ? "raised only after " + std::to_string(took.count()) + " ms" : "";
  });
  CHECK_MESSAGE(reports[0].empty(), reports[0]);
  CHECK_MESSAGE(reports[1].empty(), reports[1]);
  CHECK(reports[2] == "<no report> (exit status 0)");
}

// ---- NCCL: one GPU, so one rank (NCCL refuses two ranks on one GPU)

TEST_CASE("NCCL process groups: NotImplementedError without NCCL, DeviceError without a GPU") {
  InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.backend = "nccl";
  o.timeout = milliseconds(20000);
  if (!has_nccl()) {
    expect_error<NotImplementedError>("no NCCL", [&] { init_process_group(o); }, {"without NCCL", "CUDA"});
  } else if (!has_cuda()) {
    expect_error<DeviceError>("no GPU", [&] { init_process_group(o); }, {"no CUDA device"});
  } else {
    CHECK(init_process_group(o)->backend_name() == "nccl");
  }
}

}  // TEST_SUITE


NCCL_TEST_CASE("NCCL, one rank: every collective and dtype on CUDA tensors against the reference") {
  auto pg = nccl_group(1, milliseconds(60000));
  CHECK(pg->backend_name() == "nccl");
  CHECK(pg->device() == Device(DeviceType::cuda, 0));
  for (auto check : {check_all_reduce, check_reduce_scatter, check_all_gather, check_broadcast_barrier}) {
    const std::string error = check(*pg);
    CHECK_MESSAGE(error.empty(), error);
  }
}

NCCL_TEST_CASE("NCCL, one rank: ordered after the caller's stream, async Work, a host wait, the ring") {
  auto pg = nccl_group(1, milliseconds(60000), false);
  const Device gpu(DeviceType::cuda, 0);
  cuda::Stream side(0);
  Tensor t = zeros({int64_t{1} << 22}, on(DType::f32, gpu));
  cuda::Event filled;
  filled.record(0);  // zeros ran on the default stream; the side stream is non-blocking
  side.wait(filled);
  std::shared_ptr<Work> work;
  {
    cuda::StreamGuard on_side(side);
    add_(t, Scalar(1.0));  // queued on the side stream: the all-reduce must come after it
    work = pg->all_reduce_async(t, ReduceOp::avg);
  }
  const int64_t syncs = host_sync_count();
  work->wait();
  CHECK(host_sync_count() > syncs);
  CHECK(work->is_completed());
  CHECK(min(t).item<double>() == 1.0);
  CHECK(max(t).item<double>() == 1.0);
  ring_all_reduce(*pg, t);  // one rank: the sum is the tensor
  CHECK(sum(t).item<double>() == static_cast<double>(t.numel()));
  expect_error<DeviceError>("CPU tensor", [&] { pg->all_reduce(zeros({2})); }, {"cuda:0", "got one on cpu", "Gloo"});
}

NCCL_TEST_CASE("NCCL: a rank that never joins fails the communicator within the timeout, naming it") {
  const auto started = std::chrono::steady_clock::now();
  expect_error<DistributedError>("absent rank", [&] { nccl_group(2, milliseconds(2000)); },
                                 {"rank 0/2", "forming the NCCL communicator", "rank(s) 1 did not join", "2000 ms"});
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
}

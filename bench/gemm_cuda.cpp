// The GPU half of bench_gemm. The raw side is one cuBLASLt matmul (cublasLt.h) with the plan
// cuBLASLt's heuristic ranks first for a 32 MiB workspace, on ember's current stream and buffers;
// f16/bf16 accumulate in f32 as ember does, f32 runs without TF32 unless the precision is tf32.
#include "bench/gemm_cuda.h"

#include <cublasLt.h>

#include "bench/compare.h"
#include "bench/cuda_timer.h"
#include "bench/gpu_peak.h"
#include "cuda/context.h"
#include "cuda/error.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

namespace bench {

namespace {

using ember::Tensor;

constexpr size_t kWorkspace = size_t{32} << 20;  // cuBLASLt's own recommendation for Hopper

cudaDataType_t cuda_type(Precision p) {
  switch (p) {
    case Precision::f16: return CUDA_R_16F;
    case Precision::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// Owns a cuBLASLt handle, the descriptors of one problem and its chosen algorithm.
class LtMatmul {
 public:
  // Row-major C (m x n) = op(A) @ op(B) over ember's buffers, as column-major C^T = op(B)^T op(A)^T.
  LtMatmul(const GemmCase& c, Precision p) {
    EMBER_CUBLAS_CHECK(cublasLtCreate(&handle_));
    const cublasComputeType_t compute = p == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, compute, CUDA_R_32F));
    const cublasOperation_t first = c.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;   // op(B)^T, n x k
    const cublasOperation_t second = c.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;  // op(A)^T, k x m
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first));
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second));
    const cudaDataType_t type = cuda_type(p);
    // Stored column-major shapes: B as (n x k) or, transposed, (k x n); A as (k x m) or (m x k).
    layout(&b_, type, c.b_transposed ? c.k : c.n, c.b_transposed ? c.n : c.k, c.batch, c.n * c.k);
    layout(&a_, type, c.a_transposed ? c.m : c.k, c.a_transposed ? c.k : c.m, c.batch, c.m * c.k);
    layout(&c_, type, c.n, c.m, c.batch, c.m * c.n);
    cublasLtMatmulPreference_t pref = nullptr;
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                            sizeof kWorkspace));
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle_, op_, b_, a_, c_, c_, pref, 1, &heuristic_, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    EMBER_CUBLAS_CHECK(s);
    if (found == 0)
      throw ember::NotImplementedError("cuBLASLt offers no algorithm for GEMM " + c.size_name() + " at " +
                                       precision_name(p));
    workspace_ = Tensor::empty({static_cast<int64_t>(heuristic_.workspaceSize)},
                               ember::TensorOptions(ember::DType::u8).with_device(ember::Device(ember::DeviceType::cuda, 0)));
  }
  ~LtMatmul() {
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(c_);
    cublasLtMatmulDescDestroy(op_);
    cublasLtDestroy(handle_);
  }
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void run(const void* a, const void* b, void* c) const {
    const float one = 1.0f, zero = 0.0f;
    EMBER_CUBLAS_CHECK(cublasLtMatmul(handle_, op_, &one, b, b_, a, a_, &zero, c, c_, c, c_, &heuristic_.algo,
                                      workspace_.raw_data(), heuristic_.workspaceSize, ember::cuda::current_stream()));
  }

 private:
  static void layout(cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t batch,
                     int64_t stride) {
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows));
    if (batch == 1) return;
    const int32_t count = static_cast<int32_t>(batch);
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    EMBER_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }

  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  Tensor workspace_;
};

// Operand `rows x cols` of c on the GPU, stored transposed (cols x rows) when asked.
Tensor operand(const GemmCase& c, int64_t rows, int64_t cols, bool transposed, Precision p) {
  const ember::TensorOptions opts =
      ember::TensorOptions(precision_dtype(p)).with_device(ember::Device(ember::DeviceType::cuda, 0));
  const int64_t r = transposed ? cols : rows, s = transposed ? rows : cols;
  const Tensor t = c.batch > 1 ? ember::randn({c.batch, r, s}, opts) : ember::randn({r, s}, opts);
  return transposed ? ember::transpose(t, -2, -1) : t;
}

void cuda_gemm(benchmark::State& state, const GemmCase& c, Precision p) {
  set_ember_precision(p);
  const Tensor a = operand(c, c.m, c.k, c.a_transposed, p), b = operand(c, c.k, c.n, c.b_transposed, p);
  const Tensor out = Tensor::empty(c.batch > 1 ? ember::Shape{c.batch, c.m, c.n} : ember::Shape{c.m, c.n},
                                   ember::TensorOptions(precision_dtype(p)).with_device(a.device()));
  const LtMatmul raw(c, p);
  const CudaEventTimer timer;
  const Timing t = time_against(
      state, timer, PlainPhase{}, [&] { ember::matmul(a, b); },
      [&] { raw.run(a.raw_data(), b.raw_data(), out.raw_data()); });
  report_flop_case(state, c.flop(), t, c.source);
  set_pct_peak(state, p);
}

}  // namespace

void register_cuda_gemm_cases(const std::vector<GemmCase>& cases) {
  if (ember::backend::cuda_device_count() == 0) return;
  benchmark::AddCustomContext("gpu", cuda_device_name());
  for (Precision p : all_precisions())
    for (const GemmCase& c : cases)
      register_case(gemm_case_name("cuda", p, c), [c, p](benchmark::State& s) { cuda_gemm(s, c, p); });
}

}  // namespace bench

// cuBLASLt GEMMs (cuda/cublaslt.h). A plan (matmul descriptor, matrix layouts and the algorithm the
// heuristic chose) is made once per problem and cached for the life of the process, as are the
// workspaces (see cuda/context.cpp, which holds the handles, on destruction at exit).
#include "cuda/cublaslt.h"

#include <compare>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/context.h"
#include "cuda/error.h"
#include "tensor/cuda_settings.h"
#include "tensor/deterministic.h"
#include "tensor/storage.h"

namespace ember::cuda {

namespace {

// ---- workspaces

// Workspace size as the cuBLAS API reference recommends under cublasSetWorkspace()
// (docs.nvidia.com/cuda/cublas/#cublassetworkspace): 32 MiB on Hopper (SM 9.x) and later, 4 MiB on
// earlier GPUs (PyTorch sizes its cuBLASLt workspace the same way, pytorch#120925).
size_t workspace_bytes(int device) {
  int major = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return (major >= 9 ? 32 : 4) * size_t{1024 * 1024};
}

struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// One workspace per (device, stream), taken from ember's pool: GEMMs queued on two streams may run at
// once, and each must have its scratch to itself. Kept until release_workspace (its stream's end).
struct Workspaces {
  std::mutex mutex;
  std::map<std::pair<int, cudaStream_t>, Workspace> spaces;
};
Workspaces& workspaces() {
  static auto* w = new Workspaces();  // never destroyed: streams may outlive static destruction
  return *w;
}

Workspace workspace(int device, cudaStream_t stream) {
  Workspaces& w = workspaces();
  std::lock_guard<std::mutex> lock(w.mutex);
  auto [it, fresh] = w.spaces.try_emplace({device, stream});
  if (fresh) {
    try {
      const size_t bytes = workspace_bytes(device);
      it->second = {backend::allocate(Device(DeviceType::cuda, device), bytes), bytes};
    } catch (...) {
      w.spaces.erase(it);
      throw;
    }
  }
  return it->second;
}

// ---- the problem and its plan

// The largest of 16, 8, 4, 2 bytes (or 1) that p's address is a multiple of: cuBLASLt's kernels
// choose their vector loads by it (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES).
uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  for (uint32_t a : {16u, 8u, 4u, 2u})
    if (address % a == 0) return a;
  return 1;
}

struct MatrixKey {
  int64_t rows = 0, cols = 0, ld = 0, batch_stride = 0;
  bool transposed = false;
  uint32_t alignment = 0;
  auto operator<=>(const MatrixKey&) const = default;
};

MatrixKey matrix_key(const LtMatrix& x) { return {x.rows, x.cols, x.ld, x.batch_stride, x.transposed, alignment(x.ptr)}; }

// Everything a plan depends on, hence the cache key.
struct PlanKey {
  int device = 0;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int64_t m = 0, n = 0, k = 0;
  int batch = 1;
  MatrixKey a, b;
  uint32_t d_alignment = 0, bias_alignment = 0;
  bool deterministic = false;  // no split-K reduction (tensor/deterministic.h)
  auto operator<=>(const PlanKey&) const = default;
};

cudaDataType_t data_type(DType dtype) {
  check_lt_dtype("matmul", dtype);
  switch (dtype) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

cublasComputeType_t compute_type(DType dtype) {
  if (dtype == DType::f64) return CUBLAS_COMPUTE_64F;
  if (dtype == DType::f32 && matmul_allow_tf32()) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;  // f32, and the f32 accumulation of f16 and bf16
}

std::string describe(const PlanKey& p) {
  auto matrix = [](const MatrixKey& x) {
    // std::string("("): "(" + std::string&& trips GCC 12's -Wrestrict false positive (GCC bug 105329).
    return std::string("(") + std::to_string(x.rows) + "x" + std::to_string(x.cols) + ", ld " + std::to_string(x.ld) +
           (x.transposed ? ", transposed" : "") + ", batch stride " + std::to_string(x.batch_stride) + ", " +
           std::to_string(x.alignment) + "-byte aligned)";
  };
  return "m " + std::to_string(p.m) + ", n " + std::to_string(p.n) + ", k " + std::to_string(p.k) + ", batch " +
         std::to_string(p.batch) + ", A " + matrix(p.a) + ", B " + matrix(p.b) +
         (p.epilogue == CUBLASLT_EPILOGUE_BIAS ? ", bias epilogue" : "");
}

// Owners of cuBLASLt descriptors; destruction runs in destructors, where a failure has no one to tell.
template <class T, cublasStatus_t (*Destroy)(T)>
class Owned {
 public:
  Owned() = default;
  ~Owned() {
    if (p_) Destroy(p_);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T* out() { return &p_; }
  T get() const { return p_; }

 private:
  T p_ = nullptr;
};
using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}
template <class T>
void set(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const T& value) {
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof(value)));
}
template <class T>
void set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

void make_layout(Layout& layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int batch,
                 int64_t batch_stride) {
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout.out(), type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
  if (batch == 1) return;
  set(layout.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t{batch});
  set(layout.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride);
}

struct Plan {
  MatmulDesc desc;
  Layout a, b, d;  // d serves as C too (C and D are one buffer)
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  std::mutex bias_mutex;  // the bias pointer is an attribute of desc, set on each call
};

// The descriptors of problem p and the algorithm cuBLASLt's heuristic ranks first within `most`
// bytes of workspace. `bias` is g's: the heuristic reads its alignment from the pointer.
std::unique_ptr<Plan> make_plan(const PlanKey& p, cublasLtHandle_t handle, size_t most, const void* bias) {
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t scale = p.type == CUDA_R_64F ? CUDA_R_64F : CUDA_R_32F;
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(plan->desc.out(), p.compute, scale));
  const cublasLtMatmulDesc_t desc = plan->desc.get();
  set(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(p.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N));
  set(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(p.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N));
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue);
    set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  make_layout(plan->a, p.type, p.a.rows, p.a.cols, p.a.ld, p.batch, p.a.batch_stride);
  make_layout(plan->b, p.type, p.b.rows, p.b.cols, p.b.ld, p.batch, p.b.batch_stride);
  make_layout(plan->d, p.type, p.m, p.n, p.m, p.batch, p.m * p.n);

  Preference pref;
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(pref.out()));
  set(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{most});
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.a.alignment);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.b.alignment);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.d_alignment);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.d_alignment);
  // Deterministic mode: no split-K algorithms, whose partial sums meet in a reduction of their own.
  // cuBLAS promises the same bits on every run of one algorithm on one GPU model and stream (cuBLAS
  // guide, "Results reproducibility"; each stream has its own workspace here); the heuristic's
  // choice for one problem is fixed too.
  if (p.deterministic)
    set(pref.get(), CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, uint32_t{CUBLASLT_REDUCTION_SCHEME_NONE});

  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc, plan->a.get(), plan->b.get(),
                                                               plan->d.get(), plan->d.get(), pref.get(), 1, &best, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
    const std::string problem = describe(p);
    if (p.deterministic) alert_not_deterministic("matmul on CUDA (" + problem + ")");
    throw NotImplementedError("matmul on CUDA: cuBLASLt has no algorithm for this problem (" + problem + ")");
  }
  EMBER_CUBLAS_CHECK(status);
  plan->algo = best.algo;
  plan->workspace = best.workspaceSize;
  return plan;
}

struct PlanCache {
  std::mutex mutex;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

PlanCache& plan_cache() {
  static PlanCache* c = new PlanCache();  // never destroyed: plans hold descriptors of live handles
  return *c;
}

Plan& plan_for(const PlanKey& p, cublasLtHandle_t handle, size_t most, const void* bias) {
  PlanCache& c = plan_cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.plans.find(p);
    if (it != c.plans.end()) return *it->second;
  }
  std::unique_ptr<Plan> plan = make_plan(p, handle, most, bias);  // outside the lock: it asks the library
  std::lock_guard<std::mutex> lock(c.mutex);
  return *c.plans.try_emplace(p, std::move(plan)).first->second;  // another thread's plan, if it came first
}

}  // namespace

void check_lt_dtype(const char* op, DType dtype) {
  if (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f64) return;
  throw NotImplementedError(std::string(op) + " on CUDA: dtype " + dtype_name(dtype) +
                            " is not supported (float32, float16, bfloat16 and float64 are; integer matmul runs "
                            "on the CPU)");
}

void reserve_workspace(int device, cudaStream_t stream) { (void)workspace(device, stream); }

void release_workspace(int device, cudaStream_t stream) {
  Workspace freed;
  {
    Workspaces& w = workspaces();
    std::lock_guard<std::mutex> lock(w.mutex);
    const auto it = w.spaces.find({device, stream});
    if (it == w.spaces.end()) return;
    freed = it->second;
    w.spaces.erase(it);
  }
  // Freed in the stream's own order: after the GEMMs queued there, without a host wait. Called in
  // teardown: a failure is said, not raised.
  try {
    const cudaStream_t previous = current_stream(device);
    set_current_stream(device, stream);
    backend::deallocate(Device(DeviceType::cuda, device), freed.ptr, freed.bytes);
    set_current_stream(device, previous);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: freeing the GEMM workspace of a stream on cuda:%d failed: %s\n", device, e.what());
  }
}

void lt_matmul(const LtGemm& g) {
  const int device = current_device();
  const cublasLtHandle_t handle = cublaslt_handle();
  const cudaStream_t stream = current_stream(device);
  const Workspace ws = workspace(device, stream);

  PlanKey p;
  p.device = device;
  p.type = data_type(g.dtype);
  p.compute = compute_type(g.dtype);
  p.epilogue = g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.batch = g.batch;
  p.a = matrix_key(g.a);
  p.b = matrix_key(g.b);
  p.d_alignment = alignment(g.d);
  p.bias_alignment = g.bias ? alignment(g.bias) : 0;
  p.deterministic = is_deterministic();
  Plan& plan = plan_for(p, handle, ws.bytes, g.bias);

  // alpha and beta have the scale type: double for f64, float otherwise.
  const float one_f = 1.0f, beta_f = g.accumulate ? 1.0f : 0.0f;
  const double one_d = 1.0, beta_d = g.accumulate ? 1.0 : 0.0;
  const bool f64 = g.dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  std::unique_lock<std::mutex> bias_lock;
  if (g.bias) {
    bias_lock = std::unique_lock<std::mutex>(plan.bias_mutex);
    set(plan.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  }
  EMBER_CUBLAS_CHECK(cublasLtMatmul(handle, plan.desc.get(), alpha, g.a.ptr, plan.a.get(), g.b.ptr, plan.b.get(),
                                    beta, g.d, plan.d.get(), g.d, plan.d.get(), &plan.algo, ws.ptr, plan.workspace,
                                    stream));
}

size_t matmul_plan_cache_size() {
  PlanCache& c = plan_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.plans.size();
}

}  // namespace ember::cuda

// The stand-ins of cpu/conv_dnnl.cpp in a build without oneDNN: every pass is left to ember's own kernel.
#include "cpu/conv_dnnl.h"

namespace ember {

namespace cpu {
bool dnnl_conv_forward(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) { return false; }
bool dnnl_conv_backward_input(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) { return false; }
bool dnnl_conv_backward_weight(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) { return false; }
}  // namespace cpu

void set_cpu_conv_dnnl(bool) {}
bool cpu_conv_dnnl() { return false; }
size_t cpu_conv_dnnl_cache_size() { return 0; }

}  // namespace ember

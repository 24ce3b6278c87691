// The ember._ember extension module: each bind_*.cpp file adds one concept (errors, dtypes, the Tensor
// class, ops, factories, indexing, interchange, CUDA devices, autograd; then the training stack: nn,
// functional, optim, precision modes, whole-step capture, io, data, dist). The order matters where a
// part adds to what an earlier one made: Tensor exists before the parts that add its methods, nn's
// module handle before data and dist use it.
#include <cstdlib>

#include "python/ember/bind.h"

NB_MODULE(_ember, m) {
  using namespace ember::python;
  m.doc() = "ember's C++ core: tensors, ops and autograd (import ember, not this module).";
  // Python callables held by the graph (hooks, custom backwards) can form cycles through C++ that Python's
  // collector cannot see; when such a cycle is alive at exit nanobind reports it as a leak. Those reports
  // help while developing the bindings, so EMBER_LEAK_WARNINGS=1 turns them on.
  nb::set_leak_warnings(std::getenv("EMBER_LEAK_WARNINGS") != nullptr);
  // A string that names no device ("gpu") fails the implicit str -> device conversion; nanobind would
  // print that failure to stderr before raising its TypeError, which already says what was passed.
  nb::set_implicit_cast_warnings(false);
  bind_errors(m);
  bind_dtype(m);
  bind_tensor_class(m);
  bind_tensor_attributes(m);
  bind_ops(m);
  bind_composed_ops(m);
  bind_factory(m);
  bind_index(m);
  bind_interop(m);
  bind_cuda(m);
  bind_autograd(m);
  bind_nn(m);
  bind_functional(m);
  bind_optim(m);
  bind_precision(m);
  bind_compiled_step(m);
  bind_io(m);
  bind_data(m);
  bind_dist(m);
}

// ember.cuda's and ember.backends' C++ half: the devices (count, current one, synchronize), each GPU's
// memory figures and cache, user streams and events, and the process-wide CUDA switches (TF32, cuDNN's
// benchmark mode). Without a GPU every device call raises DeviceError; the switches exist in every
// build and change nothing on the CPU.
#include "python/ember/bind.h"

namespace ember::python {

namespace {

Device cuda_device(int index) { return Device(DeviceType::cuda, index); }

// torch.cuda.memory_stats' keys, for the figures ember keeps.
nb::dict memory_stats(int device) {
  const backend::MemoryStats s = backend::memory_stats(cuda_device(device));
  nb::dict d;
  d["allocated_bytes.all.current"] = s.allocated;
  d["allocated_bytes.all.peak"] = s.peak;
  d["reserved_bytes.all.current"] = s.reserved;
  d["allocation.all.allocated"] = s.allocations;
  d["allocation.all.current"] = s.live_allocations;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  return d;
}

// `with ember.cuda.stream(s):` makes s current for the block: a cuda::StreamGuard from __enter__ to
// __exit__.
struct StreamScope {
  nb::object stream;  // the Python stream, kept alive while the scope is
  std::optional<cuda::StreamGuard> guard;
};

}  // namespace

void bind_cuda(nb::module_& m) {
  m.def("_cuda_device_count", &backend::cuda_device_count, "Visible CUDA devices (0 without CUDA).");
  m.def("_cuda_synchronize",
        [](int device) {
          cuda::Event e;
          e.record(device);
          e.synchronize();
        },
        "device"_a = 0, nb::call_guard<nb::gil_scoped_release>(), "Waits for the current stream of cuda:device.");
  m.def("_cuda_set_device", &cuda::set_device, "device"_a, doc::cuda_set_device);
  m.def("_cuda_current_device", &cuda::current_device, doc::cuda_current_device);
  m.def("_cuda_memory_stats", &memory_stats, "device"_a, doc::backend_memory_stats);
  m.def("_cuda_reset_peak_memory_stats", [](int device) { backend::reset_peak_memory_stats(cuda_device(device)); },
        "device"_a, doc::backend_reset_peak_memory_stats);
  m.def("_cuda_empty_cache", [](int device) { backend::empty_cache(cuda_device(device)); }, "device"_a,
        nb::call_guard<nb::gil_scoped_release>(), doc::backend_empty_cache);

  nb::class_<cuda::Stream>(m, "_CudaStream", doc::cuda_Stream)
      .def(nb::init<int>(), "device"_a = 0, doc::cuda_Stream_Stream)
      .def_prop_ro("device_index", &cuda::Stream::device, doc::cuda_Stream_device)
      .def_prop_ro("cuda_stream", [](const cuda::Stream& s) { return reinterpret_cast<uintptr_t>(s.handle()); },
                   doc::cuda_Stream_handle)
      .def("synchronize", &cuda::Stream::synchronize, nb::call_guard<nb::gil_scoped_release>(),
           doc::cuda_Stream_synchronize)
      .def("wait_event", &cuda::Stream::wait, "event"_a, doc::cuda_Stream_wait);
  nb::class_<cuda::Event>(m, "_CudaEvent", doc::cuda_Event)
      .def(nb::init<bool>(), "enable_timing"_a = false, doc::cuda_Event_Event)
      .def("_record_on_stream", nb::overload_cast<const cuda::Stream&>(&cuda::Event::record), "stream"_a,
           doc::cuda_Event_record)
      .def("_record_on_device", nb::overload_cast<int>(&cuda::Event::record), "device"_a, doc::cuda_Event_record)
      .def("query", &cuda::Event::query, doc::cuda_Event_query)
      .def("synchronize", &cuda::Event::synchronize, nb::call_guard<nb::gil_scoped_release>(),
           doc::cuda_Event_synchronize)
      .def("_wait_on_device", &cuda::Event::wait, "device"_a, doc::cuda_Event_wait)
      .def("elapsed_time", &cuda::Event::elapsed_ms, "end_event"_a, doc::cuda_Event_elapsed_ms);
  nb::class_<StreamScope>(m, "_CudaStreamScope", "Makes a stream current from __enter__ to __exit__.")
      .def(nb::init<nb::object>(), "stream"_a)
      .def("__enter__",
           [](StreamScope& s) {
             s.guard.emplace(nb::cast<const cuda::Stream&>(s.stream));
             return s.stream;
           })
      .def("__exit__", [](StreamScope& s, nb::args) { s.guard.reset(); });

  m.def("_set_matmul_allow_tf32", &cuda::set_matmul_allow_tf32, "on"_a, doc::cuda_set_matmul_allow_tf32);
  m.def("_matmul_allow_tf32", &cuda::matmul_allow_tf32, doc::cuda_matmul_allow_tf32);
  m.def("_set_conv_allow_tf32", &cuda::set_conv_allow_tf32, "on"_a, doc::cuda_set_conv_allow_tf32);
  m.def("_conv_allow_tf32", &cuda::conv_allow_tf32, doc::cuda_conv_allow_tf32);
  m.def("_set_cudnn_benchmark", &cuda::set_benchmark, "on"_a, doc::cuda_set_benchmark);
  m.def("_cudnn_benchmark", &cuda::benchmark, doc::cuda_benchmark);
}

}  // namespace ember::python

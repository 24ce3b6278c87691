// What the parts of the extension that bind the training stack (bind_optim, bind_dist) share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "python/ember/bind.h"
#include "python/ember/ember_headers_train.h"

namespace ember::python {

/// A new optimizer of `kind` ("SGD", "Adam", "AdamW", "LAMB") over one group of `params`, with
/// `options` (PyTorch's names, betas as beta1 and beta2, booleans as 0/1) over the kind's defaults;
/// ValueError for another kind or an option the kind does not have (bind_optim.cpp).
std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, std::vector<Tensor> params,
                                                 const optim::GroupOptions& options);

/// The device type of "cpu" or "cuda" (DeviceError otherwise).
DeviceType device_type_of(const std::string& name);

}  // namespace ember::python

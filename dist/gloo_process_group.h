/// @file
/// The Gloo backend: a ProcessGroup for CPU tensors over Gloo's TCP transport (Debian's libgloo-dev),
/// rendezvousing through an ember Store. Built only where Gloo was found (Meson option `gloo`).
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"

namespace ember::dist {

/// The Gloo backend's settings.
struct GlooOptions {
  milliseconds timeout = kDefaultTimeout;  ///< connecting and each collective, unless a call overrides it
  bool debug = false;                      ///< check every collective's signature through the store
  /// The network interface Gloo binds to (GLOO_SOCKET_IFNAME); empty: the interface whose route
  /// leads to master_addr, or the address this host's name resolves to when that is empty too.
  std::string socket_ifname;
  std::string master_addr;  ///< rank 0's host, to find the interface whose route leads there
};

/// Whether this ember was built with Gloo (otherwise make_gloo_process_group raises).
bool has_gloo();

/// Connects the size ranks of a group (each calls it with its rank and a store reaching the same keys).
/// Sets SIGPIPE to ignored when it has its default action: a dead peer's socket must raise an error
/// in Gloo, not end the process.
/// NotImplementedError naming libgloo-dev when ember was built without Gloo.
std::shared_ptr<ProcessGroup> make_gloo_process_group(std::shared_ptr<Store> store, int rank, int size,
                                                      const GlooOptions& options = {});

}  // namespace ember::dist

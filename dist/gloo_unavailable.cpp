// The stand-in for the Gloo backend in a build without Gloo: CPU process groups raise.
#include "dist/gloo_process_group.h"

namespace ember::dist {

bool has_gloo() { return false; }

std::shared_ptr<ProcessGroup> make_gloo_process_group(std::shared_ptr<Store>, int, int, const GlooOptions&) {
  throw NotImplementedError(
      "dist: this ember was built without Gloo, which CPU process groups need: install libgloo-dev (Debian) "
      "and rebuild (meson option -Dgloo=enabled makes its absence an error)");
}

}  // namespace ember::dist

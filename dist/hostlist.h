// Slurm's compressed host lists, as in SLURM_STEP_NODELIST: "gnode[10,20-22],other" names
// gnode10, gnode20, gnode21, gnode22 and other; "n[01-02]-ib[1-2]" pads and multiplies.
#pragma once

#include <string>
#include <vector>

namespace ember::dist {

// The host names a list spells, in order; ValueError naming the list when it is malformed.
std::vector<std::string> expand_hostlist(const std::string& list);

}  // namespace ember::dist

#include "dist/init.h"

#include <algorithm>

#include "dist/file_store.h"
#include "dist/gloo_process_group.h"
#include "dist/hostlist.h"
#include "dist/nccl_process_group.h"
#include "dist/parse.h"
#include "dist/prefix_store.h"
#include "dist/tcp_store.h"
#include "tensor/cuda_stream.h"
#include "tensor/printable.h"
#include "tensor/storage.h"

extern char** environ;

namespace ember::dist {

namespace {

constexpr int64_t kMaxWorldSize = 1 << 24;
constexpr int kSlurmBasePort = 15000;

const std::string* lookup(const Environment& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// The variable names a launcher sets.
struct LauncherVars {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};
constexpr LauncherVars kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr LauncherVars kOpenMpi{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr LauncherVars kSlurm{"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"};

const LauncherVars* detect_launcher(const Environment& env) {
  for (const LauncherVars* l : {&kTorchrun, &kOpenMpi, &kSlurm})
    if (lookup(env, l->rank) || lookup(env, l->world_size)) return l;
  return nullptr;
}

// An integer from the arguments, else from the variable, else nullopt.
std::optional<int> integer(std::optional<int> given, const char* what, const Environment& env, const char* var,
                           int64_t min, int64_t max) {
  if (given) return static_cast<int>(check_in_range(what, *given, min, max));
  if (var == nullptr) return std::nullopt;
  if (const std::string* text = lookup(env, var)) return static_cast<int>(parse_integer(var, *text, min, max));
  return std::nullopt;
}

// Slurm's tasks on this node from SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 on each of 3 nodes, then 1).
std::optional<int> slurm_tasks_on_node(const Environment& env) {
  const std::string* list = lookup(env, "SLURM_STEP_TASKS_PER_NODE");
  if (!list) return std::nullopt;
  const std::string* node_text = lookup(env, "SLURM_NODEID");
  const int64_t node = node_text ? parse_integer("SLURM_NODEID", *node_text, 0, kMaxWorldSize) : 0;
  int64_t seen = 0;
  size_t start = 0;
  while (start < list->size()) {
    const size_t comma = std::min(list->find(',', start), list->size());
    const std::string item = list->substr(start, comma - start);
    const size_t paren = item.find("(x");
    const int64_t tasks = parse_integer("SLURM_STEP_TASKS_PER_NODE entry", item.substr(0, paren), 1, kMaxWorldSize);
    int64_t repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')')
        throw ValueError("SLURM_STEP_TASKS_PER_NODE='" + printable(*list) + "': bad entry '" + printable(item) + "'");
      repeat = parse_integer("SLURM_STEP_TASKS_PER_NODE repeat", item.substr(paren + 2, item.size() - paren - 3), 1, kMaxWorldSize);
    }
    if (node < seen + repeat) return static_cast<int>(tasks);
    seen += repeat;
    start = comma + 1;
  }
  throw ValueError("SLURM_STEP_TASKS_PER_NODE='" + printable(*list) + "' lists " + std::to_string(seen) + " nodes but SLURM_NODEID is " +
                   std::to_string(node));
}

int port_from(const char* var, const std::string& text, int offset) {
  return static_cast<int>(parse_integer(var, text, 1, 65535 - offset)) + offset;
}

// The tcp:// of init_method: "tcp://host:port", "tcp://[::1]:port".
void parse_tcp(const std::string& method, ResolvedInit& out) {
  const std::string rest = method.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw ValueError("init_method '" + printable(method) + "': expected tcp://host:port");
  std::string host = rest.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) throw ValueError("init_method '" + printable(method) + "': the host is empty");
  out.host = host;
  out.port = static_cast<int>(parse_integer("init_method '" + method + "' port", rest.substr(colon + 1), 1, 65535));
}

}  // namespace

Environment process_environment() {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

ResolvedInit resolve_init(const InitOptions& options, const Environment& env) {
  ResolvedInit out;
  const LauncherVars* launcher = detect_launcher(env);
  out.launcher = launcher ? launcher->name : "arguments";
  const auto var = [&](const char* LauncherVars::*field) { return launcher ? launcher->*field : nullptr; };

  const auto world_size = integer(options.world_size, "world_size", env, var(&LauncherVars::world_size), 1, kMaxWorldSize);
  // A launcher's variables half set (its rank without its size, or the reverse) are named as such.
  const auto half_set = [&](const char* set, const char* unset) {
    return ValueError("init: " + std::string(launcher->name) + "'s " + set + " is set but " + unset + " is not");
  };
  if (!world_size) {
    if (launcher && !options.world_size) throw half_set(launcher->rank, launcher->world_size);
    throw ValueError("init: world_size is not given and no launcher set it (torchrun's WORLD_SIZE, Open MPI's "
                     "OMPI_COMM_WORLD_SIZE, Slurm's SLURM_NTASKS)");
  }
  out.world_size = *world_size;
  const auto rank = integer(options.rank, "rank", env, var(&LauncherVars::rank), 0, out.world_size - 1);
  if (!rank) {
    if (launcher && lookup(env, launcher->world_size)) throw half_set(launcher->world_size, launcher->rank);
    throw ValueError("init: rank is not given and no launcher set it (torchrun's RANK, Open MPI's "
                     "OMPI_COMM_WORLD_RANK, Slurm's SLURM_PROCID)");
  }
  out.rank = *rank;

  std::optional<int> local_world_size =
      integer(options.local_world_size, "local_world_size", env, var(&LauncherVars::local_world_size), 1, out.world_size);
  if (!local_world_size && launcher == &kSlurm) local_world_size = slurm_tasks_on_node(env);
  out.local_world_size = local_world_size.value_or(launcher ? 1 : out.world_size);
  const auto local_rank = integer(options.local_rank, "local_rank", env, var(&LauncherVars::local_rank), 0, out.local_world_size - 1);
  out.local_rank = local_rank.value_or(launcher ? 0 : out.rank % out.local_world_size);

  out.timeout = options.timeout;
  if (options.timeout.count() <= 0)
    throw ValueError("init: the timeout must be positive, got " + std::to_string(options.timeout.count()) + " ms");
  if (options.backend != "gloo" && options.backend != "nccl")
    throw ValueError("init: backend '" + options.backend + "' is not \"gloo\" or \"nccl\"");
  out.backend = options.backend;
  if (options.debug) out.debug = *options.debug;
  else if (const std::string* d = lookup(env, "EMBER_DIST_DEBUG")) out.debug = parse_integer("EMBER_DIST_DEBUG", *d, 0, 1) == 1;
  if (const std::string* ifname = lookup(env, "GLOO_SOCKET_IFNAME")) out.socket_ifname = *ifname;

  const std::string& method = options.init_method;
  if (method.rfind("file://", 0) == 0) {
    out.rendezvous = ResolvedInit::Rendezvous::file;
    out.path = method.substr(7);
    if (out.path.empty() || out.path[0] != '/')
      throw ValueError("init_method '" + printable(method) + "': expected file:///absolute/path (three slashes)");
    return out;
  }
  if (method.rfind("tcp://", 0) == 0) {
    parse_tcp(method, out);
    return out;
  }
  if (method != "env://")
    throw ValueError("init_method '" + printable(method) + "' is not env://, tcp://host:port or file:///path");

  // env://: rank 0's host and the store's port from the arguments and the launcher's variables.
  const std::string* master_addr = lookup(env, "MASTER_ADDR");
  if (!options.master_addr.empty()) out.host = options.master_addr;
  else if (master_addr) out.host = *master_addr;
  else if (launcher == &kSlurm && (lookup(env, "SLURM_STEP_NODELIST") || lookup(env, "SLURM_JOB_NODELIST")))
    out.host = expand_hostlist(*(lookup(env, "SLURM_STEP_NODELIST") ? lookup(env, "SLURM_STEP_NODELIST")
                                                                      : lookup(env, "SLURM_JOB_NODELIST"))).front();
  else if (out.world_size == 1) out.host = "127.0.0.1";
  else throw ValueError("init: no master address: set MASTER_ADDR (rank 0's host) or pass master_addr");

  const std::string* master_port = lookup(env, "MASTER_PORT");
  if (options.store_port) out.port = static_cast<int>(parse_integer("store_port", std::to_string(*options.store_port), 1, 65535));
  else if (const std::string* p = lookup(env, "EMBER_STORE_PORT")) out.port = port_from("EMBER_STORE_PORT", *p, 0);
  else if (master_port) out.port = port_from("MASTER_PORT", *master_port, launcher == &kTorchrun ? 1 : 0);
  else if (launcher == &kSlurm && lookup(env, "SLURM_JOB_ID"))
    out.port = kSlurmBasePort + static_cast<int>(parse_integer("SLURM_JOB_ID", *lookup(env, "SLURM_JOB_ID"), 0, INT64_MAX) % 20000);
  else if (out.world_size == 1) out.port = 0;
  else throw ValueError("init: no store port: set MASTER_PORT or EMBER_STORE_PORT, or pass store_port");
  return out;
}

namespace {

// The GPU of an NCCL rank, as torchrun users set it: cuda:LOCAL_RANK, or the one GPU a rank sees when
// the launcher gave each rank its own (Slurm's --gpus-per-task, CUDA_VISIBLE_DEVICES per rank).
int nccl_device(const ResolvedInit& init) {
  if (!has_nccl()) return 0;  // make_nccl_process_group says what is missing
  const int visible = backend::cuda_device_count();
  if (visible <= 1) return 0;  // none: make_nccl_process_group says so
  if (init.local_rank < visible) return init.local_rank;
  throw DeviceError("init: local rank " + std::to_string(init.local_rank) + " needs cuda:" + std::to_string(init.local_rank) +
                    " but this process sees " + std::to_string(visible) + " GPU(s): start at most one rank per GPU");
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const ResolvedInit& init) {
  std::shared_ptr<Store> store;
  if (init.rendezvous == ResolvedInit::Rendezvous::file) {
    store = std::make_shared<FileStore>(init.path, init.timeout);
  } else {
    store = std::make_shared<TCPStore>(init.host, init.port, TCPStoreOptions{init.rank == 0, init.timeout});
  }
  auto group_store = std::make_shared<PrefixStore>("default_pg", store);
  if (init.backend == "nccl") {
    NcclOptions nccl;
    nccl.timeout = init.timeout;
    nccl.debug = init.debug;
    nccl.device = nccl_device(init);
    // The rank's GPU becomes this thread's current device, as torchrun scripts call
    // torch.cuda.set_device(LOCAL_RANK): else every rank opens a context on cuda:0, and work that
    // names no device lands there.
    if (backend::cuda_device_count() > 0) cuda::set_device(nccl.device);
    return make_nccl_process_group(group_store, init.rank, init.world_size, nccl);
  }
  GlooOptions gloo;
  gloo.timeout = init.timeout;
  gloo.debug = init.debug;
  gloo.socket_ifname = init.socket_ifname;
  gloo.master_addr = init.rendezvous == ResolvedInit::Rendezvous::tcp ? init.host : "";
  return make_gloo_process_group(group_store, init.rank, init.world_size, gloo);
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  return init_process_group(resolve_init(options, process_environment()));
}

}  // namespace ember::dist

/// @file
/// Starting a job's process group: the options, their resolution from explicit arguments and the
/// launcher's environment (torchrun, Open MPI, Slurm, in that order), and init_process_group.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "dist/process_group.h"

namespace ember::dist {

/// What a program may state; anything unset comes from the environment.
struct InitOptions {
  /// this process's rank, the ranks in all, its rank on this node and the ranks on this node @{
  std::optional<int> rank, world_size, local_rank, local_world_size;
  /// @}
  std::string master_addr;                 ///< host of rank 0, which serves the store
  std::optional<int> store_port;           ///< the store's port (not torchrun's MASTER_PORT, which its agent holds)
  std::string init_method = "env://";      ///< env://, tcp://host:port or file:///path
  milliseconds timeout = kDefaultTimeout;  ///< bound of the rendezvous and of every collective
  std::string backend = "gloo";            ///< "gloo" (CPU tensors) or "nccl" (CUDA tensors)
  std::optional<bool> debug;               ///< check collectives through the store; unset: EMBER_DIST_DEBUG=1
};

/// Everything init_process_group needs, resolved.
struct ResolvedInit {
  /// this process's rank, the ranks in all, its rank on this node and the ranks on this node @{
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  /// @}
  std::string launcher;  ///< where rank and size came from: "arguments", "torchrun", "Open MPI", "Slurm"
  /// how the ranks meet: a TCP store or a file store @{
  enum class Rendezvous { tcp, file } rendezvous = Rendezvous::tcp;
  /// @}
  std::string host;  ///< tcp: rank 0's address
  int port = 0;      ///< tcp: the store's port (0 only for a world of one: any free port)
  std::string path;  ///< file: the store file
  milliseconds timeout = kDefaultTimeout;  ///< bound of the rendezvous and of every collective
  std::string backend = "gloo";            ///< "gloo" or "nccl"
  bool debug = false;                      ///< check every collective through the store
  std::string socket_ifname;               ///< GLOO_SOCKET_IFNAME
};

using Environment = std::map<std::string, std::string>;  ///< Environment variables by name.

/// This process's environment variables.
Environment process_environment();

/// Resolves options against env (a map, so tests need not touch the real environment): each value
/// from the arguments, else from the first launcher present: torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, MASTER_ADDR; the store on EMBER_STORE_PORT, else MASTER_PORT + 1), Open MPI
/// (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE; MASTER_ADDR and MASTER_PORT required),
/// Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE or SLURM_STEP_TASKS_PER_NODE;
/// the master is MASTER_ADDR or the first host of SLURM_STEP_NODELIST, the port EMBER_STORE_PORT,
/// MASTER_PORT, or 15000 + SLURM_JOB_ID % 20000). Numbers are parsed strictly; ValueError names
/// the variable and its text.
ResolvedInit resolve_init(const InitOptions& options, const Environment& env);

/// Creates the store (rank 0 serves the TCP store) and the backend's process group.
std::shared_ptr<ProcessGroup> init_process_group(const ResolvedInit& init);
/// resolve_init with this process's environment, then init_process_group.
std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});

}  // namespace ember::dist

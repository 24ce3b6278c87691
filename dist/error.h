/// @file
/// DistributedError: what dist/ raises when a peer, the store or the network fails or times out.
/// Its message names this rank, the operation, the peer or host:port, the key and the timeout.
#pragma once

#include "tensor/error.h"

namespace ember::dist {

class DistributedError : public Error { using Error::Error; };
/// Ranks issued different collectives (or shapes, dtypes) under one sequence number: found by the
/// debug check, before any data moved, on every rank alike.
class CollectiveMismatchError : public DistributedError { using DistributedError::DistributedError; };

}  // namespace ember::dist

// Work that every rank runs and whose failure every rank shares: the decisions a job must take
// together (a bad configuration, a corrupt checkpoint, a diverged loss) end every rank at the same
// point, with the same message, instead of leaving the ranks that did not fail in a collective.
#pragma once

#include <functional>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

// Collective over comm: runs fn() on every rank, then agrees whether any rank threw. If one did,
// the lowest failing rank rethrows its own exception and every other rank throws a PeerError
// (core/error.h) carrying that exception's message word for word, so a caller that catches the
// error finds every rank past the same collective (nullptr or one rank: a plain call).
void run_agreed(Communicator* comm, const std::function<void()>& fn);

}  // namespace tessera::parallel

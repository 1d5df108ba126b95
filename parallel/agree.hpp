// Agreement on failure: ranks that hit an error and ranks that did not both reach this point,
// learn whether anyone failed, and all throw the same CollectiveError, so that no rank waits
// forever in a collective its failed peers never enter.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace gridlm::parallel {

// Collective. `local_error` is empty on ranks that are fine. When any rank failed, every rank
// throws CollectiveError whose text groups identical messages by rank ("ranks 0-7: ...").
void agree_on_errors(MPI_Comm comm, const std::string& local_error);

// Runs `body` and agrees on whether it threw gridlm::Error on any rank. A CollectiveError that
// `body` threw is passed on as it is when all of `comm` agreed on it, and agreed again when it
// came from fewer ranks (a sub-communicator's agreement).
void run_agreed(MPI_Comm comm, const std::function<void()>& body);

} // namespace gridlm::parallel

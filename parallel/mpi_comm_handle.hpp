// Shared ownership of MPI communicators: the handle frees its communicator with MPI_Comm_free
// when the last owner goes, so grids and Comm objects can be passed around without leaks.
#pragma once

#include <mpi.h>

#include <memory>

namespace gridlm::parallel {

using MpiCommHandle = std::shared_ptr<MPI_Comm>;

// Takes ownership of a communicator created by MPI (never MPI_COMM_WORLD/SELF).
MpiCommHandle own_comm(MPI_Comm comm);
// Wraps a communicator gridlm does not own (MPI_COMM_WORLD); it is never freed.
MpiCommHandle borrow_comm(MPI_Comm comm);

} // namespace gridlm::parallel

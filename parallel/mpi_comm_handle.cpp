// RAII deleter for MPI communicators.
#include "parallel/mpi_comm_handle.hpp"

namespace gridlm::parallel {

MpiCommHandle own_comm(MPI_Comm comm) {
  return MpiCommHandle(new MPI_Comm(comm), [](MPI_Comm* c) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // Freeing after MPI_Finalize is erroneous; by then MPI has released everything anyway.
    if (!finalized && *c != MPI_COMM_NULL) MPI_Comm_free(c);
    delete c;
  });
}

MpiCommHandle borrow_comm(MPI_Comm comm) { return std::make_shared<MPI_Comm>(comm); }

} // namespace gridlm::parallel

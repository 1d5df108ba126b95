// Agreement on failure across ranks.
#include "parallel/agree.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::parallel {
namespace {

// "0-3,6" from a sorted list of ranks.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty()) out += ",";
    out += j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : std::to_string(ranks[i]);
    i = j + 1;
  }
  return out;
}

} // namespace

void agree_on_errors(MPI_Comm comm, const std::string& local_error) {
  const int mine = local_error.empty() ? 0 : 1;
  int failures = 0;
  {
    // With its members, so that a rank held up before the agreement (on a file system, say)
    // is named as the one the others wait for.
    const flight::BlockingScope recorded(
        "all_reduce (error agreement)", "comm", sizeof(int),
        std::make_shared<const std::vector<int>>(world_ranks(comm)));
    // Completed under the wait policy, so that an oversubscribed node does not spin here.
    MPI_Request request = MPI_REQUEST_NULL;
    GRIDLM_MPI_CHECK(MPI_Iallreduce(&mine, &failures, 1, MPI_INT, MPI_SUM, comm, &request));
    complete(request, "MPI_Iallreduce (error agreement)");
  }
  if (failures == 0) return;

  // Everyone learns every message, grouped by text, so any rank can print the report.
  int size = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int len = static_cast<int>(local_error.size());
  std::vector<int> lens(size), offsets(size);
  GRIDLM_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = total;
    total += lens[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  GRIDLM_MPI_CHECK(MPI_Allgatherv(local_error.data(), len, MPI_CHAR, all.data(), lens.data(),
                                  offsets.data(), MPI_CHAR, comm));
  // Groups in order of their lowest rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < size; ++r) {
    if (lens[r] == 0) continue;
    std::string text = all.substr(offsets[r], lens[r]);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == text; });
    if (it == groups.end()) {
      groups.push_back({std::move(text), {r}});
    } else {
      it->second.push_back(r);
    }
  }
  std::string report;
  for (const auto& [text, ranks] : groups) {
    if (!report.empty()) report += "\n";
    report +=
        fmt::format("{} {}: {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks), text);
  }
  int rank = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  throw CollectiveError(report, rank == 0, size, local_error);
}

void run_agreed(MPI_Comm comm, const std::function<void()>& body) {
  std::string error;
  try {
    body();
  } catch (const CollectiveError& e) {
    // Every rank of `comm` throws one agreed over all of them. One agreed over fewer (a
    // sub-communicator, or MPI_COMM_SELF around one rank's file) the others have not seen:
    // they wait below, so it is agreed again here.
    int size = 0;
    GRIDLM_MPI_CHECK(MPI_Comm_size(comm, &size));
    if (e.agreed_by() >= size) throw;
    error = e.local().empty() ? e.what() : e.local();
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    // From the standard library (a file system error, an allocation): agreed all the same, so
    // that the other ranks do not wait.
    error = e.what();
  }
  agree_on_errors(comm, error);
}

} // namespace gridlm::parallel

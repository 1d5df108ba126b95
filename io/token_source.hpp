// Where training tokens come from. A source is indexed by global sample number, so that the
// samples of a step do not depend on how many data-parallel replicas share it: replica r of R
// at step s with B samples each reads samples (s * R + r) * B ... + B - 1 of its cursor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gridlm::io {

class TokenSource {
public:
  virtual ~TokenSource() = default;
  virtual int vocab_size() const = 0;
  // Writes sample `index` (length tokens) to out.
  virtual void sample(std::int32_t* out, std::uint64_t index, int length) const = 0;
  // One line for the start-up report.
  virtual std::string describe() const = 0;

  // What, with the seed, fixes the samples' order of a stored source: its tokens and documents.
  // A checkpoint records it so that a resumed run can tell a dataset remade at the same path.
  struct Extent {
    std::uint64_t tokens = 0, documents = 0;
    std::uint64_t samples = 0; // per epoch, of the length the source was opened for
  };
  // nullopt for a generated source (its seed alone fixes its samples).
  virtual std::optional<Extent> extent() const { return std::nullopt; }
};

} // namespace gridlm::io

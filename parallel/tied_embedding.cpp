// The tied-embedding gradient exchange between the first and the last pipeline stage.
#include "parallel/tied_embedding.hpp"

namespace gridlm::parallel {

TiedEmbeddingSum::TiedEmbeddingSum(Comm& pp, Stage* first, Stage* last, int tag)
    : pp_(pp), first_(first), last_(last), tag_(tag) {
  if (!holds()) return;
  if (first_ == nullptr || last_ == nullptr) {
    own_ = first_ != nullptr ? first_ : last_;
    peer_ = first_ != nullptr ? pp.size() - 1 : 0;
  }
  // Allocated once: they are the size of the embedding, which a step must not allocate anew.
  mine_.resize((first_ != nullptr ? first_ : last_)->tied_embedding_size());
  theirs_.resize(mine_.size());
}

void TiedEmbeddingSum::post(const Stage* chunk) {
  if (peer_ < 0 || posted_ || chunk != own_) return;
  own_->copy_to_host(mine_.data(), own_->tied_embedding_grad().data(), mine_.size());
  recv_ = pp_.irecv(Span<float>(theirs_), peer_, tag_);
  send_ = pp_.isend(Span<const float>(mine_), peer_, tag_);
  posted_ = true;
}

void TiedEmbeddingSum::finish() {
  if (!holds()) return;
  if (peer_ < 0) {
    // Both copies on this rank (one pipeline stage of several chunks).
    const std::size_t n = mine_.size();
    float* a = mine_.data();
    first_->copy_to_host(a, first_->tied_embedding_grad().data(), n);
    last_->copy_to_host(theirs_.data(), last_->tied_embedding_grad().data(), n);
    for (std::size_t i = 0; i < n; ++i)
      a[i] += theirs_[i];
    first_->copy_from_host(first_->tied_embedding_grad().data(), a, n);
    last_->copy_from_host(last_->tied_embedding_grad().data(), a, n);
    return;
  }
  post(own_);
  recv_.wait();
  send_.wait(); // mine_ is written below
  // first + last in that order on both ranks, so that the two copies stay equal bit for bit.
  float* sum = first_ != nullptr ? mine_.data() : theirs_.data();
  const float* other = first_ != nullptr ? theirs_.data() : mine_.data();
  for (std::size_t i = 0; i < mine_.size(); ++i)
    sum[i] += other[i];
  own_->copy_from_host(own_->tied_embedding_grad().data(), sum, mine_.size());
  posted_ = false;
}

} // namespace gridlm::parallel

// The synthetic corpus's grammar and word lists.
#include "io/synthetic_corpus.hpp"

#include <array>
#include <cctype>
#include <cstring>
#include <vector>

#include "io/sample_order.hpp"

namespace gridlm::io {
namespace {

struct Topic {
  const char* place;                 // the title's "at the farm"
  std::vector<const char*> animates; // things that act
  std::vector<const char*> things;   // things acted on
  std::vector<const char*> spots;    // where things happen
};

const std::array<Topic, 6>& topics() {
  static const std::array<Topic, 6> t = {{
      {"farm",
       {"cow", "horse", "pig", "goat", "hen", "dog", "farmer", "duck"},
       {"hay", "apple", "egg", "fence", "cart", "bucket"},
       {"barn", "field", "yard", "pond"}},
      {"sea",
       {"crab", "sailor", "gull", "whale", "seal", "diver", "otter"},
       {"boat", "shell", "net", "rope", "anchor", "wave"},
       {"beach", "harbor", "island", "dock"}},
      {"city",
       {"driver", "baker", "clerk", "officer", "artist", "child"},
       {"tram", "bridge", "ticket", "window", "lamp", "umbrella"},
       {"street", "market", "station", "square"}},
      {"kitchen",
       {"cook", "baker", "mother", "boy", "girl", "cat"},
       {"pot", "knife", "onion", "bowl", "oven", "egg"},
       {"table", "sink", "corner", "garden"}},
      {"forest",
       {"fox", "owl", "bear", "deer", "rabbit", "hunter", "wolf"},
       {"tree", "stone", "nest", "log", "acorn", "path"},
       {"woods", "river", "hill", "cave"}},
      {"school",
       {"teacher", "student", "pupil", "boy", "girl", "janitor"},
       {"book", "pencil", "desk", "map", "apple", "lesson"},
       {"classroom", "hall", "library", "yard"}},
  }};
  return t;
}

const std::array<const char*, 12> adjectives = {"big",   "small", "old",    "young",
                                                "happy", "quiet", "brown",  "white",
                                                "red",   "tired", "clever", "little"};
const std::array<const char*, 8> transitive = {"see",  "watch", "like",  "find",
                                               "push", "carry", "catch", "follow"};
const std::array<const char*, 6> intransitive = {"sleep", "wait", "sing", "play", "rest", "run"};
const std::array<const char*, 6> places = {"in", "near", "behind", "by", "at", "under"};
const std::array<const char*, 8> names = {"Anna", "Tom", "Mia", "Leo", "Sara", "Ben", "Ivy", "Max"};
const std::array<const char*, 4> numbers = {"two", "three", "four", "five"};

class Rng {
public:
  explicit Rng(std::uint64_t state) : state_(state) {}
  std::size_t below(std::size_t n) {
    state_ = mix64(state_);
    return std::size_t(state_ % n);
  }
  template <class List>
  const char* pick(const List& list) {
    return list[below(list.size())];
  }

private:
  std::uint64_t state_;
};

bool ends_with(const std::string& s, const char* tail) {
  const std::string t(tail);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// Plural nouns and third-person verbs take "es" after a hiss, "s" otherwise.
std::string with_s(const std::string& word) {
  for (const char* tail : {"s", "sh", "ch", "x", "o"}) {
    if (ends_with(word, tail)) return word + "es";
  }
  return word + "s";
}

std::string article(const std::string& next) {
  return std::string(std::strchr("aeiou", next[0]) != nullptr ? "an " : "a ") + next;
}

// "the old goat", "the goats", ...: a noun phrase and whether it is plural.
std::string noun_phrase(Rng& rng, const std::vector<const char*>& nouns, bool plural) {
  std::string noun = rng.pick(nouns);
  if (plural) noun = with_s(noun);
  if (rng.below(2) == 0) noun = std::string(rng.pick(adjectives)) + " " + noun;
  return "the " + noun;
}

std::string sentence(Rng& rng, const Topic& topic, const char* name) {
  const bool plural = rng.below(3) == 0;
  const std::string subject = noun_phrase(rng, topic.animates, plural);
  const auto verb = [&](const char* v) { return plural ? std::string(v) : with_s(v); };
  const std::string spot = rng.pick(topic.spots);
  switch (rng.below(6)) {
  case 0:
    return subject + " " + verb(rng.pick(transitive)) + " " +
           noun_phrase(rng, topic.things, rng.below(2) == 0) + ".";
  case 1:
    return subject + " " + verb(rng.pick(intransitive)) + " " + rng.pick(places) + " the " + spot +
           ".";
  case 2: {
    std::string thing = rng.pick(topic.things);
    if (rng.below(2) == 0) thing = std::string(rng.pick(adjectives)) + " " + thing;
    return std::string(name) + " " + with_s(rng.pick(transitive)) + " " + article(thing) + ".";
  }
  case 3: {
    const std::string animal = rng.pick(topic.animates);
    if (rng.below(2) == 0) return "there is " + article(animal) + " in the " + spot + ".";
    return std::string("there are ") + rng.pick(numbers) + " " + with_s(animal) + " in the " +
           spot + ".";
  }
  case 4: {
    const bool yes = rng.below(2) == 0;
    const char* v = rng.pick(transitive);
    return std::string(plural ? "do " : "does ") + subject + " " + v + " the " +
           rng.pick(topic.things) + "? " + (yes ? "Yes, " : "No, ") + (plural ? "they" : "it") +
           (yes ? (plural ? " do." : " does.") : (plural ? " do not." : " does not."));
  }
  default: {
    const std::size_t k = rng.below(numbers.size() + 1);
    const std::string thing = rng.pick(topic.things);
    return std::string(name) + " has " +
           (k == numbers.size() ? "one " + thing : std::string(numbers[k]) + " " + with_s(thing)) +
           ".";
  }
  }
}

} // namespace

std::string SyntheticCorpus::document(std::uint64_t index) const {
  Rng rng(mix64(seed_ ^ mix64(index + 0xD1B54A32D192ED03ull)));
  const Topic& topic = topics()[rng.below(topics().size())];
  const char* name = rng.pick(names);
  std::string text = std::string(name) + " at the " + topic.place + ".\n";
  const std::size_t n = 3 + rng.below(6);
  for (std::size_t i = 0; i < n; ++i) {
    std::string s = sentence(rng, topic, name);
    s[0] = char(std::toupper(static_cast<unsigned char>(s[0])));
    text += s;
    text += i + 1 < n ? " " : "";
  }
  return text;
}

} // namespace gridlm::io

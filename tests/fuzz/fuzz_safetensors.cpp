// Fuzz target for the safetensors loader: any input must either load or be refused with a
// kiln::Error; a crash, a sanitizer report, any other exception (kiln::InternalError included)
// or a loaded file that does not survive save_bytes -> load_bytes unchanged is a bug.
//
// One file, two drivers:
// - built with -DKILN_LIBFUZZER (clang's -fsanitize=fuzzer; scripts/fuzz_safetensors.sh),
//   libFuzzer calls LLVMFuzzerTestOneInput with inputs it evolves from coverage;
// - otherwise main() below is a seeded random mutator, run by ctest (and so by `make test`
//   and `make sanitize`): it mutates a handful of good files (bit flips, byte edits,
//   truncations, insertions, deletions, copied ranges, splices, and edits that understand the
//   header: numbers, dtype codes, duplicated entries, the length field) a fixed number of
//   times from a fixed seed, and also sends every 64th input through load(path) from a real
//   file, whose outcome must match load_bytes'. It can write its seeds as a libFuzzer corpus
//   (--write-corpus DIR) and replay files given on the command line (libFuzzer's crashes).
#include <kiln/kiln.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using kiln::StateDict;
using kiln::Tensor;

// A loaded file that changed on its way through save_bytes and load_bytes.
struct RoundTripFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return c.numel() == 0 ? std::vector<uint8_t>() : std::vector<uint8_t>(p, p + c.nbytes());
}

void check_same(const StateDict& a, const StateDict& b) {
  if (a.keys() != b.keys()) throw RoundTripFailure("keys changed");
  if (a.metadata() != b.metadata()) throw RoundTripFailure("metadata changed");
  for (const auto& [name, t] : a) {
    const Tensor& u = b.at(name);
    if (t.dtype() != u.dtype() || t.sizes() != u.sizes() || bytes_of(t) != bytes_of(u))
      throw RoundTripFailure("tensor \"" + name + "\" changed");
  }
}

}  // namespace

/// libFuzzer's entry point (also called by the seeded driver below).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  StateDict sd;
  try {
    sd = kiln::load_bytes({data, size});
  } catch (const kiln::InternalError&) {
    throw;  // a broken invariant is a bug, not a refusal
  } catch (const kiln::Error&) {
    return 0;  // refused, as a malformed file should be
  }
  check_same(sd, kiln::load_bytes(kiln::save_bytes(sd)));
  return 0;
}

#ifndef KILN_LIBFUZZER

namespace {

using Bytes = std::vector<uint8_t>;

// Good files of several shapes: every dtype with metadata, 0-dim and empty tensors, a small
// MLP, nothing at all, and one laid out as another writer might (no padding, other order).
std::vector<Bytes> seeds() {
  using namespace kiln;
  manual_seed(0);
  std::vector<Bytes> out;
  StateDict all;
  all.insert("f32", randn({2, 3}));
  all.insert("f64", randn({3}, kFloat64));
  all.insert("f16", randn({2, 2}).to(kFloat16));
  all.insert("bf16", randn({1, 3}).to(kBFloat16));
  all.insert("i64", from_vector<int64_t>({-1, 0, 1 << 20}, {3}));
  all.insert("i32", from_vector<int32_t>({7, -7}, {2}));
  all.insert("bool", rand({4}) > 0.5);
  all.metadata().emplace("format", "pt");
  out.push_back(save_bytes(all));
  StateDict odd;
  odd.insert("scalar", full({}, 1.5));
  odd.insert("empty", empty({0, 3}));
  odd.insert("after", from_vector<int64_t>({5}, {1}));
  odd.insert("empty_too", empty({2, 0}, kBool));
  out.push_back(save_bytes(odd));
  nn::MLP mlp({3, 4, 2});
  out.push_back(save_bytes(mlp.state_dict()));
  out.push_back(save_bytes(StateDict()));
  const std::string header =
      R"({"b":{"data_offsets":[0,4],"dtype":"BF16","shape":[2]},"__metadata__":{"k":"v"},)"
      R"("a":{"shape":[],"dtype":"F16","data_offsets":[4,6]}})";
  Bytes other(8);
  for (int i = 0; i < 8; ++i) other[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  other.insert(other.end(), header.begin(), header.end());
  for (uint8_t b : {0x80, 0x3f, 0x00, 0xbf, 0x00, 0x40}) other.push_back(b);
  out.push_back(other);
  return out;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  Bytes mutate(const std::vector<Bytes>& corpus) {
    Bytes b = corpus[below(corpus.size())];
    const size_t edits = 1 + below(4);
    for (size_t i = 0; i < edits; ++i) edit(b, corpus);
    return b;
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  bool coin() { return (rng_() & 1) != 0; }

  // The header's length and text, when the length field is intact enough to find it.
  static bool header_span(const Bytes& b, size_t* len) {
    if (b.size() < 8) return false;
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
    if (n > b.size() - 8) return false;
    *len = static_cast<size_t>(n);
    return true;
  }
  static void set_length(Bytes& b, uint64_t n) {
    for (int i = 0; i < 8 && i < static_cast<int>(b.size()); ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  }
  // Replaces header bytes [from, to) with `text`; half the time the length field follows.
  void replace_in_header(Bytes& b, size_t header_len, size_t from, size_t to, const std::string& text) {
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(8 + from), b.begin() + static_cast<std::ptrdiff_t>(8 + to));
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(8 + from), text.begin(), text.end());
    if (coin()) set_length(b, header_len - (to - from) + text.size());
  }

  void edit(Bytes& b, const std::vector<Bytes>& corpus) {
    static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '{', '}', '[', ']', '"', ',', ':', '-', '0', '9', ' '};
    static const char* kNumbers[] = {"0",  "1",  "-1", "2", "3", "8", "24", "4294967296", "9223372036854775807",
                                     "9223372036854775808", "18446744073709551615", "18446744073709551616",
                                     "1e308", "2.5", "-0", "99999999999999999999999999"};
    static const char* kCodes[] = {"F32", "F64", "F16", "BF16", "I64", "I32", "BOOL", "U8", "I8", "F8_E4M3", "X", ""};
    size_t header_len = 0;
    switch (below(12)) {
      case 0:  // bit flip
        if (!b.empty()) b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8));
        break;
      case 1:  // interesting byte
        if (!b.empty()) b[below(b.size())] = kInteresting[below(std::size(kInteresting))];
        break;
      case 2:  // truncate
        b.resize(below(b.size() + 1));
        break;
      case 3: {  // insert random bytes
        const size_t at = below(b.size() + 1), n = 1 + below(8);
        for (size_t i = 0; i < n; ++i) b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng_()));
        break;
      }
      case 4: {  // delete a range
        if (b.empty()) break;
        const size_t at = below(b.size()), n = 1 + below(std::min<size_t>(16, b.size() - at));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      case 5: {  // copy a range elsewhere
        if (b.size() < 2) break;
        const size_t from = below(b.size()), n = 1 + below(std::min<size_t>(32, b.size() - from));
        const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(from + n));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(below(b.size() + 1)), chunk.begin(), chunk.end());
        break;
      }
      case 6: {  // splice: this file's start, another's end
        const Bytes& other = corpus[below(corpus.size())];
        b.resize(below(b.size() + 1));
        const size_t from = below(other.size() + 1);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      case 7: {  // the length field: an interesting value
        const uint64_t size = b.size();
        const uint64_t values[] = {0, 1, size, size - 8, size - 7, uint64_t{100'000'000}, uint64_t{100'000'001},
                                   uint64_t{1} << 63, ~uint64_t{0}};
        if (b.size() >= 8) set_length(b, values[below(std::size(values))]);
        if (b.size() >= 8 && header_span(b, &header_len) && coin()) set_length(b, header_len + below(3) - 1);
        break;
      }
      case 8:
      case 9: {  // a number in the header
        if (!header_span(b, &header_len)) break;
        std::vector<std::pair<size_t, size_t>> runs;
        for (size_t i = 0; i < header_len;) {
          if (b[8 + i] >= '0' && b[8 + i] <= '9') {
            size_t j = i;
            while (j < header_len && b[8 + j] >= '0' && b[8 + j] <= '9') ++j;
            runs.emplace_back(i, j);
            i = j;
          } else {
            ++i;
          }
        }
        if (runs.empty()) break;
        const auto [from, to] = runs[below(runs.size())];
        replace_in_header(b, header_len, from, to, kNumbers[below(std::size(kNumbers))]);
        break;
      }
      case 10: {  // a dtype code in the header
        if (!header_span(b, &header_len)) break;
        const std::string text(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
        std::vector<size_t> at;
        for (size_t p = text.find("\"dtype\":\""); p != std::string::npos; p = text.find("\"dtype\":\"", p + 1))
          at.push_back(p + 9);
        if (at.empty()) break;
        const size_t from = at[below(at.size())], to = text.find('"', from);
        if (to == std::string::npos) break;
        replace_in_header(b, header_len, from, to, kCodes[below(std::size(kCodes))]);
        break;
      }
      case 11: {  // duplicate the header's first entry (a duplicate key, or overlapping data)
        if (!header_span(b, &header_len)) break;
        const std::string text(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
        const size_t open = text.find('{'), close = text.find('}');
        if (open == std::string::npos || close == std::string::npos || close <= open) break;
        std::string entry = text.substr(open + 1, close - open) + ",";
        if (coin() && entry.size() > 3) entry[1] = static_cast<char>('a' + below(26));  // a new name
        replace_in_header(b, header_len, open + 1, open + 1, entry);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
};

Bytes read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::filesystem::path& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// The outcome of loading: "ok", or the error message with the file's name taken out.
std::string outcome(const std::function<StateDict()>& load, const std::string& name) {
  try {
    load();
    return "ok";
  } catch (const kiln::InternalError&) {
    throw;
  } catch (const kiln::Error& e) {
    std::string m = e.what();
    for (size_t p = m.find(name); p != std::string::npos; p = m.find(name)) m.replace(p, name.size(), "FILE");
    return m;
  }
}

// A refusal's message with the file, names, strings and numbers taken out, so messages of one
// kind count together: "tensor \"x\": data_offsets [0, 9] run past the end of the data (3
// bytes)" -> "data_offsets [N, N] run past the end of the data (N bytes)".
std::string refusal_kind(const std::string& message) {
  std::string m = message.substr(std::min(message.size(), message.find("FILE") + 5));
  if (m.rfind(": ", 0) == 0) m = m.substr(2);
  if (m.rfind("tensor \"", 0) == 0 && m.find("\": ", 8) != std::string::npos) m = m.substr(m.find("\": ", 8) + 3);
  std::string out;
  for (size_t i = 0; i < m.size() && m[i] != '(' && out.size() < 70; ++i) {
    if (m[i] == '"') {
      const size_t close = m.find('"', i + 1);
      out += "\"...\"";
      if (close == std::string::npos) break;
      i = close;
    } else if (m[i] >= '0' && m[i] <= '9') {
      while (i + 1 < m.size() && m[i + 1] >= '0' && m[i + 1] <= '9') ++i;
      out += 'N';
    } else {
      out += m[i];
    }
  }
  return out;
}

int usage() {
  std::fprintf(stderr,
               "usage: fuzz_safetensors [--iterations N] [--seed S] [--max-seconds T] [--write-corpus DIR] [FILE...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iterations = 20000, seed = 1;
  double max_seconds = 60;
  std::string corpus_dir;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--iterations") iterations = std::stoull(next());
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--max-seconds") max_seconds = std::stod(next());
    else if (a == "--write-corpus") corpus_dir = next();
    else if (a.rfind("--", 0) == 0) return usage();
    else files.push_back(a);
  }
  const std::vector<Bytes> corpus = seeds();
  if (!corpus_dir.empty()) {
    std::filesystem::create_directories(corpus_dir);
    for (size_t i = 0; i < corpus.size(); ++i) write_file(std::filesystem::path(corpus_dir) / fmt::format("seed_{}", i), corpus[i]);
    fmt::print("fuzz_safetensors: wrote {} seeds to {}\n", corpus.size(), corpus_dir);
    return 0;
  }
  // Replaying given files: each must load or be refused with kiln::Error.
  if (!files.empty()) {
    for (const std::string& f : files) {
      const Bytes b = read_file(f);
      LLVMFuzzerTestOneInput(b.data(), b.size());
      fmt::print("fuzz_safetensors: {}: ok\n", f);
    }
    return 0;
  }

  const auto scratch = std::filesystem::temp_directory_path() / fmt::format("kiln_fuzz_safetensors_{}", ::getpid());
  std::filesystem::create_directories(scratch);
  const auto file = scratch / "input.safetensors";
  Mutator mutator(seed);
  const auto start = std::chrono::steady_clock::now();
  uint64_t done = 0, loaded = 0, via_file = 0;
  std::map<std::string, uint64_t> reasons;  // what the refusals said, by their first words
  int rc = 0;
  for (; done < iterations; ++done) {
    const Bytes input = mutator.mutate(corpus);
    try {
      const std::string memory = outcome([&] { return kiln::load_bytes(input); }, "<memory>");
      if (memory == "ok") {
        ++loaded;
        LLVMFuzzerTestOneInput(input.data(), input.size());  // the round trip
      } else {
        ++reasons[refusal_kind(memory)];
      }
      if (done % 64 == 0) {
        write_file(file, input);
        const std::string from_file = outcome([&] { return kiln::load(file); }, file.string());
        ++via_file;
        if (from_file != memory)
          throw RoundTripFailure(fmt::format("load(path) and load_bytes disagree:\n  file:   {}\n  memory: {}", from_file, memory));
      }
    } catch (const std::exception& e) {
      const auto saved = std::filesystem::current_path() / fmt::format("fuzz_safetensors_failure_{}_{}.bin", seed, done);
      write_file(saved, input);
      fmt::print(stderr, "fuzz_safetensors: FAIL on input {} (seed {}): {}\n  the input is saved as {}\n", done, seed,
                 e.what(), saved.string());
      rc = 1;
      break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > max_seconds) {
      ++done;
      break;
    }
  }
  std::filesystem::remove_all(scratch);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("fuzz_safetensors: {} inputs from {} seeds (seed {}) in {:.1f} s: {} loaded and round-tripped, {} refused "
             "with kiln::Error, {} also through a file\n",
             done, corpus.size(), seed, seconds, loaded, done - loaded, via_file);
  std::vector<std::pair<uint64_t, std::string>> top;
  for (const auto& [k, n] : reasons) top.emplace_back(n, k);
  std::sort(top.rbegin(), top.rend());
  fmt::print("fuzz_safetensors: {} kinds of refusal; the most common:\n", top.size());
  for (size_t i = 0; i < top.size() && i < 12; ++i) fmt::print("  {:6}  {}\n", top[i].first, top[i].second);
  if (rc == 0) fmt::print("fuzz_safetensors: PASS\n");
  return rc;
}

#endif  // KILN_LIBFUZZER

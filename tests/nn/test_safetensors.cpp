// save()/load() in the safetensors format: round trips of every dtype bit for bit (NaN,
// infinities, -0.0, integer extremes), strided inputs written contiguous, metadata, 0-dim and
// empty tensors, a large-ish file; the exact bytes of a small file against the format's
// layout, and a file written by hand as the reference writer lays it out (different key and
// field order) read back; a module through a file; and saves that fail part-way leaving the
// old checkpoint and no temporary file behind. Malformed files: test_safetensors_malformed.cpp.
#include <sys/resource.h>

#include <csignal>
#include <limits>

#include "nn/safetensors_testing.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// One tensor of every dtype, with the values that are easy to get wrong.
StateDict every_dtype() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  StateDict sd;
  std::vector<double> special = {1.0, -0.0, inf, -inf, nan, 1e-40, 3.5e38, -1.25};
  std::vector<double> r = values(random({4, 5}, kFloat64));
  special.insert(special.end(), r.begin(), r.end());  // 28 values
  sd.insert("f64", from_vector(special, {4, 7}));
  special[6] = 6.5e4;  // in range for float16
  sd.insert("f32", from_vector(special, {2, 14}).to(kFloat32));
  sd.insert("f16", from_vector(special, {28}).to(kFloat16));
  sd.insert("bf16", from_vector(special, {7, 2, 2}).to(kBFloat16));
  sd.insert("i64", from_vector<int64_t>({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1,
                                         0, 1, 123456789012345},
                                        {3, 2}));
  sd.insert("i32", from_vector<int32_t>({std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -7},
                                        {3}));
  sd.insert("bool", random({3, 3}, kBool));
  return sd;
}

void check_same(const StateDict& got, const StateDict& want) {
  CHECK(got.keys() == want.keys());
  CHECK(got.metadata() == want.metadata());
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(got.contains(name));
    const Tensor& g = got.at(name);
    CHECK(g.dtype() == t.dtype());
    CHECK(g.sizes() == t.sizes());
    CHECK(g.device() == Device::cpu());
    CHECK(g.is_contiguous());
    CHECK(tensor_bytes(g) == tensor_bytes(t));
  }
}

std::vector<uint8_t> bytes_of(std::initializer_list<int> list) {
  std::vector<uint8_t> out;
  for (int b : list) out.push_back(static_cast<uint8_t>(b));
  return out;
}

// Sets RLIMIT_FSIZE for the scope (SIGXFSZ ignored, so an oversized write fails with EFBIG
// instead of ending the process).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old_) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("every dtype round-trips through a file bit for bit, in order, with metadata") {
  manual_seed(11);
  TempDir dir;
  StateDict sd = every_dtype();
  sd.metadata().emplace("format", "pt");
  sd.metadata().emplace("note", "ünïcödé, \"quotes\" and \\ back\nslash");
  save(sd, dir / "all.safetensors");
  check_same(load(dir / "all.safetensors"), sd);
  check_same(load(dir / "all.safetensors", Device::cpu()), sd);
  // The in-memory forms give the same bytes and the same result.
  CHECK(save_bytes(sd) == read_file(dir / "all.safetensors"));
  check_same(load_bytes(save_bytes(sd)), sd);
  CHECK(dir.files() == std::vector<std::string>{"all.safetensors"});  // no temporary file left
}

TEST_CASE("strided tensors are written contiguous") {
  manual_seed(12);
  TempDir dir;
  StateDict sd;
  for (Layout layout : kLayouts) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool}) {
      const Tensor t = random_with_layout({3, 4}, layout, dtype);
      if (layout != Layout::Contiguous) REQUIRE_FALSE(t.is_contiguous());
      sd.insert(fmt::format("{}_{}", layout_name(layout), dtype_name(dtype)), t);
    }
  }
  sd.insert("narrowed_rows", random({6, 4}).narrow(0, 2, 3));
  save(sd, dir / "strided.safetensors");
  const StateDict back = load(dir / "strided.safetensors");
  REQUIRE(back.keys() == sd.keys());
  for (const auto& [name, t] : sd) {
    INFO(name);
    CHECK(back.at(name).is_contiguous());
    CHECK(bitwise_equal(back.at(name), t));
  }
}

TEST_CASE("0-dim, empty and large-ish tensors round-trip; an empty state dict too") {
  manual_seed(13);
  TempDir dir;
  StateDict sd;
  sd.insert("scalar", full({}, 2.5));
  sd.insert("scalar_i64", from_vector<int64_t>({-9}, {1}).view({}));
  sd.insert("empty", empty({0}));
  sd.insert("empty_3d", empty({3, 0, 2}, kInt32));
  sd.insert("after_empty", random({2}));
  sd.insert("big", random({1024, 1024}));
  sd.insert("big_i64", random({300001}, kInt64, -1e6, 1e6));
  save(sd, dir / "shapes.safetensors");
  const StateDict back = load(dir / "shapes.safetensors");
  check_same(back, sd);
  CHECK(back.at("scalar").dim() == 0);
  CHECK(back.at("empty_3d").sizes() == Shape{3, 0, 2});
  CHECK(std::filesystem::file_size(dir / "shapes.safetensors") > 4u * 1024 * 1024 + 8 * 300001);

  save(StateDict(), dir / "nothing.safetensors");
  const std::vector<uint8_t> nothing = read_file(dir / "nothing.safetensors");
  CHECK(nothing == assemble("{}      ", {}));  // "{}" padded to 8 bytes after the length
  CHECK(load(dir / "nothing.safetensors").empty());
}

TEST_CASE("the bytes of a small file follow the format exactly") {
  StateDict sd;
  sd.insert("w", from_vector<float>({1.0f, -2.0f}, {2}));
  sd.insert("i", from_vector<int64_t>({3}, {1}));
  sd.insert("h", from_vector<float>({1.0f}, {1}).to(kFloat16).view({}));
  sd.metadata().emplace("format", "pt");
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("i":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},)"
      R"("h":{"dtype":"F16","shape":[],"data_offsets":[16,18]}})";
  std::string padded = header;
  while ((8 + padded.size()) % 8 != 0) padded += ' ';
  const std::vector<uint8_t> data = bytes_of({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,   // 1.0f, -2.0f
                                              0x03, 0, 0, 0, 0, 0, 0, 0,                           // int64 3
                                              0x00, 0x3c});                                        // float16 1.0
  CHECK(save_bytes(sd) == assemble(padded, data));
}

TEST_CASE("a file laid out as the reference writer lays it out loads, in data order") {
  // Keys sorted differently from the data, fields in another order, metadata in the middle,
  // no alignment padding: what other writers may produce. Written byte by byte here.
  const std::string header =
      R"({"b":{"data_offsets":[0,4],"dtype":"BF16","shape":[2]},"__metadata__":{"format":"pt"},)"
      R"("a":{"shape":[],"dtype":"F16","data_offsets":[4,6]},"c":{"dtype":"BOOL","shape":[1,3],)"
      R"("data_offsets":[6,9]},"d":{"dtype":"I32","shape":[0,4],"data_offsets":[9,9]}})";
  const std::vector<uint8_t> data = bytes_of({0x80, 0x3f, 0x00, 0xbf,  // bfloat16 1.0, -0.5
                                              0x00, 0x40,              // float16 2.0
                                              0x01, 0x00, 0x01});      // true, false, true
  TempDir dir;
  write_file(dir / "ref.safetensors", assemble(header, data));
  const StateDict sd = load(dir / "ref.safetensors");
  CHECK(sd.keys() == std::vector<std::string>{"b", "a", "c", "d"});
  CHECK(sd.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(sd.at("b").dtype() == kBFloat16);
  CHECK(values(sd.at("b")) == std::vector<double>{1.0, -0.5});
  CHECK(sd.at("a").dtype() == kFloat16);
  CHECK(sd.at("a").dim() == 0);
  CHECK(sd.at("a").item<double>() == 2.0);
  CHECK(sd.at("c").sizes() == Shape{1, 3});
  CHECK(sd.at("c").to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(sd.at("d").dtype() == kInt32);
  CHECK(sd.at("d").sizes() == Shape{0, 4});
  // Trailing spaces and a header length that is not a multiple of 8 are fine too.
  write_file(dir / "padded.safetensors", assemble(header + "   ", data));
  CHECK(load(dir / "padded.safetensors").keys() == sd.keys());
}

TEST_CASE("a module goes through a file and computes the same outputs") {
  manual_seed(14);
  TempDir dir;
  nn::MLP a({.sizes = {6, 16, 16, 3}, .activation = nn::Activation::GELU});
  StateDict sd = a.state_dict();
  sd.metadata().emplace("epoch", "3");
  save(sd, dir / "mlp.safetensors");
  nn::MLP b({.sizes = {6, 16, 16, 3}, .activation = nn::Activation::GELU});
  const StateDict loaded = load(dir / "mlp.safetensors");
  CHECK(loaded.metadata().at("epoch") == "3");
  CHECK(b.load_state_dict(loaded).empty());
  const Tensor x = random({5, 6});
  CHECK(bitwise_equal(a(x), b(x)));
  // Into a float64 copy of the model: converted on load.
  nn::MLP c({.sizes = {6, 16, 16, 3}, .activation = nn::Activation::GELU});
  c.to(kFloat64);
  c.load_state_dict(loaded);
  for (const auto& [n, t] : a.state_dict()) CHECK(values(c.state_dict().at(n)) == values(t));
}

TEST_CASE("save refuses what the format cannot hold, naming it, and leaves the old file") {
  manual_seed(15);
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  StateDict good;
  good.insert("w", random({3}));
  save(good, path);
  const std::vector<uint8_t> old = read_file(path);

  StateDict undefined;
  undefined.insert("w", random({3}));
  undefined.insert("gone", Tensor());
  CHECK_THROWS_WITH_AS(save(undefined, path), "save: tensor \"gone\" is undefined", Error);

  StateDict reserved;
  reserved.insert("__metadata__", random({1}));
  CHECK_THROWS_WITH_AS(save(reserved, path),
                       "save: \"__metadata__\" is reserved for the metadata and cannot name a tensor", Error);

  StateDict bad_utf8;
  bad_utf8.insert("w\xff", random({1}));
  CHECK_THROWS_WITH_AS(save(bad_utf8, path), doctest::Contains("save: tensor names and metadata must be valid UTF-8"),
                       Error);
  StateDict bad_meta = good;
  bad_meta.metadata().emplace("k", "\xc3");
  CHECK_THROWS_WITH_AS(save(bad_meta, path), doctest::Contains("save: tensor names and metadata must be valid UTF-8"),
                       Error);

  CHECK(read_file(path) == old);
  CHECK(dir.files() == std::vector<std::string>{"ckpt.safetensors"});

  const auto nowhere = dir / "no_such_dir" / "x.safetensors";
  CHECK_THROWS_WITH_AS(save(good, nowhere),
                       doctest::Contains(fmt::format("save: cannot write \"{}\": creating the temporary file",
                                                     nowhere.string()).c_str()),
                       Error);
  CHECK_THROWS_WITH_AS(save(good, ""), "save: the path is empty", Error);
}

TEST_CASE("a save that fails while writing data leaves the old checkpoint and no temporary file") {
  manual_seed(16);
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  StateDict small;
  small.insert("w", random({4}));
  save(small, path);
  const std::vector<uint8_t> old = read_file(path);

  StateDict big;
  big.insert("a", random({16}));
  big.insert("b", random({64 * 1024}));  // 256 KiB: past the limit below, after the header and "a"
  {
    FileSizeLimit limit(64 * 1024);
    CHECK_THROWS_WITH_AS(save(big, path), doctest::Contains(fmt::format("save: cannot write \"{}\": ", path.string()).c_str()),
                         Error);
  }
  CHECK(read_file(path) == old);
  CHECK(dir.files() == std::vector<std::string>{"ckpt.safetensors"});
  // And with room, the same save replaces the file.
  save(big, path);
  check_same(load(path), big);
  CHECK(dir.files() == std::vector<std::string>{"ckpt.safetensors"});
}

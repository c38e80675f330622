// Malformed safetensors files: every way the format can be broken gives a kiln::Error whose
// message names the file and, where there is one, the tensor. Each broken file is made here
// from a good one (its header edited as JSON, or its bytes cut or patched), written to disk and
// loaded through load(path); load_bytes() must give the same message with "<memory>".
#include "nn/safetensors_testing.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
using nlohmann::json;

namespace {

// The good file: a float32 matrix, an int64 vector, a bool vector, in that data order.
std::vector<uint8_t> good_file() {
  StateDict sd;
  sd.insert("a", from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));  // bytes [0, 24)
  sd.insert("b", from_vector<int64_t>({7, 8}, {2}));              // bytes [24, 40)
  sd.insert("c", from_vector<int64_t>({1, 0, 1}, {3}).to(kBool));  // bytes [40, 43)
  sd.metadata().emplace("format", "pt");
  return save_bytes(sd);
}

// Loads `bytes` from a file and from memory and checks both errors: the file's must contain
// `load: "<path>": ` + expected, the in-memory one the same with "<memory>".
void expect_error(const std::vector<uint8_t>& bytes, const std::string& expected) {
  TempDir dir;
  const auto path = dir / "broken.safetensors";
  write_file(path, bytes);
  CHECK_THROWS_WITH_AS(load(path), doctest::Contains(fmt::format("load: \"{}\": {}", path.string(), expected).c_str()), Error);
  CHECK_THROWS_WITH_AS(load_bytes(bytes), doctest::Contains(fmt::format("load: \"<memory>\": {}", expected).c_str()), Error);
}

// The good file with its header replaced by `edit(header)`.
std::vector<uint8_t> edited(const std::function<void(json&)>& edit) {
  FileParts parts = split(good_file());
  edit(parts.header);
  return parts.bytes();
}

// The good file with header text `text` (and the good data).
std::vector<uint8_t> with_header_text(const std::string& text) { return assemble(text, split(good_file()).data); }

}  // namespace

TEST_CASE("the good file loads (the baseline the broken ones are made from)") {
  const StateDict sd = load_bytes(good_file());
  CHECK(sd.keys() == std::vector<std::string>{"a", "b", "c"});
  CHECK(values(sd.at("a")) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(split(good_file()).bytes().size() <= good_file().size());
  CHECK(load_bytes(split(good_file()).bytes()).keys() == sd.keys());  // re-assembled unpadded: still good
}

TEST_CASE("a file that cannot be opened or is not a regular file") {
  TempDir dir;
  const auto missing = dir / "missing.safetensors";
  CHECK_THROWS_WITH_AS(load(missing),
                       fmt::format("load: cannot open \"{}\": No such file or directory", missing.string()).c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(load(dir.path()), fmt::format("load: \"{}\" is not a regular file", dir.path().string()).c_str(),
                       Error);
}

TEST_CASE("files too short for the length field or the header they announce") {
  const std::vector<uint8_t> good = good_file();
  for (size_t n : {0, 1, 7}) {
    INFO(n);
    const std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    TempDir dir;
    write_file(dir / "short", cut);
    CHECK_THROWS_WITH_AS(load(dir / "short"),
                         fmt::format("load: \"{}\" is not a safetensors file: it has {} bytes, fewer than the 8 of the "
                                     "header length",
                                     (dir / "short").string(), n)
                             .c_str(),
                         Error);
  }
  const uint64_t header_len = good.size() - 43 - 8;
  // Cut inside the header: the length runs past the end.
  for (size_t n : {size_t{8}, size_t{9}, size_t{8 + header_len - 1}}) {
    INFO(n);
    const std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    expect_error(cut, fmt::format("header length {} runs past the end of the file ({} bytes; is it truncated?)",
                                  header_len, n));
  }
  // Cut inside the data: the last tensor's offsets run past it.
  const std::vector<uint8_t> cut(good.begin(), good.end() - 2);
  expect_error(cut, "tensor \"c\": data_offsets [40, 43] run past the end of the data (41 bytes)");
}

TEST_CASE("header lengths that are absurd, past the end, or zero") {
  const std::vector<uint8_t> data = split(good_file()).data;
  const std::string text = split(good_file()).header.dump();
  expect_error(assemble(text, data, uint64_t{1} << 63),
               "header length 9223372036854775808 is larger than the 100000000 bytes the format allows");
  expect_error(assemble(text, data, ~uint64_t{0}), "header length 18446744073709551615 is larger than");
  expect_error(assemble(text, data, 100'000'001), "header length 100000001 is larger than");
  const uint64_t past = text.size() + data.size() + 1;
  expect_error(assemble(text, data, past), fmt::format("header length {} runs past the end of the file", past));
  expect_error(assemble(text, data, 0), "the header is empty (its length is 0)");
  // A length a little short of the header cuts the JSON.
  expect_error(assemble(text, data, text.size() - 1), "the header is not valid JSON");
}

TEST_CASE("a header that is not JSON, not an object, or not where the format wants it") {
  expect_error(with_header_text(R"({"a": {"dtype": "F32",)"), "the header is not valid JSON (");
  expect_error(with_header_text("{\"a\": 1} trailing"), "the header is not valid JSON (");
  expect_error(with_header_text(std::string("{\"a\xff\": 1}")), "the header is not valid JSON (");
  expect_error(with_header_text("[1, 2]"), "the header must be a JSON object, got array [1,2]");
  expect_error(with_header_text("\"text\""), "the header must be a JSON object, got string \"text\"");
  expect_error(with_header_text("42"), "the header must be a JSON object, got number 42");
  expect_error(with_header_text("null"), "the header must be a JSON object, got null");
  const std::string good_text = split(good_file()).header.dump();
  expect_error(with_header_text("  " + good_text), "the header must begin with '{' (it begins with whitespace)");
}

TEST_CASE("duplicate keys, at the top and inside an entry") {
  const std::string entry_a = R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
  const std::string rest = R"("b":{"dtype":"I64","shape":[2],"data_offsets":[24,40]},)"
                           R"("c":{"dtype":"BOOL","shape":[3],"data_offsets":[40,43]})";
  // The baseline text loads.
  CHECK(load_bytes(with_header_text("{" + entry_a + "," + rest + "}")).size() == 3);
  expect_error(with_header_text("{" + entry_a + "," + entry_a + "," + rest + "}"),
               "duplicate key \"a\" in the header");
  expect_error(with_header_text(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)" + rest +
                                "}"),
               "tensor \"a\": duplicate key \"dtype\" in its entry");
  expect_error(with_header_text(R"({"__metadata__":{},"__metadata__":{},)" + entry_a + "," + rest + "}"),
               "duplicate key \"__metadata__\" in the header");
}

TEST_CASE("metadata that is not an object of strings") {
  expect_error(edited([](json& h) { h["__metadata__"] = json::array({"x"}); }),
               "\"__metadata__\" must be an object of strings, got array [\"x\"]");
  expect_error(edited([](json& h) { h["__metadata__"]["n"] = 3; }),
               "\"__metadata__\" value of \"n\" must be a string, got number 3");
  // An empty metadata object is fine.
  CHECK(load_bytes(edited([](json& h) { h["__metadata__"] = json::object(); })).metadata().empty());
}

TEST_CASE("entries that are not objects or lack a field") {
  expect_error(edited([](json& h) { h["a"] = 5; }),
               "tensor \"a\": its entry must be an object with dtype, shape and data_offsets, got number 5");
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    INFO(field);
    expect_error(edited([&](json& h) { h["b"].erase(field); }), fmt::format("tensor \"b\": its entry has no \"{}\"", field));
  }
  // Unknown extra fields are ignored, as the reference reader ignores them.
  CHECK(load_bytes(edited([](json& h) { h["b"]["extra"] = "x"; })).size() == 3);
}

TEST_CASE("dtypes that are not strings, unknown, or not Kiln's") {
  expect_error(edited([](json& h) { h["a"]["dtype"] = 4; }), "tensor \"a\": dtype must be a string, got number 4");
  expect_error(edited([](json& h) { h["a"]["dtype"] = "F33"; }),
               "tensor \"a\": unknown dtype \"F33\" (Kiln reads F64, F32, F16, BF16, I64, I32 and BOOL)");
  expect_error(edited([](json& h) { h["a"]["dtype"] = "f32"; }), "tensor \"a\": unknown dtype \"f32\"");
  expect_error(edited([](json& h) {
                 h["c"]["dtype"] = "U8";  // same byte count: only the dtype is wrong
               }),
               "tensor \"c\": unsupported dtype \"U8\"");
  expect_error(edited([](json& h) { h["a"]["dtype"] = "F8_E4M3"; }), "tensor \"a\": unsupported dtype \"F8_E4M3\"");
}

TEST_CASE("shapes with negative, fractional, huge or overflowing sizes") {
  expect_error(edited([](json& h) { h["a"]["shape"] = "2x3"; }),
               "tensor \"a\": shape must be a list of sizes, got string \"2x3\"");
  expect_error(edited([](json& h) { h["a"]["shape"] = json::array({2, -3}); }),
               "tensor \"a\": shape [2,-3] must hold non-negative integers below 2^63, got number -3");
  expect_error(edited([](json& h) { h["a"]["shape"] = json::array({2.0, 3}); }),
               "tensor \"a\": shape [2.0,3] must hold non-negative integers below 2^63, got number 2.0");
  expect_error(edited([](json& h) { h["a"]["shape"] = json::array({uint64_t{1} << 63}); }),
               "tensor \"a\": shape [9223372036854775808] must hold non-negative integers below 2^63, got number "
               "9223372036854775808");
  expect_error(edited([](json& h) { h["a"]["shape"] = json::array({uint64_t{1} << 31, uint64_t{1} << 31}); }),
               "tensor \"a\": shape [2147483648, 2147483648] of F32 is too large (its byte size overflows int64)");
  // Empty, but its strides would still overflow.
  expect_error(edited([](json& h) {
                 h["c"]["shape"] = json::array({0, uint64_t{1} << 40, uint64_t{1} << 40});
               }),
               "tensor \"c\": shape [0, 1099511627776, 1099511627776] of BOOL is too large");
  expect_error(edited([](json& h) { h["a"]["shape"] = json::array({json::array({2}), 3}); }),
               "tensor \"a\": shape [[2],3] must hold non-negative integers below 2^63, got array [2]");
}

TEST_CASE("data_offsets that are not two ascending integers or leave the data") {
  const std::string expect = "tensor \"b\": data_offsets must be two non-negative integers [begin, end] with begin <= end, got ";
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = 24; }), expect + "number 24");
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = json::array({24}); }), expect + "array [24]");
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = json::array({24, 40, 41}); }), expect + "array [24,40,41]");
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = json::array({-8, 8}); }), expect + "array [-8,8]");
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = json::array({24.0, 40}); }), expect + "array [24.0,40]");
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = json::array({40, 24}); }), expect + "array [40,24]");
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = json::object({{"begin", 24}, {"end", 40}}); }),
               expect + "object");
  expect_error(edited([](json& h) { h["c"]["data_offsets"] = json::array({41, 44}); }),
               "tensor \"c\": data_offsets [41, 44] run past the end of the data (43 bytes)");
  expect_error(edited([](json& h) { h["c"]["data_offsets"] = json::array({uint64_t{1} << 62, (uint64_t{1} << 62) + 3}); }),
               "tensor \"c\": data_offsets [4611686018427387904, 4611686018427387907] run past the end of the data");
}

TEST_CASE("byte counts that do not match shape times dtype size") {
  expect_error(edited([](json& h) { h["a"]["shape"] = json::array({2, 2}); }),
               "tensor \"a\": data_offsets [0, 24] hold 24 bytes, but shape [2, 2] of F32 needs 16");
  expect_error(edited([](json& h) { h["a"]["dtype"] = "F64"; }),
               "tensor \"a\": data_offsets [0, 24] hold 24 bytes, but shape [2, 3] of F64 needs 48");
  expect_error(edited([](json& h) { h["b"]["dtype"] = "I32"; }),
               "tensor \"b\": data_offsets [24, 40] hold 16 bytes, but shape [2] of I32 needs 8");
  expect_error(edited([](json& h) { h["c"]["shape"] = json::array(); }),
               "tensor \"c\": data_offsets [40, 43] hold 3 bytes, but shape [] of BOOL needs 1");
}

TEST_CASE("tensors that overlap, leave holes, or leave bytes after the last one") {
  // b moved back over a's last 8 bytes (so the data has 8 bytes nothing covers at the end).
  expect_error(edited([](json& h) { h["b"]["data_offsets"] = json::array({16, 32}); }),
               "tensor \"b\": data_offsets [16, 32] overlap tensor \"a\" at [0, 24]");
  // Two tensors on the same bytes.
  expect_error(edited([](json& h) {
                 h["c"]["dtype"] = "I64";
                 h["c"]["shape"] = json::array({2});
                 h["c"]["data_offsets"] = json::array({24, 40});
               }),
               "tensor \"c\": data_offsets [24, 40] overlap tensor \"b\" at [24, 40]");
  // An empty tensor inside another one.
  expect_error(edited([](json& h) { h["e"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 8}}}; }),
               "tensor \"e\": data_offsets [8, 8] overlap tensor \"a\" at [0, 24]");
  // A hole between b and c: c moved one byte on, the data one byte longer.
  FileParts hole = split(good_file());
  hole.header["c"]["data_offsets"] = json::array({41, 44});
  hole.data.insert(hole.data.begin() + 40, 0);
  expect_error(hole.bytes(), "tensor \"c\": data_offsets [41, 44] leave bytes [40, 41) before them that belong to no tensor");
  // A hole at the start.
  FileParts front = split(good_file());
  for (const char* k : {"a", "b", "c"})
    for (auto& o : front.header[k]["data_offsets"]) o = o.get<uint64_t>() + 4;
  front.data.insert(front.data.begin(), 4, 0);
  expect_error(front.bytes(), "tensor \"a\": data_offsets [4, 28] leave bytes [0, 4) before them");
  // Bytes after the last tensor.
  FileParts tail = split(good_file());
  tail.data.push_back(0);
  expect_error(tail.bytes(),
               "the data section has 44 bytes, but its tensors end at byte 43 (bytes [43, 44) belong to no tensor)");
  // A header with no tensors and a data section.
  expect_error(assemble("{}", {1, 2}), "the data section has 2 bytes, but its tensors end at byte 0");
}

TEST_CASE("bool bytes other than 0 and 1") {
  std::vector<uint8_t> bytes = good_file();
  bytes[bytes.size() - 2] = 2;  // c's middle element
  expect_error(bytes, "tensor \"c\": BOOL element 1 is 2, not 0 or 1");
}

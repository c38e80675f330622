// load_fashion_mnist (examples/data): a small synthetic data set in the four-file layout,
// read back against a float64 reference of the pixel transform; every inconsistency between
// the files; and, when the Debian package (or a staged copy) is installed, the real data.
#include "data_testing.h"

#include <examples/data/fashion_mnist.h>
#include <kiln/kiln.h>

#include <cstdlib>
#include <random>

using namespace kiln;
using namespace kiln::data;
using namespace kiln::testing;

namespace {

struct Synthetic {
  Bytes pixels, labels;
};

// Writes a split of n random 28x28 images and labels in [0, 9] into dir.
Synthetic write_split(const TempDir& dir, Split split, uint32_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Synthetic s{Bytes(size_t{n} * 784), Bytes(n)};
  for (uint8_t& p : s.pixels) p = static_cast<uint8_t>(rng() >> 56);
  for (uint8_t& l : s.labels) l = static_cast<uint8_t>(rng() % 10);
  const auto [images, labels] = fashion_mnist_files(split);
  write_file(dir.file(images), gzip(idx_bytes(0x08, {n, 28, 28}, s.pixels)));
  write_file(dir.file(labels), gzip(idx_bytes(0x08, {n}, s.labels)));
  return s;
}

std::string error_of(const std::string& dir, Split split) {
  try {
    load_fashion_mnist(dir, split);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_error(const std::string& dir, Split split, const std::string& path, const std::string& part) {
  const std::string msg = error_of(dir, split);
  CHECK_MESSAGE(msg.rfind("load_fashion_mnist: ", 0) == 0, "message: " << msg);
  CHECK_MESSAGE(msg.find(path) != std::string::npos, "message lacks " << path << ": " << msg);
  CHECK_MESSAGE(msg.find(part) != std::string::npos, "message lacks " << part << ": " << msg);
}

}  // namespace

TEST_CASE("load_fashion_mnist: pixels through (p / 255 - mean) / std, labels as int64") {
  TempDir dir;
  const Synthetic train = write_split(dir, Split::Train, 9, 1);
  const Synthetic test = write_split(dir, Split::Test, 4, 2);
  CHECK(fashion_mnist_available(dir.str()));
  for (bool normalize : {true, false}) {
    CAPTURE(normalize);
    FashionMnistOptions options{.normalize = normalize, .mean = 0.25, .std = 0.5};
    for (auto [split, want] : {std::pair{Split::Train, &train}, std::pair{Split::Test, &test}}) {
      LabeledImages d = load_fashion_mnist(dir.str(), split, options);
      const auto n = static_cast<int64_t>(want->labels.size());
      CHECK(d.images.sizes() == Shape{n, 784});
      CHECK(d.images.dtype() == kFloat32);
      CHECK(d.labels.sizes() == Shape{n});
      CHECK(d.labels.dtype() == kInt64);
      CHECK(d.images.device() == Device::cpu());
      const std::vector<float> x = d.images.to_vector<float>();
      for (size_t i = 0; i < x.size(); ++i) {
        const double p = want->pixels[i] / 255.0;
        const double ref = normalize ? (p - 0.25) / 0.5 : p;
        // The float32 nearest to the float64 value: what PyTorch's reference table holds too.
        REQUIRE_MESSAGE(x[i] == static_cast<float>(ref), "pixel " << i);
      }
      const std::vector<int64_t> y = d.labels.to_vector<int64_t>();
      for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == want->labels[i]);
    }
  }
  // The default normalisation is the training set's mean and std.
  std::array<float, 256> table = fashion_mnist_pixel_table();
  CHECK(table[0] == static_cast<float>((0.0 - 0.2860) / 0.3530));
  CHECK(table[255] == static_cast<float>((1.0 - 0.2860) / 0.3530));
}

TEST_CASE("load_fashion_mnist: missing files and directories name the path") {
  TempDir dir;
  check_error(dir.file("absent"), Split::Train, dir.file("absent"), "does not exist");
  check_error(dir.str(), Split::Test, dir.file("t10k-images-idx3-ubyte.gz"), "is missing");
  write_split(dir, Split::Train, 3, 1);
  std::filesystem::remove(dir.file("train-labels-idx1-ubyte.gz"));
  check_error(dir.str(), Split::Train, dir.file("train-labels-idx1-ubyte.gz"), "is missing");
  CHECK_FALSE(fashion_mnist_available(dir.str()));
}

TEST_CASE("load_fashion_mnist: files that disagree with each other or with the format") {
  TempDir dir;
  write_split(dir, Split::Train, 5, 3);
  const std::string images = dir.file("train-images-idx3-ubyte.gz"), labels = dir.file("train-labels-idx1-ubyte.gz");
  SUBCASE("more labels than images") {
    write_file(labels, gzip(idx_bytes(0x08, {6}, {1, 2, 3, 4, 5, 6})));
    check_error(dir.str(), Split::Train, labels, "holds 6 labels but " + images + " holds 5 images");
  }
  SUBCASE("a label above 9") {
    write_file(labels, gzip(idx_bytes(0x08, {5}, {1, 2, 9, 10, 0})));
    check_error(dir.str(), Split::Train, labels, "has label 10 at index 3, outside [0, 9]");
  }
  SUBCASE("images of another size") {
    write_file(images, gzip(idx_bytes(0x08, {5, 28, 27}, Bytes(5 * 28 * 27, 1))));
    check_error(dir.str(), Split::Train, images, "holds 28x27 images, expected 28x28");
  }
  SUBCASE("the two files swapped") {
    std::filesystem::rename(images, dir.file("tmp"));
    std::filesystem::rename(labels, images);
    std::filesystem::rename(dir.file("tmp"), labels);
    check_error(dir.str(), Split::Train, images, "wrong magic number 0x00000801 (unsigned byte, 1 dim), expected "
                                                 "0x00000803 (unsigned byte, 3 dims)");
  }
  SUBCASE("an image file cut short") {
    write_file(images, gzip(idx_bytes(0x08, {5, 28, 28}, Bytes(5 * 784 - 1, 1))));
    check_error(dir.str(), Split::Train, images, "need 3920 bytes of data, the file holds 3919");
  }
  SUBCASE("a labels file that is not gzip") {
    write_file(labels, idx_bytes(0x08, {5}, {1, 2, 3, 4, 5}));
    check_error(dir.str(), Split::Train, labels, "is not a gzip file");
  }
  SUBCASE("a non-positive std") {
    CHECK_THROWS_WITH_AS(load_fashion_mnist(dir.str(), Split::Train, {.std = 0}),
                         doctest::Contains("fashion_mnist_pixel_table: mean must be finite and std positive, got mean "
                                           "0.286 std 0"),
                         Error);
  }
}

// The real data set: Debian's dataset-fashion-mnist, or a copy staged into
// data/fashion-mnist (scripts/stage_fashion_mnist.sh) under the directory ctest runs in or
// the source tree's.
TEST_CASE("load_fashion_mnist on the installed data set: 60,000 + 10,000 images, 6,000 / 1,000 per class") {
  std::optional<std::string> dir = find_fashion_mnist();
  const std::string staged = fmt::format("{}/data/fashion-mnist", KILN_SOURCE_DIR);
  if (!dir && fashion_mnist_available(staged)) dir = staged;
  if (!dir) {
    MESSAGE("skipped: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist, or "
            "scripts/stage_fashion_mnist.sh)");
    return;
  }
  MESSAGE("reading Fashion-MNIST from " << *dir);
  LabeledImages train = load_fashion_mnist(*dir, Split::Train, {.normalize = false});
  LabeledImages test = load_fashion_mnist(*dir, Split::Test);
  CHECK(train.images.sizes() == Shape{60000, 784});
  CHECK(test.images.sizes() == Shape{10000, 784});
  for (auto [labels, per_class] : {std::pair{&train.labels, 6000}, std::pair{&test.labels, 1000}}) {
    std::vector<int64_t> histogram(10, 0);
    for (int64_t y : labels->to_vector<int64_t>()) {
      REQUIRE(y >= 0);
      REQUIRE(y <= 9);
      ++histogram[y];
    }
    for (int64_t c : histogram) CHECK(c == per_class);
  }
  // The first labels, as `zcat ... | xxd` shows them (ankle boot, T-shirt, T-shirt, dress, ...).
  CHECK(train.labels.narrow(0, 0, 8).to_vector<int64_t>() == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2});
  CHECK(test.labels.narrow(0, 0, 8).to_vector<int64_t>() == std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6});
  // Pixel statistics over all 47,040,000 training pixels, computed independently (Python over
  // the raw bytes): mean 0.28604059698879547, std 0.3530242445149226. Each input is the
  // float32 nearest p / 255 (relative error <= 2^-24), so the statistics of the inputs agree
  // to within 2e-7 relative.
  auto stats = [](const Tensor& t) {
    const std::vector<float> x = t.to_vector<float>();
    double sum = 0, sq = 0, lo = x[0], hi = x[0];
    for (float v : x) {
      sum += v;
      sq += double{v} * v;
      lo = std::min<double>(lo, v);
      hi = std::max<double>(hi, v);
    }
    const double mean = sum / static_cast<double>(x.size());
    return std::array<double, 4>{mean, std::sqrt(sq / static_cast<double>(x.size()) - mean * mean), lo, hi};
  };
  const auto [mean, std, lo, hi] = stats(train.images);
  CHECK(lo == 0.0);
  CHECK(hi == 1.0);
  CHECK(mean == doctest::Approx(0.28604059698879547).epsilon(2e-7));
  CHECK(std == doctest::Approx(0.3530242445149226).epsilon(2e-7));
  // Normalised with the rounded statistics (the default): mean ~0.0001 and std ~1.0001.
  const auto [nmean, nstd, nlo, nhi] = stats(load_fashion_mnist(*dir, Split::Train).images);
  CHECK(std::abs(nmean - (0.28604059698879547 - 0.2860) / 0.3530) < 5e-7);
  CHECK(nstd == doctest::Approx(0.3530242445149226 / 0.3530).epsilon(2e-7));
  CHECK(nlo == static_cast<float>(-0.2860 / 0.3530));
  CHECK(nhi == static_cast<float>((1 - 0.2860) / 0.3530));
}

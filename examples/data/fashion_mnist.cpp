// load_fashion_mnist: two IDX files through read_idx_gz, the checks that tie them together,
// and the conversion to tensors through a 256-entry pixel table.
#include "fashion_mnist.h"

#include "idx.h"

#include <cmath>
#include <filesystem>
#include <system_error>

namespace kiln::data {

namespace {

constexpr const char* kWho = "load_fashion_mnist";

std::string join_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace

const std::array<std::string_view, 10>& fashion_mnist_classes() {
  static const std::array<std::string_view, 10> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                         "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::array<std::string, 2> fashion_mnist_files(Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  return {prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz"};
}

bool fashion_mnist_available(const std::string& dir) {
  for (Split split : {Split::Train, Split::Test})
    for (const std::string& name : fashion_mnist_files(split))
      if (!is_file(join_path(dir, name))) return false;
  return true;
}

std::optional<std::string> find_fashion_mnist() {
  for (std::string_view dir : {kFashionMnistStagedDir, kFashionMnistSystemDir})
    if (fashion_mnist_available(std::string(dir))) return std::string(dir);
  return std::nullopt;
}

std::array<float, 256> fashion_mnist_pixel_table(const FashionMnistOptions& options) {
  KILN_CHECK(std::isfinite(options.mean) && std::isfinite(options.std) && options.std > 0,
             "fashion_mnist_pixel_table: mean must be finite and std positive, got mean {} std {}", options.mean,
             options.std);
  std::array<float, 256> table{};
  for (int p = 0; p < 256; ++p) {
    const double x = p / 255.0;
    table[p] = static_cast<float>(options.normalize ? (x - options.mean) / options.std : x);
  }
  return table;
}

LabeledImages load_fashion_mnist(const std::string& dir, Split split, const FashionMnistOptions& options) {
  const std::array<float, 256> table = fashion_mnist_pixel_table(options);
  std::error_code ec;
  KILN_CHECK(std::filesystem::is_directory(dir, ec),
             "{}: the data directory {} does not exist (Debian's package dataset-fashion-mnist installs the files in "
             "{}; scripts/setup.sh installs it)",
             kWho, dir, kFashionMnistSystemDir);
  const auto [image_name, label_name] = fashion_mnist_files(split);
  const std::string image_path = join_path(dir, image_name), label_path = join_path(dir, label_name);
  for (const std::string& path : {image_path, label_path})
    KILN_CHECK(std::filesystem::exists(path, ec), "{}: {} is missing (Debian's package dataset-fashion-mnist "
               "installs the four files in {})", kWho, path, kFashionMnistSystemDir);

  const IdxArray images = read_idx_gz(image_path, idx_magic(IdxType::UInt8, 3), kWho);
  KILN_CHECK(images.dims[1] == kFashionMnistSide && images.dims[2] == kFashionMnistSide,
             "{}: {} holds {}x{} images, expected {}x{}", kWho, image_path, images.dims[1], images.dims[2],
             kFashionMnistSide, kFashionMnistSide);
  const IdxArray labels = read_idx_gz(label_path, idx_magic(IdxType::UInt8, 1), kWho);
  const int64_t n = images.dims[0];
  KILN_CHECK(labels.dims[0] == n, "{}: {} holds {} labels but {} holds {} images", kWho, label_path, labels.dims[0],
             image_path, n);
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK(labels.data[i] < kFashionMnistClasses, "{}: {} has label {} at index {}, outside [0, {}]", kWho,
               label_path, labels.data[i], i, kFashionMnistClasses - 1);

  LabeledImages out{empty({n, kFashionMnistPixels}, kFloat32), empty({n}, kInt64)};
  float* x = out.images.data_ptr<float>();
  for (size_t i = 0; i < images.data.size(); ++i) x[i] = table[images.data[i]];
  int64_t* y = out.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) y[i] = labels.data[i];
  return out;
}

}  // namespace kiln::data

// Fashion-MNIST (Zalando's 28x28 greyscale clothing images, 10 classes; 60,000 for training
// and 10,000 for testing) loaded from its four IDX .gz files into Kiln tensors.
//
// Debian's package dataset-fashion-mnist installs the files in
// /usr/share/datasets/fashion-mnist (scripts/setup.sh installs it);
// scripts/stage_fashion_mnist.sh copies them into ./data/fashion-mnist for machines without
// the package. Images become float32 [N, 784] (row-major pixels) as pixel / 255, and with
// `normalize` then (x - mean) / std with the training set's mean 0.2860 and std 0.3530
// (computed over all 47,040,000 training pixels: 0.28604, 0.35302). Each of the 256 byte
// values maps through one float32 table computed in double, so the PyTorch reference
// (bench/fashion_mnist_torch.py) builds bit-identical inputs the same way.
//
// Every file is validated (idx.h), and then the pair: 28x28 images, as many labels as
// images, labels in [0, 9]. Errors are kiln::Error messages starting with
// "load_fashion_mnist:" and naming the file.
#pragma once

#include <kiln/kiln.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::data {

/// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr std::string_view kFashionMnistSystemDir = "/usr/share/datasets/fashion-mnist";
/// Where scripts/stage_fashion_mnist.sh copies them, relative to the repository root.
inline constexpr std::string_view kFashionMnistStagedDir = "data/fashion-mnist";
/// The training set's pixel mean and standard deviation (of pixel / 255), rounded to 4 places.
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;
/// Image side and pixels per image.
inline constexpr int64_t kFashionMnistSide = 28;
inline constexpr int64_t kFashionMnistPixels = kFashionMnistSide * kFashionMnistSide;
/// Number of classes.
inline constexpr int64_t kFashionMnistClasses = 10;

/// Which half of the data set.
enum class Split { Train, Test };

/// How pixels become inputs.
struct FashionMnistOptions {
  bool normalize = true;             // (pixel / 255 - mean) / std; otherwise pixel / 255
  double mean = kFashionMnistMean;
  double std = kFashionMnistStd;     // must be positive
};

/// One split in memory, on the CPU.
struct LabeledImages {
  Tensor images;  // float32 [N, 784]
  Tensor labels;  // int64 [N], values in [0, 9]
};

/// The class names, by label ("T-shirt/top", "Trouser", ...).
const std::array<std::string_view, 10>& fashion_mnist_classes();
/// The file names of a split's images and labels ("train-images-idx3-ubyte.gz", ...).
std::array<std::string, 2> fashion_mnist_files(Split split);
/// True when `dir` holds all four files.
bool fashion_mnist_available(const std::string& dir);
/// The first directory holding all four files among ./data/fashion-mnist and
/// /usr/share/datasets/fashion-mnist, or nullopt.
std::optional<std::string> find_fashion_mnist();
/// The 256-entry table pixel byte -> input value (float32) for `options`.
std::array<float, 256> fashion_mnist_pixel_table(const FashionMnistOptions& options = {});
/// Loads one split from `dir` (validated as the header says).
LabeledImages load_fashion_mnist(const std::string& dir, Split split, const FashionMnistOptions& options = {});

}  // namespace kiln::data

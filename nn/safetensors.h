// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), the
// format PyTorch users exchange weights in: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then the
// tensors' bytes, row-major and little-endian. Files written here load with Python's
// safetensors.torch.load_file, and files it writes load here.
//
//   save(model.state_dict(), "model.safetensors");
//   model.load_state_dict(load("model.safetensors"));
//
// A save goes to a temporary file beside the target that is renamed over it once complete, so
// a failed save never leaves a half-written checkpoint under the target's name. A load checks
// the whole header (nn/safetensors_header.h) before it reads data, and names the file and the
// tensor in every error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "state_dict.h"

namespace kiln {

/// Writes `state_dict` (every dtype; CUDA tensors are copied to the host, strided ones
/// written contiguous) and its metadata to `path` in the safetensors format.
void save(const StateDict& state_dict, const std::filesystem::path& path);

/// Reads a safetensors file into a StateDict (entries in file order) with its metadata, the
/// tensors placed on `device`; throws kiln::Error naming the file (and tensor) when malformed.
StateDict load(const std::filesystem::path& path, Device device = Device::cpu());

/// save() into memory: the bytes a safetensors file of `state_dict` holds.
std::vector<uint8_t> save_bytes(const StateDict& state_dict);

/// load() from memory; `name` stands for the file in error messages.
StateDict load_bytes(std::span<const uint8_t> bytes, Device device = Device::cpu(),
                     const std::string& name = "<memory>");

}  // namespace kiln

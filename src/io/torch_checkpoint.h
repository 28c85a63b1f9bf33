// PyTorch checkpoints as the releases ship them (torch.save's zip format: Wan2.2_VAE.pth,
// MAGI-2's turbo_vae/checkpoint.ckpt), read without Python and without running any code: the zip
// central directory, then data.pkl through a pickle machine that knows only what a weights-only
// checkpoint holds (dicts, lists, tuples, numbers, strings, storages and torch's tensor rebuild
// calls); any other import or opcode is refused by name. Tensors stay views of the file's mapping.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/tensor.h"

namespace avdit {

class SafetensorsFile;  // io/safetensors.h

// Whether `path` is named as a PyTorch checkpoint (.pth, .pt or .ckpt).
bool is_torch_checkpoint_name(const std::filesystem::path& path);

// The state dict of a torch.save archive, as a file of tensor views (Checkpoint reads it like a
// safetensors file). The state dict is chosen as MAGI-2's get_turbo_vaed chooses it: the top
// level's "ema_state_dict", else its "state_dict", else the top level itself, with a leading
// "module." stripped from every name; entries that are not tensors are left out. BadInput naming
// the file for anything else: not a zip, truncated, compressed or encrypted records, a pickle
// that imports or does what a weights-only checkpoint does not, a tensor outside its storage or
// not contiguous in it, big-endian data.
std::shared_ptr<SafetensorsFile> open_torch_checkpoint(const std::filesystem::path& path);

// The same over bytes already in memory (`name` is used in messages); the tests' and fuzzers'
// entry point.
std::shared_ptr<SafetensorsFile> torch_checkpoint_from_memory(std::shared_ptr<const void> bytes,
                                                              uint64_t size,
                                                              const std::filesystem::path& name);

// Every tensor of the state dict, zero-copy (as read_all for safetensors).
TensorMap read_torch_checkpoint(const std::filesystem::path& path);

}  // namespace avdit

// Device-side errors: how a CUDA kernel that meets bad input (a class index out of range)
// reports it without a host synchronisation per call.
//
// Note [Device-side errors]
// A check that needs the data (is every target in [0, C)?) cannot run on the host without
// waiting for the GPU, and waiting on every call stalls every training step. PyTorch's
// answer is a device-side assert, which kills the CUDA context. Kiln's: the kernel records
// {message kind, three values} in a per-device record, keeps going without reading out of
// bounds (it writes NaN where the bad value would have been used), and the host looks at
// the record at every synchronisation point Kiln owns (Stream/Event/device synchronize,
// blocking device-to-host copies, item(), to_vector()). The first error recorded since the
// last look is raised there, once, as a kiln::Error whose message names the op; then the
// record is cleared and the context stays usable, unlike after a real CUDA assert.
//
// The record is split so that nothing needs atomics on host memory (which PCIe hosts do
// not guarantee from the device):
//   - a claim word in device memory: a kernel that has an error does
//     atomicMax(claim, epoch); only the first of an epoch sees a smaller old value;
//   - a report in mapped pinned host memory: the host writes `epoch` (errors of this epoch
//     may be reported); the claiming kernel writes kind and values, fences, then sets
//     `reported = epoch`. The host's check is two loads of ordinary cached host memory.
// The host takes an error by advancing `epoch` (a compare-exchange, so two threads that
// synchronise at once raise it once). A kernel queued inside a CUDA graph records the same
// way when the graph is replayed; the error surfaces at the first synchronisation after.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::cuda {

/// The host-visible half of a device's error record (mapped pinned memory).
struct DeviceErrorReport {
  uint32_t epoch;     ///< written by the host: errors of this epoch may be reported
  uint32_t reported;  ///< written by a kernel: equals `epoch` once kind and args are complete
  uint32_t kind;      ///< the message, from register_device_error
  uint32_t padding;
  int64_t args[3];    ///< the values the message shows ({0}, {1}, {2})
};

/// What a kernel needs to report an error on its device: passed to kernels by value.
struct DeviceErrorSlot {
  unsigned long long* claim;  ///< device memory: the newest epoch some kernel has claimed
  DeviceErrorReport* report;  ///< the device's address of the mapped report
};

/// Registers a message with up to three positional values ("cross_entropy: target {0} is
/// out of bounds for {1} classes (at row {2})") and returns the kind kernels record.
uint32_t register_device_error(const std::string& format);

/// The message of `kind` with `args` filled in (what check_device_error throws).
std::string format_device_error(uint32_t kind, const int64_t (&args)[3]);

/// The error slot of CUDA device `device`, created on first use (device memory and mapped
/// host memory that live until the process ends). CUDA builds only.
DeviceErrorSlot device_error_slot(int device);

/// Throws (once) the error a kernel on `device` recorded since the last check, if any; a
/// few loads of host memory when there is none. Called at every synchronisation point.
void check_device_error(int device);

}  // namespace kiln::cuda

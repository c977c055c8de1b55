// A SIMT emulator for testing GPU kernel bodies on a machine without a GPU. It runs every thread of
// a block as a fiber on the calling thread and implements the primitives of kernels/cuda/simt.cuh:
// block and warp barriers, warp shuffles and the m16n8k16 tensor-core product with PTX's fragment
// layout. Barriers that a GPU would never complete (threads of a block or lanes of a warp waiting
// at different barriers, a lane that exits while its warp waits) raise an error instead of hanging,
// and shared memory starts as all-ones bytes (NaN in f32, f16 and bf16), so reading it before
// writing it shows up in results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace tessera::simt {

using BlockBody = std::function<void(int64_t block, int thread, unsigned char* shared)>;

// Runs body(block, thread, shared) for every block in [0, blocks) and thread in [0, threads)
// (threads a positive multiple of 32), one block at a time, with `shared_bytes` of shared memory
// per block (16-byte aligned). Throws std::logic_error on a barrier that cannot complete, and
// rethrows the first exception a thread raised.
void emulate(int64_t blocks, int threads, size_t shared_bytes, const BlockBody& body);

}  // namespace tessera::simt

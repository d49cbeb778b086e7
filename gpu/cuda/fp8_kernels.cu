// The fp8 kernels: one CUDA block per (KV block, layer, K or V) tile. They
// use the same scalar conversions and geometry as the CPU reference
// (encoding/fp8_e4m3.h, encoding/fp8_geometry.h) and take maxima, which are exact in
// any order, so their bytes equal the reference's. Compiled with
// --fmad=false so no multiply is fused into something the CPU does not do.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/cuda/fp8_kernels.h"

namespace kvtier {
namespace {

constexpr int kThreads = 256;

__device__ float TileAbsMax(float m, float x) { return fp8::IsFinite(x) ? fmaxf(m, fabsf(x)) : m; }

__global__ void EncodeKernel(fp8::Geometry g, uint64_t block_bytes, const uint8_t* plain,
                             uint8_t* encoded, unsigned long long* clipped_total) {
  const uint8_t* in = plain + blockIdx.x * block_bytes;
  uint8_t* o = encoded + blockIdx.x * g.encoded_bytes;
  const uint32_t l = blockIdx.y;
  const int kv = static_cast<int>(blockIdx.z);
  const uint32_t tid = threadIdx.x;
  if (l == 0 && kv == 0 && tid < fp8::kHeaderBytes) {
    uint8_t header[fp8::kHeaderBytes] = {};
    const uint32_t magic = fp8::kMagic;
    const uint16_t version = fp8::kVersion;
    memcpy(header, &magic, 4);
    memcpy(header + 4, &version, 2);
    header[6] = g.dtype;
    memcpy(header + 8, &g.valid, 4);
    memcpy(header + 12, &g.group, 4);
    o[tid] = header[tid];
  }
  unsigned long long clipped = 0;
  if (kv == 0) {
    for (uint32_t grp = 0; grp < g.full_groups; ++grp) {
      for (uint32_t c = tid; c < g.channels; c += blockDim.x) {
        float amax = 0.0f;
        for (uint32_t t = grp * g.group; t < (grp + 1) * g.group; ++t) {
          amax = TileAbsMax(amax, fp8::LoadElement(in, g, g.element(l, 0, t, c)));
        }
        const float scale = fp8::ScaleFor(amax);
        memcpy(o + g.scale_offset(l, 0) + 4 * (uint64_t(grp) * g.channels + c), &scale, 4);
        for (uint32_t t = grp * g.group; t < (grp + 1) * g.group; ++t) {
          bool clip;
          o[g.code_offset(l, 0) + uint64_t(t) * g.channels + c] =
              fp8::Quantize(fp8::LoadElement(in, g, g.element(l, 0, t, c)), scale, &clip);
          clipped += clip;
        }
      }
    }
    const uint64_t raw = uint64_t(g.k_raw_tokens()) * g.channels;
    for (uint64_t idx = tid; idx < raw; idx += blockDim.x) {
      const uint32_t t = g.k_coded_tokens() + static_cast<uint32_t>(idx / g.channels);
      const uint32_t c = static_cast<uint32_t>(idx % g.channels);
      memcpy(o + g.raw_offset(l) + g.elem_bytes * idx, in + g.elem_bytes * g.element(l, 0, t, c),
             g.elem_bytes);
    }
  } else {
    __shared__ float partial[kThreads];
    for (uint32_t t = 0; t < g.valid; ++t) {
      float amax = 0.0f;
      for (uint32_t c = tid; c < g.channels; c += blockDim.x) {
        amax = TileAbsMax(amax, fp8::LoadElement(in, g, g.element(l, 1, t, c)));
      }
      partial[tid] = amax;
      __syncthreads();
      for (uint32_t half = blockDim.x / 2; half > 0; half /= 2) {
        if (tid < half) partial[tid] = fmaxf(partial[tid], partial[tid + half]);
        __syncthreads();
      }
      const float scale = fp8::ScaleFor(partial[0]);
      if (tid == 0) memcpy(o + g.scale_offset(l, 1) + 4 * uint64_t(t), &scale, 4);
      for (uint32_t c = tid; c < g.channels; c += blockDim.x) {
        bool clip;
        o[g.code_offset(l, 1) + uint64_t(t) * g.channels + c] =
            fp8::Quantize(fp8::LoadElement(in, g, g.element(l, 1, t, c)), scale, &clip);
        clipped += clip;
      }
      __syncthreads();  // partial[0] is read above before the next token overwrites it
    }
  }
  if (clipped != 0) atomicAdd(clipped_total, clipped);
}

__global__ void DecodeKernel(fp8::Geometry g, uint64_t block_bytes, const uint8_t* encoded,
                             uint8_t* plain) {
  const uint8_t* e = encoded + blockIdx.x * g.encoded_bytes;
  uint8_t* out = plain + blockIdx.x * block_bytes;
  const uint32_t l = blockIdx.y;
  const int kv = static_cast<int>(blockIdx.z);
  const uint64_t coded = uint64_t(kv == 0 ? g.k_coded_tokens() : g.valid) * g.channels;
  for (uint64_t idx = threadIdx.x; idx < coded; idx += blockDim.x) {
    const uint32_t t = static_cast<uint32_t>(idx / g.channels);
    const uint32_t c = static_cast<uint32_t>(idx % g.channels);
    const uint64_t scale_at =
        kv == 0 ? g.scale_offset(l, 0) + 4 * (uint64_t(t / g.group) * g.channels + c)
                : g.scale_offset(l, 1) + 4 * uint64_t(t);
    float scale;
    memcpy(&scale, e + scale_at, 4);
    fp8::StoreElement(out, g, g.element(l, kv, t, c),
                      fp8::Dequantize(e[g.code_offset(l, kv) + idx], scale));
  }
  if (kv == 0) {
    const uint64_t raw = uint64_t(g.k_raw_tokens()) * g.channels;
    for (uint64_t idx = threadIdx.x; idx < raw; idx += blockDim.x) {
      const uint32_t t = g.k_coded_tokens() + static_cast<uint32_t>(idx / g.channels);
      const uint32_t c = static_cast<uint32_t>(idx % g.channels);
      memcpy(out + g.elem_bytes * g.element(l, 0, t, c), e + g.raw_offset(l) + g.elem_bytes * idx,
             g.elem_bytes);
    }
  }
}

}  // namespace

cudaError_t LaunchFp8Encode(const fp8::Geometry& g, const void* plain, void* encoded,
                            size_t count, unsigned long long* clipped, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(count), g.layers, 2);
  EncodeKernel<<<grid, kThreads, 0, stream>>>(g, g.block_elements * g.elem_bytes,
                                              static_cast<const uint8_t*>(plain),
                                              static_cast<uint8_t*>(encoded), clipped);
  return cudaGetLastError();
}

cudaError_t LaunchFp8Decode(const fp8::Geometry& g, const void* encoded, void* plain,
                            size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(count), g.layers, 2);
  DecodeKernel<<<grid, kThreads, 0, stream>>>(g, g.block_elements * g.elem_bytes,
                                              static_cast<const uint8_t*>(encoded),
                                              static_cast<uint8_t*>(plain));
  return cudaGetLastError();
}

}  // namespace kvtier

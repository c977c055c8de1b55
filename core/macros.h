// Portability macros shared by CPU and CUDA code.
#pragma once

#if defined(__CUDACC__)
#define TS_HOST_DEVICE __host__ __device__
#define TS_INLINE __forceinline__
#else
#define TS_HOST_DEVICE
#define TS_INLINE inline
#endif

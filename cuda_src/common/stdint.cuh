// Fixed-width integer types for every kernel file, under nvcc and under NVRTC.
//
// NVRTC compiles without the C library's headers (there is no <stdint.h> on its include
// path), so under NVRTC (__CUDACC_RTC__) the few types the kernels use are declared here
// with the widths CUDA guarantees on every platform it supports.
#pragma once

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#ifndef COMMON_H
#define COMMON_H

#include <metal_stdlib>
using namespace metal;

// Common constants and utilities for Metal kernels
constant float RELU_THRESHOLD = 0.0f;

#endif // COMMON_H
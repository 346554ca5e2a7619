// Compile-check stand-in; see tools/checks/hip_stubs/README.md.
#pragma once
#include <hipblas/hipblas.h>  // hipblasStatus_t

#include <cstddef>

typedef struct hipblasLtMatmulDescStub* hipblasLtMatmulDesc_t;
typedef struct hipblasLtHandleStub* hipblasLtHandle_t;
typedef enum {
  HIPBLASLT_MATMUL_DESC_SM_COUNT_TARGET = 1  // placeholder value
} hipblasLtMatmulDescAttributes_t;

hipblasStatus_t hipblasLtMatmulDescSetAttribute(
    hipblasLtMatmulDesc_t desc,
    hipblasLtMatmulDescAttributes_t attr,
    const void* buf,
    size_t size_in_bytes);

hipblasStatus_t hipblasLtGetVersion(hipblasLtHandle_t handle, int* version);

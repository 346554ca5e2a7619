// Compile-check stand-in; see tools/checks/hip_stubs/README.md.
#pragma once

typedef enum { HIPBLAS_STATUS_SUCCESS = 0 } hipblasStatus_t;
typedef struct hipblasHandleStub* hipblasHandle_t;

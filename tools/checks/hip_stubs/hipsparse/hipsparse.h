// Compile-check stand-in; see tools/checks/hip_stubs/README.md.
#pragma once

typedef enum { HIPSPARSE_STATUS_SUCCESS = 0 } hipsparseStatus_t;
typedef struct hipsparseHandleStub* hipsparseHandle_t;

const char* hipsparseGetErrorString(hipsparseStatus_t status);

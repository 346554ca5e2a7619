// Compile-check stand-in; see tools/checks/hip_stubs/README.md.
#pragma once

typedef enum {
  HIPSOLVER_STATUS_SUCCESS = 0,
  HIPSOLVER_STATUS_INVALID_VALUE = 3  // placeholder value
} hipsolverStatus_t;
typedef struct hipsolverHandleStub* hipsolverDnHandle_t;

const char* hipsolverGetErrorMessage(hipsolverStatus_t status);

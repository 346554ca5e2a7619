// Compile-check stand-in; see tools/checks/hip_stubs/README.md.
#pragma once
#include <hip/hip_runtime_api.h>

typedef struct rocblas_handle_stub* rocblas_handle;
typedef enum { rocblas_status_success = 0 } rocblas_status;

rocblas_status rocblas_get_stream(rocblas_handle handle, hipStream_t* stream);
rocblas_status rocblas_set_stream(rocblas_handle handle, hipStream_t stream);

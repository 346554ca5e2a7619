// Compile-check stand-in; see tools/checks/hip_stubs/README.md. Forced
// (-include) into the hipified units: torch's c10/hip headers call HIP's
// graph user objects, which HIP 5.3 added; Debian's HIP is 5.2.
#pragma once
#include <hip/hip_runtime_api.h>

#if HIP_VERSION < 50300000
typedef struct hipUserObjectStub* hipUserObject_t;
typedef enum { hipUserObjectNoDestructorSync = 1 } hipUserObjectFlags;
typedef enum { hipGraphUserObjectMove = 1 } hipUserObjectRetainFlags;

hipError_t hipUserObjectCreate(hipUserObject_t* object_out, void* ptr,
                               hipHostFn_t destroy,
                               unsigned int initial_refcount,
                               unsigned int flags);
hipError_t hipUserObjectRelease(hipUserObject_t object, unsigned int count = 1);
hipError_t hipGraphRetainUserObject(hipGraph_t graph, hipUserObject_t object,
                                    unsigned int count = 1,
                                    unsigned int flags = 0);
#endif

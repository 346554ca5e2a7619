#pragma once

// Stands in for NVML's header where the CUDA toolkit was installed without
// NVML's development files: c10/cuda/driver_api.h includes <nvml.h> only to
// declare its table of NVML entry points, which aten/'s green-context
// streams share with PyTorch but never call NVML through. setup.py adds this
// folder to the include path only when no real nvml.h is found. The
// declarations follow NVML's, so the table has the same members; the types
// behind the pointers stay incomplete.

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvmlReturn_enum { NVML_SUCCESS = 0 } nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlPciInfo_st nvmlPciInfo_t;
typedef struct nvmlProcessInfo_v1_st nvmlProcessInfo_v1_t;
typedef struct nvmlGpuFabricInfoV_st nvmlGpuFabricInfoV_t;
typedef enum nvmlIntNvLinkDeviceType_enum {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
} nvmlIntNvLinkDeviceType_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(
    const char* pciBusId,
    nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(
    nvmlDevice_t device,
    unsigned int link,
    nvmlIntNvLinkDeviceType_t* pNvLinkDeviceType);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(
    nvmlDevice_t device,
    unsigned int link,
    nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(
    nvmlDevice_t device,
    unsigned int* infoCount,
    nvmlProcessInfo_v1_t* infos);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion);
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(
    nvmlDevice_t device,
    nvmlGpuFabricInfoV_t* gpuFabricInfo);

#ifdef __cplusplus
}
#endif

// Compile-check stand-in; see tools/checks/hip_stubs/README.md.
#pragma once
#define HIPBLASLT_VERSION_MAJOR 1
#define HIPBLASLT_VERSION_MINOR 4
#define HIPBLASLT_VERSION_PATCH 0

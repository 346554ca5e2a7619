// Makes the test-only library importable as overlap_ops._testing_C.
// Importing it runs the static TORCH_LIBRARY_FRAGMENT(overlap_ops_testing)
// registrations of every file in this folder. Only tests load it, through
// overlap_ops/_testing.py; `import overlap_ops` never does.
//
// The library links against overlap_ops._C (torch_ext/setup.py) and calls
// the aten/ code compiled there, so the probes see the same process-wide
// state (stream caches, switches) as the shipped ops.

#include <Python.h>

extern "C" {
PyObject* PyInit__testing_C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT, "_testing_C", "overlap_ops test-only operators",
      -1, nullptr};
  return PyModule_Create(&module_def);
}
}

// Makes the shared library importable as overlap_ops._C. Importing it runs
// the static TORCH_LIBRARY registrations in Register.cpp.

#include <Python.h>

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT, "_C", "overlap_ops native operators", -1,
      nullptr};
  return PyModule_Create(&module_def);
}
}

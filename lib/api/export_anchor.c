/* The shared library's own translation unit: libspecla.so is the engine archive linked whole,
 * with only the SPECLA_API symbols visible. This file keeps the target non-empty for CMake. */
#include "specla/specla.h"

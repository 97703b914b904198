// Go binding of SpecLA. The cgo layer in internal/native is generated from ../specla.i by SWIG at
// build time (bindings/go/CMakeLists.txt builds a copy of this module in the build tree); it is
// not kept in the sources.
module specla

go 1.19

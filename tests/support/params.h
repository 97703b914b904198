// Params for tests that own the structs they point to. The C API takes nested params by pointer
// (specla_generate_params.sampling, specla_spec_params.generate); these wrappers hold the nested
// struct as a member of the same name, so a test writes `p.generate.sampling.seed = 3` as with a
// value, copies and assigns them freely, and get() points the C struct at the members it owns.
#pragma once

#include "specla/specla.h"

namespace test {

struct GenerateParams : specla_generate_params {
    specla_sampling_params sampling = specla_sampling_default_params();  // hides the base's pointer

    GenerateParams() : specla_generate_params(specla_generate_default_params()) {}
    // The C struct, pointing at this object's sampling; valid while this object is.
    const specla_generate_params *get() {
        specla_generate_params::sampling = &sampling;
        return this;
    }
};

struct SpecParams : specla_spec_params {
    GenerateParams generate;  // hides the base's pointer

    // Speculation on every pass (speculation_min_gain 0): the tests check speculation itself, and
    // their step counts must not depend on how fast the machine is. The gate has its own tests.
    SpecParams() : specla_spec_params(specla_spec_default_params()) { speculation_min_gain = 0; }
    // The C struct, pointing at this object's generate (and its sampling); valid while this object is.
    const specla_spec_params *get() {
        specla_spec_params::generate = generate.get();
        return this;
    }
};

struct VerifyParams : specla_verify_params {
    specla_sampling_params sampling = specla_sampling_default_params();  // hides the base's pointer

    VerifyParams() : specla_verify_params(specla_verify_default_params()) {}
    explicit VerifyParams(const specla_sampling_params &s, bool deferred_commit = true) : VerifyParams() {
        sampling = s;
        this->deferred_commit = deferred_commit;
    }
    const specla_verify_params *get() {
        specla_verify_params::sampling = &sampling;
        return this;
    }
};

// An info struct with its struct_size set, ready for the library to fill.
template <class T>
T info_struct() {
    T t{};
    t.struct_size = sizeof t;
    return t;
}

}  // namespace test

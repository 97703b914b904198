// Conversions from the C parameter structs shared by several C API files.
#pragma once

#include "engine/backend.h"
#include "specla/specla.h"

struct specla_model;

namespace specla {

class Tokenizer;

// Checks and converts; throws SPECLA_ERR_INVALID_ARGUMENT naming the bad field.
SamplingConfig sampling_from_params(const specla_sampling_params &p);
// The model's tokenizer or null.
const Tokenizer *tokenizer_of(const specla_model *model);

}  // namespace specla

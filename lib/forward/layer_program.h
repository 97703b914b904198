// The model, written once: the layer program of a Gated DeltaNet language model over any pass
// (pass.h), run by any backend through its ops (layer_ops.h).
#pragma once

#include <cstdint>

#include "forward/layer_ops.h"

namespace specla {

void run_layer_program(LayerOps &ops, const Pass &pass, int32_t num_layers);

}  // namespace specla

#include "forward/layer_program.h"

namespace specla {

// A layer is pre-norm: h += mixer(RMSNorm(h)); h += MLP(RMSNorm(h)). A model family with other
// layer kinds (for example GDN layers interleaved with attention) branches here on the layer's
// kind, once, for every backend and pass.
void run_layer_program(LayerOps &ops, const Pass &pass, int32_t num_layers) {
    ops.input_rows(pass);
    for (int layer = 0; layer < num_layers; ++layer) {
        ops.mixer_in(layer, pass);
        ops.conv_gates(layer, pass);
        ops.recurrence(layer, pass);
        ops.mixer_out(layer, pass);
        ops.mlp_up(layer, pass);
        ops.mlp_down(layer, pass);
    }
    ops.output_head(pass);
}

}  // namespace specla

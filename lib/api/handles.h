// The C handles are thin owners of engine objects; nothing else lives in them.
#pragma once

#include <memory>

#include "specla/specla.h"

namespace specla {
class Tokenizer;
class Model;
class Session;
}  // namespace specla

struct specla_tokenizer {
    std::shared_ptr<const specla::Tokenizer> impl;
    bool owned_by_model = false;  // a model's tokenizer is freed with the model
};

struct specla_model {
    std::shared_ptr<specla::Model> impl;
    std::unique_ptr<specla_tokenizer> tokenizer;  // null when the folder had none
};

struct specla_session {
    std::unique_ptr<specla::Session> impl;
    specla_model *model = nullptr;  // borrowed: the model outlives its sessions
    specla_generation *generation = nullptr;  // the pull generation using it until it ends
};

namespace specla {
class Drafter;
}

struct specla_drafter {
    std::unique_ptr<specla::Drafter> impl;
    const specla_model *model = nullptr;  // borrowed
    specla_generation *generation = nullptr;  // the pull generation using it until it ends
};

namespace specla {
// Ends a pull generation (lib/api/api_generation.cpp): it lets go of its session and drafter,
// which are free for other calls (or for specla_*_free) afterwards. Nothing when already ended.
void end_generation(specla_generation *generation) noexcept;
}  // namespace specla

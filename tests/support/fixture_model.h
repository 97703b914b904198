// A fixture checkpoint loaded into the engine (tests/fixtures/<name>) on the CPU backend with two
// threads, as the internal tests that drive sessions use it.
#pragma once

#include <memory>
#include <string>

#include "engine/model.h"
#include "support/fixture.h"

namespace test {

inline std::shared_ptr<specla::Model> load_fixture_model(const std::string &name) {
    specla::ModelOptions o;
    o.n_threads = 2;
    return specla::Model::load(fixture_dir(name), o);
}

}  // namespace test

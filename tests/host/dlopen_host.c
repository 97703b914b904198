/* A C host, like a language runtime, that links neither libspecla nor libstdc++: it first loads a
 * C++ library privately (RTLD_LOCAL), then libspecla the same way, and loads a tokenizer, a model
 * and generates text through symbols it looks up itself. libspecla must not change the process's
 * allocator: memory that libstdc++ allocates on libspecla's behalf is freed by libstdc++.
 *
 *   specla_dlopen_host PLUGIN.so LIBSPECLA.so MODEL_DIR      exit 0 and "ok ..." on success */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specla/specla.h"

static void *must_open(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    return h;
}

static void *must_sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

#define SYM(lib, name) ((__typeof__(&name))must_sym(lib, #name))

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PLUGIN.so LIBSPECLA.so MODEL_DIR\n", argv[0]);
        return 2;
    }
    void *plugin = must_open(argv[1]);
    int (*plugin_work)(int) = (int (*)(int))must_sym(plugin, "private_plugin_work");
    if (plugin_work(100) != 4000) {
        fprintf(stderr, "the plugin misbehaves\n");
        return 1;
    }

    void *lib = must_open(argv[2]);
    const char *(*last_error)(void) = SYM(lib, specla_last_error);
    specla_tokenizer *tok = NULL;
    specla_status s = SYM(lib, specla_tokenizer_load)(argv[3], &tok);
    if (s != SPECLA_OK) {
        fprintf(stderr, "specla_tokenizer_load: %d %s\n", (int)s, last_error());
        return 1;
    }
    int32_t ids[64];
    size_t n_ids = 0;
    const char *prompt = "def fibonacci(n):";
    s = SYM(lib, specla_tokenize)(tok, prompt, strlen(prompt), true, true, ids, 64, &n_ids);
    if (s != SPECLA_OK || n_ids == 0) {
        fprintf(stderr, "specla_tokenize: %d %s\n", (int)s, last_error());
        return 1;
    }
    SYM(lib, specla_tokenizer_free)(tok);

    specla_model *model = NULL;
    s = SYM(lib, specla_model_load)(argv[3], NULL, &model);
    if (s != SPECLA_OK) {
        fprintf(stderr, "specla_model_load: %d %s\n", (int)s, last_error());
        return 1;
    }
    specla_session *session = NULL;
    s = SYM(lib, specla_session_create)(model, NULL, &session);
    if (s != SPECLA_OK) {
        fprintf(stderr, "specla_session_create: %d %s\n", (int)s, last_error());
        return 1;
    }
    specla_generate_params gp;
    s = SYM(lib, specla_generate_params_init)(&gp, sizeof gp);
    if (s != SPECLA_OK) {
        fprintf(stderr, "specla_generate_params_init: %d %s\n", (int)s, last_error());
        return 1;
    }
    gp.max_tokens = 16;
    char *text = NULL;
    s = SYM(lib, specla_generate_text)(session, prompt, &gp, &text, NULL);
    if (s != SPECLA_OK || !text) {
        fprintf(stderr, "specla_generate_text: %d %s\n", (int)s, last_error());
        return 1;
    }
    printf("ok %zu prompt tokens, generated %zu bytes\n", n_ids, strlen(text));
    SYM(lib, specla_string_free)(text);
    SYM(lib, specla_session_free)(session);
    SYM(lib, specla_model_free)(model);
    /* The plugin still works after libspecla ran. */
    return plugin_work(10) == 400 ? 0 : 1;
}

/* The smallest useful SpecLA program, in C99: load a model, generate from token ids.
 *   cc hello.c $(pkg-config --cflags --libs specla) -o hello && ./hello MODEL_DIR */
#include <stdio.h>

#include <specla/specla.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    printf("SpecLA %s\n", specla_version());

    specla_model *model = NULL;
    specla_status st = specla_model_load(argv[1], NULL, &model); /* NULL: the default params */
    if (st != SPECLA_OK) {
        fprintf(stderr, "load failed: %s\n", specla_last_error());
        return 1;
    }
    specla_session *session = NULL;
    st = specla_session_create(model, NULL, &session);
    if (st != SPECLA_OK) {
        fprintf(stderr, "session failed: %s\n", specla_last_error());
        specla_model_free(model);
        return 1;
    }

    const int32_t prompt[] = {1, 2, 3};
    int32_t out[16];
    size_t n = 0;
    specla_generate_params gp = specla_generate_default_params();
    gp.max_tokens = 16;
    gp.stop_at_eos = false;
    st = specla_generate(session, prompt, 3, &gp, out, 16, &n);
    if (st == SPECLA_OK) {
        for (size_t i = 0; i < n; ++i) printf("%s%d", i ? "," : "", out[i]);
        printf("\n");
    } else {
        fprintf(stderr, "generate failed: %s\n", specla_last_error());
    }
    specla_session_free(session);
    specla_model_free(model);
    return st == SPECLA_OK ? 0 : 1;
}

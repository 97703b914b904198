/* Downstream use of an installed SpecLA: version checks, an error path, one evaluation.
 * Usage: consumer MODEL_DIR. Prints "vocab V next N" and exits 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <specla/specla.h>

static int fail(const char *what, specla_status st) {
    fprintf(stderr, "consumer: %s: %s: %s\n", what, specla_status_string(st), specla_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    int major = -1, minor = -1, patch = -1;
    specla_version_numbers(&major, &minor, &patch);
    if (major != SPECLA_VERSION_MAJOR || minor != SPECLA_VERSION_MINOR) {
        fprintf(stderr, "consumer: header %d.%d but library %d.%d\n", SPECLA_VERSION_MAJOR, SPECLA_VERSION_MINOR,
                major, minor);
        return 1;
    }

    /* An error comes back as a status plus a message on this thread. */
    specla_model *model = NULL;
    specla_status st = specla_model_load("/nonexistent/specla-consumer", NULL, &model);
    if (st != SPECLA_ERR_IO || model != NULL || strstr(specla_last_error(), "specla-consumer") == NULL) {
        fprintf(stderr, "consumer: expected SPECLA_ERR_IO naming the folder, got %d: %s\n", (int)st,
                specla_last_error());
        return 1;
    }

    specla_model_params mp = specla_model_default_params();
    st = specla_model_load(argv[1], &mp, &model);
    if (st != SPECLA_OK) return fail("load", st);
    specla_model_info info = {.struct_size = sizeof(specla_model_info)};
    st = specla_model_get_info(model, &info);
    if (st != SPECLA_OK) return fail("info", st);

    specla_session *session = NULL;
    st = specla_session_create(model, NULL, &session);
    if (st != SPECLA_OK) {
        specla_model_free(model);
        return fail("session", st);
    }
    const int32_t tokens[3] = {1, 2, 3};
    float *logits = malloc(sizeof(float) * (size_t)info.vocab_size);
    int rc = 0;
    st = specla_session_eval(session, tokens, 3, SPECLA_LOGITS_LAST, logits, (size_t)info.vocab_size);
    if (st != SPECLA_OK) {
        rc = fail("eval", st);
    } else {
        int32_t best = 0;
        for (int32_t i = 1; i < info.vocab_size; ++i)
            if (logits[i] > logits[best]) best = i;
        printf("vocab %d next %d\n", info.vocab_size, best);
    }
    free(logits);
    specla_session_free(session);
    specla_model_free(model);
    return rc;
}

/*
 * hello.c - a program embedding libweir as a user's would, built by
 * test_pkgconfig.sh with nothing but what pkg-config says.
 */
#include <stdio.h>

#include <weir/weir.h>

int main(void)
{
    weir_ctx *ctx;
    weir_store *store;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK || weir_memstore_new(ctx, NULL, &store) != WEIR_OK)
        return 1;
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 2, .window_us = 1000000};
    weir_limit lim;
    if (weir_limit_compile(&spec, &lim) != WEIR_OK)
        return 1;
    int allowed = 0;
    for (int i = 0; i < 3; i++) {
        weir_result r;
        if (weir_memstore_take(store, "k", 1, &lim, 0, 1, &r) != WEIR_OK)
            return 1;
        allowed += r.allowed;
    }
    printf("weir %s: %d of 3 allowed\n", weir_version(), allowed);
    weir_store_free(store);
    weir_ctx_free(ctx);
    return allowed == 2 ? 0 : 1;
}

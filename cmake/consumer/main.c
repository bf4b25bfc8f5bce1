/* cmake/consumer/main.c — built by cmake/consumer/CMakeLists.txt against an installed
 * fheplan: checks header/library skew and moves one value onto the emulated device. */
#include <fheplan/residency.h>

#include <stdio.h>
#include <stdlib.h>

static void free_buf(void *ctx, void *p, size_t n)
{
    (void)ctx;
    (void)n;
    free(p);
}

int main(void)
{
    if (fhr_version_number() != FHEPLAN_VERSION_NUMBER) {
        fprintf(stderr, "consumer: header %s but library %s\n", FHEPLAN_VERSION, fhr_version());
        return 1;
    }
    fhr_error e;
    fhr_error_init(&e);
    fhr_backend *b;
    fhr_manager *m = NULL;
    fhr_value *v = NULL;
    fhr_handle h;
    size_t buf;
    void *p = calloc(1, 4096);
    fhr_manager_config cfg = {NULL, NULL, 0, 0};
    fhr_adopt_opts o = {FHR_EXCLUSIVE, "ct", 0};
    int resident = 0;
    if (!p || fhr_backend_open("emu:1", &b, &e) != FHR_OK)
        goto fail;
    cfg.backend = b;
    if (fhr_manager_create(&cfg, &m, &e) != FHR_OK ||
        fhr_value_create(fhr_loc_host(), NULL, &v, &e) != FHR_OK ||
        fhr_value_add_buffer(v, p, 4096, free_buf, NULL, &buf, &e) != FHR_OK)
        goto fail;
    p = NULL; /* the value owns it */
    if (fhr_value_add_field(v, "c0", buf, 0, 4096, &e) != FHR_OK ||
        fhr_adopt(m, &v, &o, &h, &e) != FHR_OK ||
        fhr_move(m, h, fhr_loc_cuda(0), NULL, NULL, &e) != FHR_OK ||
        fhr_is_resident(m, h, fhr_loc_cuda(0), &resident, &e) != FHR_OK || !resident)
        goto fail;
    printf("consumer: fheplan %s, ct on cuda:0\n", fhr_version());
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
    return 0;
fail:
    fprintf(stderr, "consumer: %s\n", e.message[0] ? e.message : "not resident");
    free(p);
    fhr_value_destroy(v);
    return 1;
}

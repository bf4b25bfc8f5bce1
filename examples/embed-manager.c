/* examples/embed-manager.c — an engine embedding libfheplan through pkg-config: checks
 * header/library skew, adopts a value, places it under a budget, reads it back. */
#include <fheplan/residency.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_buf(void *ctx, void *p, size_t n)
{
    (void)ctx;
    (void)n;
    free(p);
}

int main(void)
{
    if (fhr_version_number() != FHEPLAN_VERSION_NUMBER) {
        fprintf(stderr, "header %s but library %s\n", FHEPLAN_VERSION, fhr_version());
        return 1;
    }
    fhr_backend *b;
    fhr_error e;
    fhr_error_init(&e);
    if (fhr_backend_open("emu:1", &b, &e) != FHR_OK) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    fhr_budget bud = {fhr_loc_cuda(0), 1 << 20};
    fhr_manager_config cfg = {b, &bud, 1, 64};
    fhr_manager *m;
    if (fhr_manager_create(&cfg, &m, &e) != FHR_OK)
        return 1;
    fhr_value *v;
    fhr_value_create(fhr_loc_host(), NULL, &v, NULL);
    char *p = malloc(4096);
    memset(p, 0x5a, 4096);
    size_t bi;
    fhr_value_add_buffer(v, p, 4096, free_buf, NULL, &bi, NULL);
    fhr_value_add_field(v, "c0", bi, 0, 4096, NULL);
    fhr_handle h;
    fhr_adopt_opts o = {FHR_EXCLUSIVE, "ct", 0};
    int rc = 1;
    if (fhr_adopt(m, &v, &o, &h, &e) == FHR_OK &&
        fhr_move(m, h, fhr_loc_cuda(0), NULL, NULL, &e) == FHR_OK &&
        fhr_move(m, h, fhr_loc_pinned(), NULL, NULL, &e) == FHR_OK) {
        fhr_lease *l;
        if (fhr_acquire(m, &h, 1, fhr_loc_pinned(), NULL, &l, &e) == FHR_OK) {
            void *f;
            size_t n;
            fhr_value_field(fhr_lease_value(l, h), "c0", &f, &n);
            rc = !(n == 4096 && ((unsigned char *)f)[4095] == 0x5a);
            fhr_lease_destroy(l);
        }
    }
    if (rc)
        fprintf(stderr, "embed-manager: %s\n", e.message[0] ? e.message : "content differs");
    else
        printf("embed-manager: ok (fheplan %s)\n", fhr_version());
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
    return rc;
}

/* tests/unit/test_value.c — values: fields as views over shared buffers, logical vs
 * storage bytes, compacting functional copies, and argument checks. */
#include "mgr_helpers.h"

Test(value, views_share_storage_and_copies_compact)
{
    fhr_backend *b = emu_backend(1);
    fhr_value *v = NULL;
    cr_assert_eq(fhr_value_create(fhr_loc_host(), NULL, &v, NULL), FHR_OK);
    uint8_t *p = malloc(1000);
    for (int i = 0; i < 1000; i++)
        p[i] = (uint8_t)(i * 7);
    size_t bi;
    cr_assert_eq(fhr_value_add_buffer(v, p, 1000, free_host, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "a", bi, 100, 200, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "b", bi, 250, 150, NULL), FHR_OK); /* overlaps a */
    cr_assert_eq(fhr_value_logical_nbytes(v), 350);
    cr_assert_eq(fhr_value_storage_nbytes(v), 1000);
    fhr_value *c = NULL;
    cr_assert_eq(fhr_value_to(v, fhr_loc_cuda(0), b, NULL, &c, NULL), FHR_OK);
    cr_assert_eq(fhr_value_storage_nbytes(c), 300, "copy should hold only bytes 100..400");
    cr_assert_eq(fhr_value_logical_nbytes(c), 350);
    fhr_value *back = NULL;
    cr_assert_eq(fhr_value_to(c, fhr_loc_host(), b, NULL, &back, NULL), FHR_OK);
    void *fa, *fb;
    size_t na, nb;
    cr_assert_eq(fhr_value_field(back, "a", &fa, &na), FHR_OK);
    cr_assert_eq(fhr_value_field(back, "b", &fb, &nb), FHR_OK);
    cr_assert_eq(na, 200);
    cr_assert_eq(nb, 150);
    cr_assert_eq(memcmp(fa, p + 100, 200), 0);
    cr_assert_eq(memcmp(fb, p + 250, 150), 0);
    cr_assert_eq((uint8_t *)fb - (uint8_t *)fa, 150, "views must keep sharing storage");
    cr_assert_eq(fhr_value_field(back, "zzz", &fa, &na), FHR_E_INVALID);
    fhr_value_destroy(back);
    fhr_value_destroy(c);
    fhr_value_destroy(v);
    fhr_backend_destroy(b);
}

Test(value, adopted_charge_is_storage_and_copies_report_actual)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_value *v = NULL;
    cr_assert_eq(fhr_value_create(fhr_loc_host(), NULL, &v, NULL), FHR_OK);
    size_t bi;
    cr_assert_eq(fhr_value_add_buffer(v, calloc(1, 4096), 4096, free_host, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "x", bi, 0, 1024, NULL), FHR_OK);
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, NULL, &h, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_value_info *vi = fhr_snapshot_value(s, h);
    cr_assert_eq(vi->spec_storage_nbytes, 4096);
    cr_assert_eq(vi->logical_nbytes, 1024);
    cr_assert_eq(vi->ncopies, 2);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(vi->copies[i].charged_nbytes, 4096);
        cr_assert_eq(vi->copies[i].storage_nbytes,
                     vi->copies[i].loc.kind == FHR_LOC_HOST ? 4096 : 1024);
    }
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->used_bytes, 4096);
    fhr_snapshot_free(s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(value, bad_arguments)
{
    fhr_value *v = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_value_create((fhr_location){FHR_LOC_INVALID, 0}, NULL, &v, &e), FHR_E_LOCATION);
    cr_assert_eq(fhr_value_create(fhr_loc_host(), NULL, &v, NULL), FHR_OK);
    char buf[16];
    size_t bi;
    cr_assert_eq(fhr_value_add_buffer(v, buf, 0, NULL, NULL, &bi, &e), FHR_E_INVALID);
    cr_assert_eq(fhr_value_add_buffer(v, buf, 16, NULL, NULL, &bi, &e), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "f", 1, 0, 4, &e), FHR_E_INVALID);
    cr_assert_eq(fhr_value_add_field(v, "f", 0, 10, 7, &e), FHR_E_INVALID);
    cr_assert(strstr(e.message, "outside buffer"), "%s", e.message);
    cr_assert_eq(fhr_value_add_field(v, "f", 0, 10, 6, &e), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "f", 0, 0, 1, &e), FHR_E_INVALID);
    fhr_value_destroy(v); /* borrowed buffer: not freed */
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    cr_assert_eq(fhr_value_create(fhr_loc_host(), NULL, &v, NULL), FHR_OK);
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, NULL, &h, &e), FHR_E_INVALID, "a value without fields");
    fhr_value_destroy(v);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* tests/tools/pngstat.c — is a screenshot blank? Decodes a non-interlaced 8-bit RGB or
 * RGBA PNG (what Chromium writes) with zlib and prints its size, the share of pixels that
 * differ from the top-left one, and how many distinct colours it has; exit 1 when the
 * picture is blank (under 1% of pixels differ or fewer than 4 colours), 2 when unreadable. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pngstat FILE.png\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n || n < 33 ||
        memcmp(b, "\x89PNG\r\n\x1a\n", 8) != 0) {
        fprintf(stderr, "%s: not a PNG\n", argv[1]);
        return 2;
    }
    fclose(f);
    uint32_t w = be32(b + 16), h = be32(b + 20);
    int depth = b[24], ctype = b[25], inter = b[28];
    int bpp = ctype == 2 ? 3 : ctype == 6 ? 4 : 0;
    if (depth != 8 || !bpp || inter || !w || !h || w > 20000 || h > 20000) {
        fprintf(stderr, "%s: unsupported PNG (depth %d, colour type %d)\n", argv[1], depth, ctype);
        return 2;
    }
    /* the IDAT chunks, concatenated, inflated */
    size_t zlen = 0;
    unsigned char *z = malloc((size_t)n);
    for (long p = 8; p + 12 <= n;) {
        uint32_t len = be32(b + p);
        if (p + 12 + (long)len > n)
            break;
        if (!memcmp(b + p + 4, "IDAT", 4)) {
            memcpy(z + zlen, b + p + 8, len);
            zlen += len;
        }
        p += 12 + (long)len;
    }
    size_t stride = (size_t)w * (size_t)bpp, rawlen = (stride + 1) * h;
    unsigned char *raw = malloc(rawlen);
    uLongf got = (uLongf)rawlen;
    if (!z || !raw || uncompress(raw, &got, z, (uLong)zlen) != Z_OK || got != rawlen) {
        fprintf(stderr, "%s: cannot inflate the image data\n", argv[1]);
        return 2;
    }
    unsigned char *px = malloc(stride * h);
    for (uint32_t y = 0; y < h; y++) {
        int ft = raw[y * (stride + 1)];
        const unsigned char *in = raw + y * (stride + 1) + 1;
        unsigned char *out = px + y * stride, *up = y ? px + (y - 1) * stride : NULL;
        for (size_t x = 0; x < stride; x++) {
            int a = x >= (size_t)bpp ? out[x - (size_t)bpp] : 0, u = up ? up[x] : 0;
            int c = x >= (size_t)bpp && up ? up[x - (size_t)bpp] : 0, v = in[x];
            v += ft == 1 ? a : ft == 2 ? u : ft == 3 ? (a + u) / 2 : ft == 4 ? paeth(a, u, c) : 0;
            out[x] = (unsigned char)v;
        }
    }
    /* how many pixels differ from the background (the top-left pixel); colours by a
     * small open-addressing set */
    uint64_t differ = 0;
    size_t cap = 1 << 16, ncol = 0;
    uint32_t *set = calloc(cap, sizeof *set);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        const unsigned char *p = px + i * (size_t)bpp;
        differ += memcmp(p, px, 3) != 0;
        uint32_t col = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2] | 1u << 24;
        size_t k = (col * 2654435761u) & (cap - 1);
        while (set[k] && set[k] != col)
            k = (k + 1) & (cap - 1);
        if (!set[k] && ncol < cap / 2) {
            set[k] = col;
            ncol++;
        }
    }
    double share = (double)differ / ((double)w * h);
    printf("%ux%u, %.1f%% of pixels differ from the background, %zu colours\n", w, h,
           100 * share, ncol);
    return share >= 0.01 && ncol >= 4 ? 0 : 1;
}

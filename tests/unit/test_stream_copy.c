/* SPDX-License-Identifier: BSD-3-Clause */
/* Streaming copies (base/stream_copy.h): every alignment of source and
 * destination, lengths around the 64-byte lines, and nothing written
 * outside [dst, dst + n). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/stream_copy.h"
#include "unit.h"

#define GUARD 128
#define FILL 0xA5

static const size_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 191, 1000, 4096 + 17, 65536 + 3};

int main(void)
{
    size_t maxn = 65536 + 3;
    unsigned char *src = malloc(maxn + 64), *buf = malloc(maxn + 64 + 2 * GUARD);
    CHECK(src && buf, "out of memory");
    if (!src || !buf) return unit_result("unit_stream_copy");
    for (size_t i = 0; i < maxn + 64; i++) src[i] = (unsigned char)(i * 131 + 7);
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        size_t n = lengths[li];
        for (size_t so = 0; so < 64; so += (n > 4096 ? 13 : 1)) {
            for (size_t d_off = 0; d_off < 64; d_off += (n > 4096 ? 7 : 1)) {
                memset(buf, FILL, maxn + 64 + 2 * GUARD);
                unsigned char *dst = buf + GUARD + d_off;
                mlc_copy_stream(dst, src + so, n);
                CHECK(memcmp(dst, src + so, n) == 0, "n=%zu src+%zu dst+%zu: the copy differs", n, so, d_off);
                size_t bad_before = 0, bad_after = 0;
                for (unsigned char *q = buf; q < dst; q++) bad_before += *q != FILL;
                for (unsigned char *q = dst + n; q < buf + maxn + 64 + 2 * GUARD; q++) bad_after += *q != FILL;
                CHECK(bad_before == 0 && bad_after == 0, "n=%zu src+%zu dst+%zu: %zu bytes before and %zu after dst written",
                      n, so, d_off, bad_before, bad_after);
            }
        }
    }
    free(src);
    free(buf);
    return unit_result("unit_stream_copy");
}

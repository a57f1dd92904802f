/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-trace: merge the per-rank traces that MLC_PROFILE=trace.%r.json
 * writes into one Chrome / Perfetto timeline (one process track per rank,
 * and in it one thread track per communicator of the rank).
 *
 *   mlcomm-trace -o job.json trace.0.json trace.1.json
 *   mlcomm-trace -o job.json -p trace.%r.json      ranks 0, 1, ... while the file exists
 *
 * A per-rank file is a JSON array, one event per line; a rank that was
 * killed leaves it without the closing bracket, and at worst with a last
 * event cut short. Both are accepted: the complete events are kept, a cut
 * event is dropped with a warning. Anything else that is not JSON is an
 * error naming the file and the byte offset. Every kept event is checked to
 * be one complete, valid JSON object and copied unchanged.
 *
 * Timestamps are each rank's microseconds since its first communicator was
 * created; ranks create it together (the backend's rendezvous ends just
 * before), so the tracks line up to within that rendezvous' skew.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool_version.h"

#define PROG "mlcomm-trace"
#define MAX_DEPTH 64
#define MAX_PATTERN_RANKS 1000000

/* ---- a strict JSON scanner ---------------------------------------------- */

typedef enum scan {
    SCAN_OK,
    SCAN_TRUNCATED, /* the text ended inside the value */
    SCAN_BAD        /* not JSON */
} scan_t;

typedef struct cursor {
    const char *s;
    size_t len, pos;
} cursor_t;

static void skip_ws(cursor_t *c)
{
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' ||
                               c->s[c->pos] == '\n' || c->s[c->pos] == '\r'))
        c->pos++;
}

static int peek(const cursor_t *c) { return c->pos < c->len ? (unsigned char)c->s[c->pos] : -1; }

static bool is_digit(int ch) { return ch >= '0' && ch <= '9'; }

static bool is_hex(int ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static scan_t scan_value(cursor_t *c, int depth);

static scan_t scan_literal(cursor_t *c, const char *word)
{
    for (const char *w = word; *w; w++, c->pos++) {
        if (c->pos >= c->len) return SCAN_TRUNCATED;
        if (c->s[c->pos] != *w) return SCAN_BAD;
    }
    return SCAN_OK;
}

static scan_t scan_string(cursor_t *c)
{
    c->pos++; /* the opening quote */
    while (c->pos < c->len) {
        unsigned char ch = (unsigned char)c->s[c->pos++];
        if (ch == '"') return SCAN_OK;
        if (ch < 0x20) return SCAN_BAD;
        if (ch != '\\') continue;
        if (c->pos >= c->len) return SCAN_TRUNCATED;
        ch = (unsigned char)c->s[c->pos++];
        if (ch == 'u') {
            for (int k = 0; k < 4; k++, c->pos++) {
                if (c->pos >= c->len) return SCAN_TRUNCATED;
                if (!is_hex(c->s[c->pos])) return SCAN_BAD;
            }
        } else if (!strchr("\"\\/bfnrt", ch)) {
            return SCAN_BAD;
        }
    }
    return SCAN_TRUNCATED;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? ; a number at the very end
 * of the text may have been cut, so that counts as truncated. */
static scan_t scan_number(cursor_t *c)
{
    if (peek(c) == '-') c->pos++;
    if (peek(c) < 0) return SCAN_TRUNCATED;
    if (peek(c) == '0') {
        c->pos++;
    } else if (is_digit(peek(c))) {
        while (is_digit(peek(c))) c->pos++;
    } else {
        return SCAN_BAD;
    }
    if (peek(c) == '.') {
        c->pos++;
        if (peek(c) < 0) return SCAN_TRUNCATED;
        if (!is_digit(peek(c))) return SCAN_BAD;
        while (is_digit(peek(c))) c->pos++;
    }
    if (peek(c) == 'e' || peek(c) == 'E') {
        c->pos++;
        if (peek(c) == '+' || peek(c) == '-') c->pos++;
        if (peek(c) < 0) return SCAN_TRUNCATED;
        if (!is_digit(peek(c))) return SCAN_BAD;
        while (is_digit(peek(c))) c->pos++;
    }
    return peek(c) < 0 ? SCAN_TRUNCATED : SCAN_OK;
}

/* Members or elements up to `close`, after the opening bracket. */
static scan_t scan_container(cursor_t *c, int depth, char close)
{
    c->pos++;
    skip_ws(c);
    if (peek(c) == close) {
        c->pos++;
        return SCAN_OK;
    }
    for (;;) {
        skip_ws(c);
        if (peek(c) < 0) return SCAN_TRUNCATED;
        scan_t st;
        if (close == '}') {
            if (peek(c) != '"') return SCAN_BAD;
            if ((st = scan_string(c)) != SCAN_OK) return st;
            skip_ws(c);
            if (peek(c) < 0) return SCAN_TRUNCATED;
            if (peek(c) != ':') return SCAN_BAD;
            c->pos++;
        }
        if ((st = scan_value(c, depth + 1)) != SCAN_OK) return st;
        skip_ws(c);
        int ch = peek(c);
        if (ch < 0) return SCAN_TRUNCATED;
        c->pos++;
        if (ch == close) return SCAN_OK;
        if (ch != ',') return SCAN_BAD;
    }
}

static scan_t scan_value(cursor_t *c, int depth)
{
    if (depth > MAX_DEPTH) return SCAN_BAD;
    skip_ws(c);
    switch (peek(c)) {
    case -1: return SCAN_TRUNCATED;
    case '{': return scan_container(c, depth, '}');
    case '[': return scan_container(c, depth, ']');
    case '"': return scan_string(c);
    case 't': return scan_literal(c, "true");
    case 'f': return scan_literal(c, "false");
    case 'n': return scan_literal(c, "null");
    default: return scan_number(c);
    }
}

/* ---- merging -------------------------------------------------------------- */

typedef struct merge {
    FILE *out;
    size_t events; /* written so far, over every file */
} merge_t;

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, PROG ": cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, PROG ": cannot read '%s': %s\n", path, buf ? strerror(errno) : "out of memory");
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Copy every complete event of one per-rank file to m->out. 0 or -1. */
static int merge_file(merge_t *m, const char *path)
{
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) return -1;
    cursor_t c = {text, len, 0};
    size_t kept = 0;
    const char *ending = "closed";
    int rc = 0;
    skip_ws(&c);
    if (peek(&c) != '[') {
        fprintf(stderr, PROG ": %s: not a trace (expected '[' at byte %zu)\n", path, c.pos);
        rc = -1;
        goto out;
    }
    c.pos++;
    for (bool need_comma = false;;) {
        skip_ws(&c);
        int ch = peek(&c);
        if (ch < 0) {
            ending = "not closed (the rank did not finish)";
            break;
        }
        if (ch == ']') {
            c.pos++;
            skip_ws(&c);
            if (peek(&c) >= 0) {
                fprintf(stderr, PROG ": %s: text after the closing ']' at byte %zu\n", path, c.pos);
                rc = -1;
            }
            break;
        }
        if (need_comma) {
            if (ch != ',') {
                fprintf(stderr, PROG ": %s: expected ',' or ']' at byte %zu\n", path, c.pos);
                rc = -1;
                break;
            }
            c.pos++;
            skip_ws(&c);
            if (peek(&c) < 0) {
                ending = "not closed (the rank did not finish)";
                break;
            }
        }
        size_t start = c.pos;
        if (peek(&c) != '{') {
            fprintf(stderr, PROG ": %s: expected an event object at byte %zu\n", path, c.pos);
            rc = -1;
            break;
        }
        scan_t st = scan_value(&c, 0);
        if (st == SCAN_TRUNCATED) {
            fprintf(stderr, PROG ": %s: dropped the last event, cut short at byte %zu (the rank was killed while writing it)\n",
                    path, start);
            ending = "not closed (the rank did not finish)";
            break;
        }
        if (st == SCAN_BAD) {
            fprintf(stderr, PROG ": %s: invalid JSON in the event at byte %zu (near byte %zu)\n", path,
                    start, c.pos);
            rc = -1;
            break;
        }
        fprintf(m->out, "%s", m->events ? ",\n" : "\n");
        fwrite(text + start, 1, c.pos - start, m->out);
        m->events++;
        kept++;
        need_comma = true;
    }
    if (rc == 0) fprintf(stderr, PROG ": %s: %zu events, %s\n", path, kept, ending);
out:
    free(text);
    return rc;
}

/* PATTERN with "%r" replaced by rank; false if it holds no %r or is too long. */
static bool expand(const char *pattern, int rank, char *out, size_t len)
{
    const char *at = strstr(pattern, "%r");
    if (!at) return false;
    int n = snprintf(out, len, "%.*s%d%s", (int)(at - pattern), pattern, rank, at + 2);
    return n > 0 && (size_t)n < len;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [-o OUT] TRACE...\n"
            "       " PROG " [-o OUT] -p PATTERN\n"
            "\n"
            "Merge the per-rank traces of MLC_PROFILE=PATTERN (e.g. trace.%%r.json) into one\n"
            "Chrome/Perfetto JSON timeline ({\"traceEvents\": [...]}), written to OUT or stdout.\n"
            "  -p PATTERN   read PATTERN with %%r = 0, 1, ... up to the first missing file\n"
            "  -o OUT       output file (default: standard output)\n"
            "  --version    the version and the backends compiled in\n"
            "Files of killed ranks (no closing ']', a last event cut short) are accepted;\n"
            "a summary per file goes to standard error. Exit status 1 on any error.\n");
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *pattern = NULL;
    int first_input = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            mlc_tool_print_version(PROG);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            pattern = argv[++i];
        } else if (strcmp(argv[i], "--") == 0) {
            first_input = i + 1;
            break;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, PROG ": unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            first_input = i;
            break;
        }
    }
    bool have_files = first_input < argc;
    if (have_files == (pattern != NULL)) {
        fprintf(stderr, PROG ": give either trace files or -p PATTERN\n");
        usage(stderr);
        return 2;
    }
    char path[4096];
    if (pattern && !expand(pattern, 0, path, sizeof path)) {
        fprintf(stderr, PROG ": -p '%s': the pattern needs %%r (the rank)\n", pattern);
        return 2;
    }
    /* Every named file must open before anything is written: a failed
     * merge writes no document. */
    for (int i = first_input; have_files && i < argc; i++) {
        FILE *probe = fopen(argv[i], "rb");
        if (!probe) {
            fprintf(stderr, PROG ": cannot open '%s': %s\n", argv[i], strerror(errno));
            return 1;
        }
        fclose(probe);
    }
    if (pattern && access(path, R_OK) != 0) { /* path: rank 0's file */
        fprintf(stderr, PROG ": -p %s: no file for rank 0 ('%s')\n", pattern, path);
        return 1;
    }
    merge_t m = {stdout, 0};
    if (out_path && !(m.out = fopen(out_path, "w"))) {
        fprintf(stderr, PROG ": cannot create '%s': %s\n", out_path, strerror(errno));
        return 1;
    }
    fprintf(m.out, "{\"traceEvents\":[");
    int rc = 0, files = 0;
    if (pattern) {
        for (int r = 0; r < MAX_PATTERN_RANKS && rc == 0; r++) {
            expand(pattern, r, path, sizeof path);
            FILE *probe = fopen(path, "rb");
            if (!probe) break; /* the ranks end at the first missing file (rank 0's is there) */
            fclose(probe);
            rc = merge_file(&m, path);
            files++;
        }
    } else {
        for (int i = first_input; i < argc && rc == 0; i++, files++) rc = merge_file(&m, argv[i]);
    }
    fprintf(m.out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"merged_by\":\"" PROG
                   "\",\"files\":%d}}\n", files);
    if (fflush(m.out) != 0 || ferror(m.out)) {
        fprintf(stderr, PROG ": writing %s failed: %s\n", out_path ? out_path : "stdout", strerror(errno));
        rc = -1;
    }
    if (out_path) {
        fclose(m.out);
        if (rc != 0) remove(out_path); /* no half-merged file left behind */
    }
    if (rc == 0) fprintf(stderr, PROG ": %d files, %zu events\n", files, m.events);
    return rc == 0 ? 0 : 1;
}

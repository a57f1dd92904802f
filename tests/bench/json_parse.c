/* SPDX-License-Identifier: BSD-3-Clause */
/* A tiny strict JSON parser for the tests (see json_parse.h). */
#include "json_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct parser {
    const char *s;
    size_t len, pos;
    char *err;
    size_t errlen;
} parser_t;

static json_t *fail(parser_t *p, const char *what)
{
    if (p->err[0] == '\0') snprintf(p->err, p->errlen, "%s at byte %zu", what, p->pos);
    return NULL;
}

static int cur(const parser_t *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }

static void ws(parser_t *p)
{
    while (cur(p) == ' ' || cur(p) == '\t' || cur(p) == '\n' || cur(p) == '\r') p->pos++;
}

static json_t *node(json_type_t t)
{
    json_t *v = calloc(1, sizeof *v);
    if (v) v->type = t;
    return v;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string at p->pos (on the quote); returns the decoded text. */
static char *string_at(parser_t *p)
{
    p->pos++;
    char *out = malloc(p->len - p->pos + 1);
    size_t o = 0;
    if (!out) return (char *)fail(p, "out of memory");
    while (cur(p) != '"') {
        int c = cur(p);
        if (c < 0) return free(out), (char *)fail(p, "unterminated string");
        if (c < 0x20) return free(out), (char *)fail(p, "control character in a string");
        p->pos++;
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        c = cur(p);
        p->pos++;
        switch (c) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            int code = 0;
            for (int k = 0; k < 4; k++, p->pos++) {
                int h = hexval(cur(p));
                if (h < 0) return free(out), (char *)fail(p, "bad \\u escape");
                code = code * 16 + h;
            }
            out[o++] = code < 0x80 ? (char)code : '?';
            break;
        }
        default: return free(out), (char *)fail(p, "bad escape");
        }
    }
    p->pos++;
    out[o] = '\0';
    return out;
}

static bool digits(parser_t *p)
{
    size_t start = p->pos;
    while (cur(p) >= '0' && cur(p) <= '9') p->pos++;
    return p->pos > start;
}

static json_t *number_at(parser_t *p)
{
    size_t start = p->pos;
    if (cur(p) == '-') p->pos++;
    if (cur(p) == '0') p->pos++;
    else if (!(cur(p) >= '1' && cur(p) <= '9') || !digits(p)) return fail(p, "bad number");
    if (cur(p) == '.') {
        p->pos++;
        if (!digits(p)) return fail(p, "bad fraction");
    }
    if (cur(p) == 'e' || cur(p) == 'E') {
        p->pos++;
        if (cur(p) == '+' || cur(p) == '-') p->pos++;
        if (!digits(p)) return fail(p, "bad exponent");
    }
    char buf[64];
    size_t n = p->pos - start;
    if (n >= sizeof buf) return fail(p, "number too long");
    memcpy(buf, p->s + start, n);
    buf[n] = '\0';
    json_t *v = node(JSON_NUMBER);
    if (!v) return fail(p, "out of memory");
    v->number = strtod(buf, NULL);
    return v;
}

static json_t *value_at(parser_t *p, int depth);

static bool append(json_t *v, json_t *item, char *key)
{
    json_t **items = realloc(v->items, (v->n + 1) * sizeof *items);
    if (!items) return false;
    v->items = items;
    if (v->type == JSON_OBJECT) {
        char **keys = realloc(v->keys, (v->n + 1) * sizeof *keys);
        if (!keys) return false;
        v->keys = keys;
        v->keys[v->n] = key;
    }
    v->items[v->n++] = item;
    return true;
}

static json_t *container_at(parser_t *p, int depth, json_type_t t)
{
    char close = t == JSON_OBJECT ? '}' : ']';
    json_t *v = node(t);
    if (!v) return fail(p, "out of memory");
    p->pos++;
    ws(p);
    if (cur(p) == close) {
        p->pos++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        ws(p);
        if (t == JSON_OBJECT) {
            if (cur(p) != '"') return json_free(v), fail(p, "expected a key");
            if (!(key = string_at(p))) return json_free(v), NULL;
            ws(p);
            if (cur(p) != ':') return free(key), json_free(v), fail(p, "expected ':'");
            p->pos++;
        }
        json_t *item = value_at(p, depth + 1);
        if (!item || !append(v, item, key)) {
            free(key);
            json_free(item);
            json_free(v);
            return fail(p, "bad member");
        }
        ws(p);
        if (cur(p) == close) {
            p->pos++;
            return v;
        }
        if (cur(p) != ',') return json_free(v), fail(p, "expected ',' or a closing bracket");
        p->pos++;
    }
}

static json_t *literal_at(parser_t *p, const char *word, json_type_t t, bool b)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return fail(p, "bad literal");
    p->pos += n;
    json_t *v = node(t);
    if (!v) return fail(p, "out of memory");
    v->boolean = b;
    return v;
}

static json_t *value_at(parser_t *p, int depth)
{
    if (depth > JSON_MAX_DEPTH) return fail(p, "nested too deep");
    ws(p);
    switch (cur(p)) {
    case -1: return fail(p, "unexpected end of text");
    case '{': return container_at(p, depth, JSON_OBJECT);
    case '[': return container_at(p, depth, JSON_ARRAY);
    case '"': {
        char *s = string_at(p);
        json_t *v = s ? node(JSON_STRING) : NULL;
        if (!v) return free(s), fail(p, "bad string");
        v->string = s;
        return v;
    }
    case 't': return literal_at(p, "true", JSON_BOOL, true);
    case 'f': return literal_at(p, "false", JSON_BOOL, false);
    case 'n': return literal_at(p, "null", JSON_NULL, false);
    default: return number_at(p);
    }
}

json_t *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    parser_t p = {text, len, 0, err, errlen};
    err[0] = '\0';
    json_t *v = value_at(&p, 0);
    if (!v) return NULL;
    ws(&p);
    if (p.pos != len) {
        json_free(v);
        return fail(&p, "text after the value");
    }
    return v;
}

void json_free(json_t *v)
{
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

const json_t *json_get(const json_t *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0) return v->items[i];
    return NULL;
}

char *json_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf && (n += fread(buf + n, 1, cap - n, f)) == cap) {
        char *bigger = realloc(buf, cap *= 2);
        if (!bigger) free(buf);
        buf = bigger;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A tiny strict JSON parser for the tests (RFC 8259: objects, arrays,
 * strings with escapes, numbers, true/false/null; nothing after the value
 * but whitespace). It is written apart from mlcomm-trace's scanner on
 * purpose: the test must not share the tool's mistakes.
 */
#ifndef MLC_TEST_JSON_PARSE_H
#define MLC_TEST_JSON_PARSE_H
#include <stdbool.h>
#include <stddef.h>

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type_t;

typedef struct json {
    json_type_t type;
    bool boolean;
    double number;
    char *string;        /* JSON_STRING: decoded (\uXXXX above 0x7f becomes '?') */
    size_t n;            /* JSON_ARRAY / JSON_OBJECT: number of items */
    struct json **items; /* values */
    char **keys;         /* JSON_OBJECT: the key of each item */
} json_t;

/* Parse text[0..len); NULL on error with a message (and byte offset) in err. */
json_t *json_parse(const char *text, size_t len, char *err, size_t errlen);
/* A whole file, malloc'ed (the caller frees it); NULL if it cannot be read. */
char *json_read_file(const char *path, size_t *len);
void json_free(json_t *v);
/* The value of key in an object, NULL if v is not an object or lacks it. */
const json_t *json_get(const json_t *v, const char *key);
#endif

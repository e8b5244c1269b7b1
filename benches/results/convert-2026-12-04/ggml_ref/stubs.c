// The few ggml.c functions ggml-quants.c calls, for the four types used here.
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include "ggml.h"
static size_t block_bytes(enum ggml_type t) {
    switch (t) { case GGML_TYPE_Q8_0: return 34; case GGML_TYPE_Q4_K: return 144;
                 case GGML_TYPE_Q5_K: return 176; case GGML_TYPE_Q6_K: return 210; default: return 0; }
}
static int64_t block_elems(enum ggml_type t) { return t == GGML_TYPE_Q8_0 ? 32 : 256; }
size_t ggml_type_size(enum ggml_type t) { return block_bytes(t); }
size_t ggml_row_size(enum ggml_type t, int64_t ne) { return block_bytes(t) * (ne / block_elems(t)); }
const char * ggml_type_name(enum ggml_type t) { (void) t; return "?"; }
void ggml_abort(const char * file, int line, const char * fmt, ...) { fprintf(stderr, "abort %s:%d\n", file, line); abort(); }

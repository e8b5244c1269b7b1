// Writes blocks quantized by ggml's reference quantizers (no importance matrix) for the rows in
// IN (little-endian f32, rows of N elements): argv: in out_prefix n_per_row
#include <stdio.h>
#include <stdlib.h>
#include "ggml.h"
#include "ggml-quants.h"
int main(int argc, char ** argv) {
    FILE * f = fopen(argv[1], "rb");
    fseek(f, 0, SEEK_END); long bytes = ftell(f); fseek(f, 0, SEEK_SET);
    float * x = malloc(bytes); fread(x, 1, bytes, f); fclose(f);
    int64_t n = atoll(argv[3]); int64_t rows = bytes / 4 / n;
    struct { const char * name; enum ggml_type t; } types[] = {
        {"q8_0", GGML_TYPE_Q8_0}, {"q4_k", GGML_TYPE_Q4_K}, {"q5_k", GGML_TYPE_Q5_K}, {"q6_k", GGML_TYPE_Q6_K}};
    for (int i = 0; i < 4; ++i) {
        size_t size = 512 * (n / 32) * rows;
        void * out = malloc(size);
        size_t written = types[i].t == GGML_TYPE_Q8_0 ? quantize_q8_0(x, out, rows, n, NULL) : types[i].t == GGML_TYPE_Q4_K ? quantize_q4_K(x, out, rows, n, NULL) : types[i].t == GGML_TYPE_Q5_K ? quantize_q5_K(x, out, rows, n, NULL) : quantize_q6_K(x, out, rows, n, NULL);
        char path[512]; snprintf(path, sizeof path, "%s.%s", argv[2], types[i].name);
        FILE * o = fopen(path, "wb"); fwrite(out, 1, written, o); fclose(o);
        printf("%s: %zu bytes\n", types[i].name, written);
    }
    return 0;
}

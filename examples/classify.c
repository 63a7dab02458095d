/* Kiln C API example: load a model, fill its inputs with pseudo-random data, run it once and
 * print the five largest entries of output 0 (the top-5 classes of a classifier).
 *
 *   usage: classify MODEL.onnx [THREADS]
 *
 * Build with CMake (see CMakeLists.txt) or pkg-config:
 *   cc -std=c99 classify.c $(pkg-config --cflags --libs kiln) -o classify
 */
#include <kiln/kiln.h>
#include <stdio.h>
#include <stdlib.h>

/* Prints and frees a failed status; returns 1 if `st` was an error. */
static int failed(kiln_status* st, const char* what) {
  if (!st) return 0;
  fprintf(stderr, "%s: %s (%s)\n", what, kiln_status_message(st),
          kiln_code_name(kiln_status_code(st)));
  kiln_status_release(st);
  return 1;
}

/* Deterministic pseudo-random floats in [-1, 1) (same sequence as classify.cpp). */
static float next_value(uint32_t* state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)(*state >> 8) / 8388608.0f - 1.0f;
}

int main(int argc, char** argv) {
  kiln_options opts;
  kiln_session* session = NULL;
  size_t n_in = 0, n_out = 0, i, k;
  const void** inputs = NULL;
  void** outputs = NULL;
  size_t* in_bytes = NULL;
  size_t* out_bytes = NULL;
  int rc = 1;
  uint32_t rng = 12345u;

  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s MODEL.onnx [THREADS]\n", argv[0]);
    return 2;
  }
  printf("kiln %s\n", kiln_version());
  if (failed(kiln_options_init(&opts), "kiln_options_init")) return 1;
  if (argc == 3) opts.threads = atoi(argv[2]);
  if (failed(kiln_session_create_from_file(argv[1], &opts, &session), "load")) return 1;

  if (failed(kiln_session_input_count(session, &n_in), "input count") ||
      failed(kiln_session_output_count(session, &n_out), "output count"))
    goto done;
  inputs = calloc(n_in ? n_in : 1, sizeof *inputs);
  in_bytes = calloc(n_in ? n_in : 1, sizeof *in_bytes);
  outputs = calloc(n_out, sizeof *outputs);
  out_bytes = calloc(n_out, sizeof *out_bytes);
  if (!inputs || !in_bytes || !outputs || !out_bytes) goto done;

  for (i = 0; i < n_in; ++i) {
    const char* name;
    const int64_t* dims;
    size_t rank;
    kiln_dtype dtype;
    void* buf;
    if (failed(kiln_session_input_name(session, i, &name), "input name") ||
        failed(kiln_session_input_shape(session, i, &dims, &rank), "input shape") ||
        failed(kiln_session_input_dtype(session, i, &dtype), "input dtype") ||
        failed(kiln_session_input_byte_size(session, i, &in_bytes[i]), "input size"))
      goto done;
    printf("input %u '%s': [", (unsigned)i, name);
    for (k = 0; k < rank; ++k) printf(k ? ",%lld" : "%lld", (long long)dims[k]);
    printf("]\n");
    buf = calloc(1, in_bytes[i] ? in_bytes[i] : 1);
    if (!buf) goto done;
    inputs[i] = buf;
    if (dtype == KILN_DTYPE_F32) {
      float* f = (float*)buf;
      for (k = 0; k < in_bytes[i] / sizeof(float); ++k) f[k] = next_value(&rng);
    } /* int64 inputs stay zero */
  }
  for (i = 0; i < n_out; ++i) {
    if (failed(kiln_session_output_byte_size(session, i, &out_bytes[i]), "output size")) goto done;
    outputs[i] = calloc(1, out_bytes[i] ? out_bytes[i] : 1);
    if (!outputs[i]) goto done;
  }

  if (failed(kiln_session_run(session, inputs, in_bytes, n_in, outputs, out_bytes, n_out), "run"))
    goto done;

  {
    /* Top-5 of output 0 by repeated selection (fine for 1000 classes). */
    const char* name;
    kiln_dtype dtype;
    const float* scores = (const float*)outputs[0];
    size_t n = out_bytes[0] / sizeof(float), top[5], n_top = n < 5 ? n : 5, t;
    if (failed(kiln_session_output_name(session, 0, &name), "output name") ||
        failed(kiln_session_output_dtype(session, 0, &dtype), "output dtype"))
      goto done;
    if (dtype != KILN_DTYPE_F32) {
      fprintf(stderr, "output 0 is not float32\n");
      goto done;
    }
    for (t = 0; t < n_top; ++t) {
      size_t best = n;
      for (k = 0; k < n; ++k) {
        size_t j;
        int taken = 0;
        for (j = 0; j < t; ++j) taken |= top[j] == k;
        if (!taken && (best == n || scores[k] > scores[best])) best = k;
      }
      top[t] = best;
    }
    printf("top-%u of output '%s' (%u values):\n", (unsigned)n_top, name, (unsigned)n);
    for (t = 0; t < n_top; ++t)
      printf("  #%u  class %u  score %.6f\n", (unsigned)(t + 1), (unsigned)top[t], scores[top[t]]);
  }
  rc = 0;

done:
  for (i = 0; inputs && i < n_in; ++i) free((void*)inputs[i]);
  for (i = 0; outputs && i < n_out; ++i) free(outputs[i]);
  free(inputs);
  free(outputs);
  free(in_bytes);
  free(out_bytes);
  kiln_session_release(session);
  return rc;
}
